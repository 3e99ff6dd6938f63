package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// testReserveAsAllow checks, for a keyed limiter with ReserveN (every
// local store, whatever its rule), that ReserveN with maxWait 0 decides
// exactly as AllowN:
// two limiters on one clock, one driven by AllowN and the other by ReserveN,
// give the same answers (a refused reservation's Delay is the denial's
// RetryAfter), and a probe after every call sees the same state in both. Both
// are swept at the same moments, and half of the runs bound the store to two
// keys, so that the full-store path and eviction are covered too.
func testReserveAsAllow(t *testing.T, v Variant, alg admit.Algorithm) {
	probe, err := v.New(admit.Rule{Algorithm: alg, Limit: 1, Window: time.Second})
	require.NoError(t, err)
	if _, ok := probe.(keyedReserver); !ok {
		t.Skip("no ReserveN")
	}
	rapid.Check(t, func(rt *rapid.T) {
		rule := drawTaken(rt, v, alg)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		opts := []admit.Option{admit.WithClock(fake), admit.WithShards(1)}
		if rapid.Bool().Draw(rt, "full") {
			opts = append(opts, admit.WithMaxKeys(2))
		}
		allowing, err := v.New(rule, opts...)
		require.NoError(rt, err)
		lim, err := v.New(rule, opts...)
		require.NoError(rt, err)
		reserving := lim.(keyedReserver)
		keys := []string{"a", "b", "c"}
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*rule.Window)).Draw(rt, "advance")))
			case 2:
				fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
			case 3:
				if s, ok := allowing.(storeLimiter); ok {
					require.Equal(rt, s.Sweep(), reserving.(storeLimiter).Sweep(), "op %d: Sweep", i)
				}
			default:
				n := rapid.IntRange(-1, rule.Limit+1).Draw(rt, "n")
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				d := allowing.AllowN(key, n)
				r, ok := reserving.ReserveN(key, n, 0)
				if ok != d.Allowed || (ok && r.Delay != 0) || (!ok && r.Delay != d.RetryAfter) {
					rt.Fatalf("%s op %d: ReserveN(t=%v, %q, %d, 0) = %v, %v; AllowN = %+v", rule, i, fake.Now(), key, n, r.Delay, ok, d)
				}
				for _, k := range keys {
					if want, got := allowing.AllowN(k, 0), reserving.AllowN(k, 0); got != want {
						rt.Fatalf("%s op %d: after ReserveN(%q, %d), a probe of %q = %+v, after AllowN %+v", rule, i, key, n, k, got, want)
					}
				}
			}
		}
	})
}

// reservers returns the token buckets of rule behind v's keyed and, if v has
// one, single-key constructor, each as a function of a key, or skips.
func reservers(t *testing.T, v Variant, rule admit.Rule, fake *clock.Fake) map[string]func(key string) (reserve func(n int) admit.Reservation, cancel func(admit.Reservation) bool, allow func(n int) admit.Decision) {
	t.Helper()
	out := map[string]func(string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) admit.Decision){}
	lim, err := v.New(rule, admit.WithClock(fake))
	require.NoError(t, err)
	if kr, ok := lim.(keyedReserver); ok {
		out["keyed"] = func(key string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) admit.Decision) {
			return func(n int) admit.Reservation {
					r, ok := kr.ReserveN(key, n, admit.Never)
					require.True(t, ok)
					return r
				}, func(r admit.Reservation) bool { return kr.CancelReservation(key, r) },
				func(n int) admit.Decision { return kr.AllowN(key, n) }
		}
	}
	if v.NewLimiter != nil {
		single, err := v.NewLimiter(rule, admit.WithClock(fake))
		require.NoError(t, err)
		if r, ok := single.(admit.Reserver); ok {
			out["single"] = func(string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) admit.Decision) {
				return func(n int) admit.Reservation {
						res, ok := r.ReserveN(n, admit.Never)
						require.True(t, ok)
						return res
					}, r.CancelReservation,
					func(n int) admit.Decision { return r.AllowN(n) }
			}
		}
	}
	if len(out) == 0 {
		t.Skip("no admit.Reserver or keyed ReserveN")
	}
	return out
}

