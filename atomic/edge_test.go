package atomic_test

import (
	"math"
	"math/bits"
	"sync"
	satomic "sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/table"
	"github.com/admit-go/admit/locked"
)

// clockEnd is the end of the kernels' clock range: they clamp every reading
// to ±clockEnd (2^62-1 ns, 146 years either side of the clock's origin).
const clockEnd time.Duration = 1<<62 - 1

// addSat is a+b, saturated at the ends of time.Duration.
func addSat(a, b time.Duration) time.Duration {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// drawReading draws the next clock reading after now, for a rule whose
// window is w: near either end of the clock range (just inside, on it, just
// outside), at the ends of int64, a jump of 2^62 either way, a mirror jump to
// the other end of the range (so that a stale reading lies a whole range
// away from the newest), anywhere, or a small step either way.
func drawReading(rt *rapid.T, now, w time.Duration) time.Duration {
	small := func(label string) time.Duration {
		return time.Duration(rapid.Int64Range(-2*int64(min(w, 1<<40)), 2*int64(min(w, 1<<40))).Draw(rt, label))
	}
	switch rapid.IntRange(0, 7).Draw(rt, "move") {
	case 0:
		end := rapid.SampledFrom([]time.Duration{clockEnd, -clockEnd}).Draw(rt, "end")
		return addSat(end, time.Duration(rapid.Int64Range(-3, 3).Draw(rt, "off")))
	case 1:
		end := rapid.SampledFrom([]time.Duration{clockEnd, -clockEnd}).Draw(rt, "end")
		return addSat(end, small("near"))
	case 2:
		return rapid.SampledFrom([]time.Duration{math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64}).Draw(rt, "int64")
	case 3:
		jump := rapid.SampledFrom([]time.Duration{1 << 62, -1 << 62}).Draw(rt, "jump")
		return addSat(addSat(now, jump), small("by"))
	case 4:
		return addSat(-now, small("mirror")) // -MinInt64 is MinInt64: still an end
	case 5:
		return time.Duration(rapid.Int64().Draw(rt, "anywhere"))
	default:
		return addSat(now, small("step"))
	}
}

// drawLimit draws a Limit, often one at a bit-width boundary.
func drawLimit(rt *rapid.T, hi int) int {
	switch rapid.IntRange(0, 2).Draw(rt, "limitKind") {
	case 0:
		return rapid.IntRange(1, min(4, hi)).Draw(rt, "limit")
	case 1:
		k := rapid.IntRange(1, bits.Len(uint(hi))).Draw(rt, "limitBits")
		return min(hi, max(1, 1<<k-1+rapid.IntRange(0, 1).Draw(rt, "limitPlus")))
	}
	return rapid.IntRange(1, hi).Draw(rt, "limit")
}

// drawWindowRule draws a fixed-window or sliding-counter rule, its window
// often the shortest the limit allows (the packed words' worst case) or near
// 2^(2cb-1) ns, where the packed sliding counter's index stops fitting.
func drawWindowRule(rt *rapid.T, alg admit.Algorithm, maxLimit int) admit.Rule {
	limit := drawLimit(rt, maxLimit)
	lo, hi := int64(limit), int64(admit.MaxLimitTimesWindow)/int64(limit)
	var w int64
	switch rapid.IntRange(0, 2).Draw(rt, "windowKind") {
	case 0:
		w = lo + rapid.Int64Range(0, 3).Draw(rt, "window")
	case 1:
		w = 1<<(2*bits.Len(uint(limit))-1) + rapid.Int64Range(-2, 2).Draw(rt, "window")
	default:
		w = rapid.Int64Range(lo, hi).Draw(rt, "window")
	}
	return admit.Rule{Algorithm: alg, Limit: limit, Window: time.Duration(max(lo, min(w, hi)))}
}

// drawPackableBucket draws a token-bucket rule whose emission interval is a
// whole number of nanoseconds, the packed bucket's rules.
func drawPackableBucket(rt *rapid.T) admit.Rule {
	limit := drawLimit(rt, admit.MaxLimit)
	hi := int64(admit.MaxLimitTimesWindow) / int64(limit) / int64(limit)
	per := rapid.SampledFrom([]int64{1, 2, hi, rapid.Int64Range(1, max(1, hi)).Draw(rt, "perToken")}).Draw(rt, "per")
	return admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: time.Duration(max(1, min(per, hi)) * int64(limit))}
}

