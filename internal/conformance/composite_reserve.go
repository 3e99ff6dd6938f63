package conformance

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// Reservations that take and give back in every rule, and the memory a
// held composite gives back.

// reserverOf returns, for a key, the calls of a reserving limiter on it:
// reserve n with no bound on the wait, cancel a reservation, and AllowN
// with the binding rule.
type reserverOf func(key string) (reserve func(n int) admit.Reservation, cancel func(admit.Reservation) bool, allow func(n int) (admit.Decision, int))

// compositeReservers returns v's reserving limiters of l (all token
// buckets), by name: "keyed" if NewLimits' has ReserveN, and
// "single" if NewLimitsLimiter's is an admit.Reserver, where each key is a
// limiter of its own.
func compositeReservers(t tester, v CompositeVariant, l admit.Limits, fake *clock.Fake) map[string]reserverOf {
	out := map[string]reserverOf{}
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	if kr, ok := lim.(keyedReserver); ok {
		ck, ok := lim.(compositeKeyed)
		require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
		out["keyed"] = func(key string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) (admit.Decision, int)) {
			return func(n int) admit.Reservation {
					r, ok := kr.ReserveN(key, n, admit.Never)
					require.True(t, ok, "ReserveN(%q, %d)", key, n)
					return r
				}, func(r admit.Reservation) bool { return kr.CancelReservation(key, r) },
				func(n int) (admit.Decision, int) { return ck.AllowNWhich(key, n) }
		}
	}
	if v.NewLimitsLimiter != nil {
		probe, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(t, err)
		if _, ok := probe.(admit.Reserver); ok {
			singles := map[string]admit.Limiter{}
			out["single"] = func(key string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) (admit.Decision, int)) {
				lim, ok := singles[key]
				if !ok {
					made, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
					require.NoError(t, err)
					lim, singles[key] = made, made
				}
				r := lim.(admit.Reserver)
				cl, ok := lim.(admit.CompositeLimiter)
				require.True(t, ok, "NewLimitsLimiter(%v) is an admit.CompositeLimiter", l)
				return func(n int) admit.Reservation {
					res, ok := r.ReserveN(n, admit.Never)
					require.True(t, ok, "ReserveN(%d)", n)
					return res
				}, r.CancelReservation, cl.AllowNWhich
			}
		}
	}
	return out
}

// implements reports whether x is an I.
func implements[I any](x any) bool {
	_, ok := x.(I)
	return ok
}