// testCancel checks the promises of CancelReservation in every store: a
// reservation is cancelled at most once, however often it (or a copy) is
// presented; only on the key it was made on; never at a reading older than
// one at which its tokens were seen due; and the due times of reservations
// never lie closer together than their tokens allow.
func testCancel(t *testing.T, v Variant, alg admit.Algorithm) {
	if alg != admit.TokenBucket {
		t.Skip("only token buckets reserve")
	}
	// Both rules: a whole-nanosecond emission interval (atomic's packed
	// word) and one with a fraction (atomic's snapshot).
	for _, text := range []string{"token-bucket,1,1s", "token-bucket,3,10s"} {
		rule := mustRule(t, text)
		slot := rule.Window / time.Duration(rule.Limit)
		t.Run("Twice/"+text, func(t *testing.T) {
			fake := clock.NewFake()
			for name, of := range reservers(t, v, rule, fake) {
				reserve, cancel, allow := of("k")
				require.True(t, allow(rule.Limit).Allowed, name)
				cancelTwice(t, name, reserve, cancel, slot)
			}
		})
		t.Run("StaleReading/"+text, func(t *testing.T) {
			for _, n := range []int{0, 1} {
				fake := clock.NewFake()
				for name, of := range reservers(t, v, rule, fake) {
					fake.Set(time.Hour)
					reserve, cancel, allow := of("k")
					require.True(t, allow(rule.Limit).Allowed, name)
					r := reserve(1)
					fake.Set(time.Hour + r.Delay + slot/2)
					allow(n) // sees the tokens due
					fake.Set(time.Hour + r.Delay/2)
					require.False(t, cancel(r), "%s: AllowN(%d) saw the tokens due; a cancel at an older reading is stale", name, n)
					fake.Set(time.Hour + r.Delay + slot/2)
					require.False(t, allow(1).Allowed, "%s: the reservation's token is spent", name)
				}
			}
		})
	}
	t.Run("OtherKey", func(t *testing.T) {
		fake := clock.NewFake()
		of, ok := reservers(t, v, mustRule(t, "token-bucket,1,1s"), fake)["keyed"]
		if !ok {
			t.Skip("no ReserveN")
		}
		resX, cancelX, allowX := of("x")
		resY, cancelY, allowY := of("y")
		require.True(t, allowX(1).Allowed)
		require.True(t, allowY(1).Allowed)
		rX, rY := resX(1), resY(1)
		require.False(t, cancelY(rX), "x's reservation must not free y's token")
		require.False(t, cancelX(rY), "nor y's x's")
		require.True(t, cancelX(rX))
		require.True(t, cancelY(rY))
	})
	t.Run("DueSpan", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range reservers(t, v, mustRule(t, "token-bucket,3,10ms"), fake) {
			reserve, _, _ := of("k")
			var got []time.Duration
			for _, n := range []int{1, 3, 1, 1, 1, 1} {
				got = append(got, reserve(n).Delay)
			}
			require.Equal(t, []time.Duration{0, 3_333_334, 6_666_668, 10_000_001, 13_333_334, 16_666_668}, got, name)
		}
	})
}

// testReserveAllocs: a waiter's reservation that must wait, and its
// cancellation (the path of admit.WaitN when its context ends), allocate
// nothing on an existing key of a packed rule (one a token per whole
// nanoseconds, such as rule), keyed or single-key, once the limiter has
// held a key before.
func testReserveAllocs(t *testing.T, v Variant, rule admit.Rule, fake *clock.Fake) {
	for name, of := range reservers(t, v, rule, fake) {
		reserve, cancel, allow := of("hot")
		allow(rule.Limit) // empty the bucket: every reservation must wait
		cycle := func() {
			r := reserve(1)
			if r.Delay <= 0 || !cancel(r) {
				panic("a reservation that waits, cancelled before it is due")
			}
		}
		cycle()
		assert.Zero(t, testing.AllocsPerRun(1000, cycle), "%v: allocations per ReserveN and CancelReservation (%s)", rule, name)
	}
}

// cancelTwice checks a reservation cancelled twice on a spent key (named
// name): A, reserved and cancelled, is taken again by B with the same
// delay; cancelling A again, or a copy of A, gives nothing back; and C,
// reserved next, waits at least slot behind B.
func cancelTwice(t *testing.T, name string, reserve func(int) admit.Reservation, cancel func(admit.Reservation) bool, slot time.Duration) {
	t.Helper()
	rA := reserve(1)
	require.Positive(t, rA.Delay, name)
	copyA := rA
	require.True(t, cancel(rA), name)
	rB := reserve(1)
	require.Equal(t, rA.Delay, rB.Delay, name)
	require.False(t, cancel(rA), "%s: A was cancelled already", name)
	require.False(t, cancel(copyA), "%s: a copy of A too", name)
	rC := reserve(1)
	require.GreaterOrEqual(t, rC.Delay, rB.Delay+slot, "%s: C waits behind B", name)
}