// newKeyedEdge returns New's limiter of r, or nil, once New has refused it
// as it must, for a rule whose state does not pack in the table's word (a
// sliding counter), which then runs on the single key alone.
func newKeyedEdge(t require.TestingT, r admit.Rule, fake *clock.Fake) admit.KeyedLimiter {
	keyed, err := admitatomic.New(r, admit.WithClock(fake))
	if !table.Packs(r) {
		require.ErrorIs(t, err, admit.ErrUnsupported, "New(%v)", r)
		return nil
	}
	require.NoError(t, err)
	return keyed
}

// checkEdges drives a single-key and a keyed limiter built by newSingle and
// New (newKeyedEdge) from rules drawn by drawRule, with readings drawn by
// drawReading, and requires the kernel's Decisions: the single limiter
// mirrors key "a".
func checkEdges(t *testing.T, drawRule func(*rapid.T) admit.Rule, newSingle func(admit.Rule, ...admit.Option) (admit.Limiter, error)) {
	rapid.Check(t, func(rt *rapid.T) {
		r := drawRule(rt)
		fake := clock.NewFake()
		fake.Set(drawReading(rt, 0, r.Window))
		single, err := newSingle(r, admit.WithClock(fake))
		require.NoError(rt, err)
		keyed := newKeyedEdge(rt, r, fake)
		want := conformance.NewOracle(r)
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			if rapid.IntRange(0, 2).Draw(rt, "op") == 0 {
				fake.Set(drawReading(rt, fake.Now(), r.Window))
				continue
			}
			n := rapid.SampledFrom([]int{0, 1, 1, 1, 2, r.Limit, r.Limit + 1}).Draw(rt, "n")
			key := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key")
			now := fake.Now()
			exp := want.Allow(key, now, n)
			if keyed != nil {
				if got := keyed.AllowN(key, n); got != exp {
					rt.Fatalf("%v op %d: keyed AllowN(t=%d, %q, %d) = %+v, want %+v", r, i, now, key, n, got, exp)
				}
			}
			if key == "a" {
				if got := single.AllowN(n); got != exp {
					rt.Fatalf("%v op %d: AllowN(t=%d, %d) = %+v, want %+v", r, i, now, n, got, exp)
				}
			}
		}
	})
}

// TestEdgesTokenBucket: the packed bucket (NewTokenBucket, and New for the
// same rules) equals the kernel at the ends of the clock range.
func TestEdgesTokenBucket(t *testing.T) {
	checkEdges(t, drawPackableBucket, func(r admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
		return admitatomic.NewTokenBucket(r, opts...)
	})
}

// drawAnyBucket draws any token-bucket rule: often one the documentation
// quotes (3 per second, 7 per minute, 9,999 per second), whose emission
// interval is not whole nanoseconds, a short horizon (a Limit coprime with
// the window's nanoseconds), or any valid rule.
func drawAnyBucket(rt *rapid.T) admit.Rule {
	switch rapid.IntRange(0, 3).Draw(rt, "bucketKind") {
	case 0:
		return rapid.SampledFrom([]admit.Rule{
			{Algorithm: admit.TokenBucket, Limit: 3, Window: time.Second},
			{Algorithm: admit.TokenBucket, Limit: 7, Window: time.Minute},
			{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second},
			{Algorithm: admit.TokenBucket, Limit: 3, Window: 10 * time.Second},
		}).Draw(rt, "quoted")
	case 1:
		return drawPackableBucket(rt)
	}
	limit := drawLimit(rt, admit.MaxLimit)
	hi := int64(admit.MaxLimitTimesWindow) / int64(limit)
	w := rapid.SampledFrom([]int64{int64(limit), int64(limit) + 1, hi, rapid.Int64Range(int64(limit), hi).Draw(rt, "anyWindow")}).Draw(rt, "window")
	return admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: time.Duration(max(int64(limit), min(w, hi)))}
}