// testCompositeReserve checks, for a variant whose limiters of token
// buckets reserve, that a reservation takes its tokens in every rule and a
// cancellation gives them back in every rule, at most once, only where it
// was made and never at a reading older than one that saw them due; and
// that ReserveN equals kernel.Composite.Reserve over generated calls.
func testCompositeReserve(t *testing.T, v CompositeVariant) {
	// 1 per second and 3 per minute (a token every 20s).
	l := mustLimits(t, "token-bucket,1,1s + token-bucket,3,1m")
	if len(compositeReservers(t, v, l, clock.NewFake())) == 0 {
		t.Skip("no keyed ReserveN or admit.Reserver for a composite of token buckets")
	}
	t.Run("EveryRule", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			fake.Set(0)
			reserve, _, allow := of("k")
			oracle := NewCompositeOracle(l)
			check := func(n int) {
				t.Helper()
				want, wantWhich := oracle.Allow("k", fake.Now(), n)
				got, which := allow(n)
				assert.True(t, got == want && which == wantWhich, "%s: AllowNWhich(t=%v, %d) = %+v, rule %d; want %+v, rule %d", name, fake.Now(), n, got, which, want, wantWhich)
			}
			check(1)
			r := reserve(1)
			d, _, _ := oracle.Reserve("k", 0, 1, admit.Never)
			assert.Equal(t, time.Second, r.Delay, name)
			assert.Equal(t, d, r.Delay, name)
			fake.Set(2 * time.Second)
			check(1)
			// The reservation took a token of the minute's rule too: at 3s
			// the second's has one, the minute's none.
			fake.Set(3 * time.Second)
			check(1)
			got, which := allow(0)
			assert.Equal(t, 0, got.Remaining, "%s: the minute's rule has spent 3 tokens", name)
			assert.Equal(t, 1, which, "%s: and binds", name)
			got, which = allow(1)
			assert.False(t, got.Allowed, "%s: the minute's rule has spent 3 tokens", name)
			assert.Equal(t, 1, which, name)
			assert.Equal(t, 17*time.Second, got.RetryAfter, name)
		}
	})
	t.Run("GivesBackEveryRule", func(t *testing.T) {
		// A key that reserved and cancelled decides from then on as its
		// twin, which did neither.
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			fake.Set(0)
			reserve, cancel, allow := of("r")
			_, _, twin := of("t")
			allow(1)
			twin(1)
			r := reserve(1)
			require.Positive(t, r.Delay, name)
			require.True(t, cancel(r), "%s: the latest reservation, not yet due", name)
			for _, at := range []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 20 * time.Second, 40 * time.Second, 41 * time.Second, time.Minute} {
				fake.Set(at)
				got, which := allow(1)
				want, wantWhich := twin(1)
				assert.True(t, got == want && which == wantWhich, "%s: AllowNWhich(t=%v, 1) = %+v, rule %d after a cancellation; the twin's %+v, rule %d", name, at, got, which, want, wantWhich)
			}
		}
	})
	t.Run("Twice", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			fake.Set(0)
			reserve, cancel, allow := of("k")
			allow(1)
			cancelTwice(t, name, reserve, cancel, time.Second)
		}
	})
	t.Run("OtherKey", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			resX, cancelX, allowX := of("x")
			resY, cancelY, allowY := of("y")
			allowX(1)
			allowY(1)
			rX, rY := resX(1), resY(1)
			require.False(t, cancelY(rX), "%s: x's reservation must not free y's tokens", name)
			require.False(t, cancelX(rY), "%s: nor y's x's", name)
			require.True(t, cancelX(rX), "%s: a reservation presented elsewhere can still be cancelled where it was made", name)
			require.True(t, cancelY(rY), name)
		}
	})
	t.Run("StaleReading", func(t *testing.T) {
		for _, n := range []int{0, 1} {
			fake := clock.NewFake()
			for name, of := range compositeReservers(t, v, l, fake) {
				fake.Set(time.Hour)
				reserve, cancel, allow := of("k")
				allow(1)
				r := reserve(1) // due at 1h+1s
				fake.Set(time.Hour + r.Delay + 500*time.Millisecond)
				allow(n) // sees the tokens due
				fake.Set(time.Hour + r.Delay/2)
				require.False(t, cancel(r), "%s: AllowN(%d) saw the tokens due; a cancel at an older reading is stale", name, n)
				fake.Set(time.Hour + r.Delay + 500*time.Millisecond)
				d, _ := allow(1)
				require.False(t, d.Allowed, "%s: the reservation's token is spent", name)
			}
		}
	})
	t.Run("Differential", func(t *testing.T) {
		if lim, err := v.NewLimits(l); err != nil || !implements[keyedReserver](lim) {
			t.Skip("no ReserveN")
		}
		rapid.Check(t, func(rt *rapid.T) {
			l, fake, lim := drawComposite(rt, v, 2, 3, true)
			kr, ok := lim.(keyedReserver)
			if !ok {
				rt.Fatalf("NewLimits(%v) has no ReserveN, but NewLimits(%v) has", l, mustLimits(rt, "token-bucket,1,1s + token-bucket,3,1m"))
			}
			oracle := NewCompositeOracle(l)
			keys := []string{"a", "b"}
			for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
				key, n, now, call := drawCall(rt, fake, l, keys, l.Limit())
				if !call {
					continue
				}
				if rapid.Bool().Draw(rt, "reserve") {
					maxWait := rapid.SampledFrom([]time.Duration{0, l.At(0).Window / 2, admit.Never}).Draw(rt, "maxWait")
					d, ok, _ := oracle.Reserve(key, now, n, maxWait)
					if r, got := kr.ReserveN(key, n, maxWait); r.Delay != d || got != ok {
						rt.Fatalf("%v op %d: ReserveN(t=%v, %q, %d, %v) = %v, %t; kernel %v, %t", l, i, now, key, n, maxWait, r.Delay, got, d, ok)
					}
					continue
				}
				want, _ := oracle.Allow(key, now, n)
				if got := kr.AllowN(key, n); got != want {
					rt.Fatalf("%v op %d: AllowN(t=%v, %q, %d) = %+v, kernel %+v", l, i, now, key, n, got, want)
				}
			}
		})
	})
}

// CompositeHeldMemoryReturns is the keyed-store check HeldMemoryReturns
// for v's keyed stores of a composite of token buckets, which must be local
// stores that reserve, as every keyed composite store of packages locked
// and sharded is: each key spends its first bucket and reserves a token due
// later, leaving a hold (or a held cell's record); once the tokens are due
// and a sweep has evicted every key, the memory of the holds must be back.
func CompositeHeldMemoryReturns(t *testing.T, v CompositeVariant) {
	if v.Remote {
		t.Fatalf("conformance.CompositeHeldMemoryReturns(%s): a remote variant has no local store", v.Name)
	}
	n := memoryKeys(20_000, 5_000, 10_000) // a composite's hold is about 1 KiB
	l := mustLimits(t, "token-bucket,5,1s + token-bucket,50,1m")
	fake := clock.NewFake()
	fake.Set(time.Hour)
	base := heapInUse()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	res, ok := lim.(keyedReserver)
	require.True(t, ok, "%s.NewLimits(%v) has no ReserveN", v.Name, l)
	holds, swept := spendHoldSweep(t, l, lim, res, lim.(admit.CompositeStore), fake, base, n)
	// Each hold is a large record behind a small map entry, so the map that
	// was kept took only 4% of what the holds took: the bound is 1/64.
	assert.LessOrEqual(t, swept, holds/64, "%v: heap kept after evicting all %d held keys, of the %d bytes their holds took", l, n, holds)
	runtime.KeepAlive(lim)
}