// TestEdgesAnyTokenBucket: the packed bucket in scaled units equals the
// kernel for every rule, over readings anywhere in the clock range (stale,
// at its ends, past them), within the word's horizon and past it, where the
// state spills (hold.go).
func TestEdgesAnyTokenBucket(t *testing.T) {
	checkEdges(t, drawAnyBucket, func(r admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
		return admitatomic.NewTokenBucket(r, opts...)
	})
}

// TestTokenBucketSpillBoundary: 9,999 per second packs in units of 1/9999
// ns, so its word holds a TAT up to ±(MaxInt64/9999 − 1) ns, 10.7 days from
// the clock's origin. An admission whose TAT lands exactly there stays in
// the word (the bucket is decided lock-free), the next one spills, and every
// decision, on both sides and back, reservations and cancellations
// included, is the reference's (locked, the kernel under a mutex).
func TestTokenBucketSpillBoundary(t *testing.T) {
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	const horizon = math.MaxInt64/9999 - 1
	fake := clock.NewFake()
	lim, err := admitatomic.NewTokenBucket(r, admit.WithClock(fake))
	require.NoError(t, err)
	ref, err := locked.NewLimiter(r, admit.WithClock(fake))
	require.NoError(t, err)
	refRes := ref.(admit.Reserver)
	// A full bucket admits at t with TAT t + 10^9/9999 ns (100,010 + 10/9999),
	// so TAT = horizon (its fraction of a nanosecond past it still fits: the bound
	// is on whole nanoseconds) for t = horizon − 100,010 ns.
	call := func(at time.Duration, n int, packed bool) {
		t.Helper()
		fake.Set(at)
		want := ref.AllowN(n)
		got := lim.AllowN(n)
		require.Equal(t, want, got, "AllowN(t=%d, %d)", at, n)
		require.Equal(t, packed, !admitatomic.Held(lim), "after AllowN(t=%d, %d): packed", at, n)
	}
	call(horizon-100_010, 1, true)  // TAT = horizon + 10/9999 ns: packs
	call(horizon-100_010, 0, true)  // a probe publishes nothing
	call(horizon-100_009, 1, false) // TAT one token later: spills
	call(horizon-100_009, 1, false)
	call(horizon, 9999, false) // denied: still spilled
	call(horizon+time.Second, 9999, false)
	call(-horizon, 1, false) // stale, far back: denied, still spilled
	// A reservation and its cancellation on the spilled bucket.
	fake.Set(horizon + 2*time.Second)
	for range 3 {
		wantR, wantOK := refRes.ReserveN(9999, time.Hour)
		gotR, gotOK := lim.ReserveN(9999, time.Hour)
		require.Equal(t, wantOK, gotOK)
		require.Equal(t, wantR.Delay, gotR.Delay)
		if wantR.Delay > 0 {
			require.Equal(t, refRes.CancelReservation(wantR), lim.CancelReservation(gotR))
		}
	}
	call(horizon+2*time.Second, 1, false)
	// Back inside the horizon, a fake clock set back finds the spilled TAT
	// ahead of it: denied, exactly as the reference.
	call(time.Hour, 1, false)
}

// TestEdgesFixedWindow: the packed fixed window (NewFixedWindow, and New)
// equals the kernel at the ends of the clock range, over every Limit.
func TestEdgesFixedWindow(t *testing.T) {
	checkEdges(t, func(rt *rapid.T) admit.Rule { return drawWindowRule(rt, admit.FixedWindow, admit.MaxLimit) },
		func(r admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
			return admitatomic.NewFixedWindow(r, opts...)
		})
}

// TestEdgesSlidingCounter: the sliding counter in the form NewLimiter and New
// choose (packed, or the snapshot where the packed index would not cover the
// clock range) equals the kernel at the ends of the clock range.
func TestEdgesSlidingCounter(t *testing.T) {
	checkEdges(t, func(rt *rapid.T) admit.Rule { return drawWindowRule(rt, admit.SlidingCounter, 1<<17) }, admitatomic.NewLimiter)
}

// step is a call AllowN(n) at reading at.
type step struct {
	at time.Duration
	n  int
}

// TestHorizonRegressions: the packed windows once restored a stored window
// index modulo their index bits, nearest to the caller's, which aliased for
// readings further apart than 2^(63-cb) windows (2^(63-2cb) for the sliding
// counter) though still inside the clock range: a stale reading at one end
// then saw a fresh window and was admitted where the newest reading, at the
// other end, is denied.
func TestHorizonRegressions(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		steps []step
	}{
		{"fixed-window,1,1ns", []step{{clockEnd, 1}, {-clockEnd, 1}}},
		{"fixed-window,2147483647,2147483647ns", []step{{clockEnd, 1}, {-clockEnd, 1}, {-clockEnd, 0}}},
		{"sliding-counter,2,2ns", []step{{clockEnd, 2}, {-clockEnd, 1}, {-clockEnd, 0}, {clockEnd, 1}}},
	} {
		r, err := admit.ParseRule(tc.rule)
		require.NoError(t, err)
		fake := clock.NewFake()
		single, err := admitatomic.NewLimiter(r, admit.WithClock(fake))
		require.NoError(t, err)
		keyed := newKeyedEdge(t, r, fake)
		want := conformance.NewOracle(r)
		for i, st := range tc.steps {
			fake.Set(st.at)
			exp := want.Allow("k", st.at, st.n)
			if got := single.AllowN(st.n); got != exp {
				t.Errorf("%s step %d: AllowN(t=%d, %d) = %+v, want %+v", r, i, st.at, st.n, got, exp)
			}
			if keyed == nil {
				continue
			}
			if got := keyed.AllowN("k", st.n); got != exp {
				t.Errorf("%s step %d: keyed AllowN(t=%d, %q, %d) = %+v, want %+v", r, i, st.at, "k", st.n, got, exp)
			}
		}
	}
}

// TestTokenBucketSpillHammer: goroutines racing on a 9,999-per-second
// bucket whose word crosses its horizon during the race (the clock frozen
// just short of it, so that the first admissions pack and the later ones
// spill), and on one frozen far past it (every admission spilled), single-key
// and keyed, admit exactly the limit: no admission is lost or doubled where
// the state leaves the word, nor under the spilled state's mutex. The
// goroutines start together on a channel; nothing sleeps.
func TestTokenBucketSpillHammer(t *testing.T) {
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	const horizon = math.MaxInt64/9999 - 1
	for _, at := range []time.Duration{horizon - time.Second + 500*time.Millisecond, horizon + time.Hour} {
		fake := clock.NewFake()
		fake.Set(at)
		single, err := admitatomic.NewLimiter(r, admit.WithClock(fake))
		require.NoError(t, err)
		keyed, err := admitatomic.New(r, admit.WithClock(fake))
		require.NoError(t, err)
		for name, allow := range map[string]func(n int) bool{
			"single": func(n int) bool { return single.AllowN(n).Allowed },
			"keyed":  func(n int) bool { return keyed.AllowN("k", n).Allowed },
		} {
			var admitted satomic.Int64
			start := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					n := 1 + g%3 // weights 1, 2 and 3
					for misses := 0; misses < 3; {
						if allow(n) {
							admitted.Add(int64(n))
						} else if n > 1 {
							n--
						} else {
							misses++
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			require.Equal(t, int64(r.Limit), admitted.Load(), "%s at t=%d: admitted", name, at)
			require.False(t, allow(1), "%s at t=%d: the bucket is spent", name, at)
		}
		require.True(t, admitatomic.Held(single.(*admitatomic.TokenBucket)), "at t=%d the state spilled", at)
	}
}

// TestSpillReservations: around a 9,999-per-second bucket's horizon, where
// its state moves between the word, the spilled record and a reservation's
// hold, generated sequences of AllowN, ReserveN and CancelReservation (with
// the clock moving both ways) decide exactly as the locked reference, single
// key and keyed (New's table).
func TestSpillReservations(t *testing.T) {
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	const horizon = math.MaxInt64/9999 - 1
	rapid.Check(t, func(rt *rapid.T) {
		fake := clock.NewFake()
		fake.Set(horizon - time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(rt, "start")))
		single, err := admitatomic.NewTokenBucket(r, admit.WithClock(fake))
		require.NoError(rt, err)
		ref, err := locked.NewLimiter(r, admit.WithClock(fake))
		require.NoError(rt, err)
		keyedLim, err := admitatomic.New(r, admit.WithClock(fake))
		require.NoError(rt, err)
		keyedRef, err := locked.New(r, admit.WithClock(fake))
		require.NoError(rt, err)
		keyed, kref := keyedLim, keyedRef
		type pair struct{ got, want admit.Reservation }
		var held []pair
		var heldKeyed []pair
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0:
				fake.Set(fake.Now() + time.Duration(rapid.Int64Range(-int64(time.Second), int64(time.Second)).Draw(rt, "step")))
			case 1:
				n := rapid.IntRange(1, r.Limit).Draw(rt, "n")
				maxWait := time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "maxWait"))
				g, gok := single.ReserveN(n, maxWait)
				w, wok := ref.(admit.Reserver).ReserveN(n, maxWait)
				if gok != wok || g.Delay != w.Delay {
					rt.Fatalf("op %d: ReserveN(t=%d, %d, %v) = %v, %v; want %v, %v", i, fake.Now(), n, maxWait, g.Delay, gok, w.Delay, wok)
				}
				held = append(held, pair{g, w})
				g, gok = keyed.ReserveN("k", n, maxWait)
				w, wok = kref.ReserveN("k", n, maxWait)
				if gok != wok || g.Delay != w.Delay {
					rt.Fatalf("op %d: keyed ReserveN(t=%d, %d, %v) = %v, %v; want %v, %v", i, fake.Now(), n, maxWait, g.Delay, gok, w.Delay, wok)
				}
				heldKeyed = append(heldKeyed, pair{g, w})
			case 2:
				if len(held) > 0 {
					j := rapid.IntRange(0, len(held)-1).Draw(rt, "which")
					if g, w := single.CancelReservation(held[j].got), ref.(admit.Reserver).CancelReservation(held[j].want); g != w {
						rt.Fatalf("op %d: CancelReservation(t=%d) = %v, want %v", i, fake.Now(), g, w)
					}
					if g, w := keyed.CancelReservation("k", heldKeyed[j].got), kref.CancelReservation("k", heldKeyed[j].want); g != w {
						rt.Fatalf("op %d: keyed CancelReservation(t=%d) = %v, want %v", i, fake.Now(), g, w)
					}
				}
			default:
				n := rapid.SampledFrom([]int{0, 1, 1, 2, 100, r.Limit}).Draw(rt, "allowN")
				if g, w := single.AllowN(n), ref.AllowN(n); g != w {
					rt.Fatalf("op %d: AllowN(t=%d, %d) = %+v, want %+v", i, fake.Now(), n, g, w)
				}
				if g, w := keyedLim.AllowN("k", n), keyedRef.AllowN("k", n); g != w {
					rt.Fatalf("op %d: keyed AllowN(t=%d, %d) = %+v, want %+v", i, fake.Now(), n, g, w)
				}
			}
		}
	})
}
