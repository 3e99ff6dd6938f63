package kernel

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
)

// Tests that run the same scenario over all four kernels.

// S3, S21: a denial, a probe (n == 0) and an impossible request (n < 0, n >
// Limit) leave the state byte-identical, at fresh, stale and future readings;
// the next request is unaffected by them.
func TestNonAdmissionsLeaveStateUnchanged(t *testing.T) {
	s := time.Second
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			r := rule(alg, 3, 10*s)
			setup := func() subject {
				sub := newSubject(r)
				require.True(t, sub.Allow(at(11, 0), 2).Allowed)
				require.True(t, sub.Allow(at(12, 0), 1).Allowed)
				return sub
			}
			sub, clean := setup(), setup()
			before := sub.State()
			for _, now := range []time.Duration{at(12, 0), at(2, 0), -at(100, 0), at(12, 1), at(12, 500_000_000)} {
				for _, n := range []int{-1, math.MinInt, 0, 4, math.MaxInt, 1, 2, 3} {
					d := sub.Allow(now, n)
					if d.Allowed && n != 0 {
						t.Fatalf("AllowN(t=%v, %d) = %s: the setup expects a denial", now, n, fmtDecision(d))
					}
					require.True(t, equalState(before, sub.State()),
						"AllowN(t=%v, %d) = %s changed the state from %+v to %+v", now, n, fmtDecision(d), before, sub.State())
				}
			}
			for _, now := range []time.Duration{at(21, 0), at(25, 0), at(40, 0)} {
				assert.Equal(t, fmtDecision(clean.Allow(now, 1)), fmtDecision(sub.Allow(now, 1)), "AllowN(t=%v, 1) after the denials", now)
			}
		})
	}
}

// S21: n == 0 is a free probe: allowed, reports Remaining, consumes nothing.
// n < 0 and n > Limit are denied with RetryAfter Never and consume nothing.
func TestProbeAndImpossibleRequests(t *testing.T) {
	s := time.Second
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			r := rule(alg, 3, 10*s)
			sub := newSubject(r)
			zero := sub.State()
			assert.Equal(t, admit.Decision{Allowed: true, Limit: 3, Remaining: 3}, sub.Allow(at(1, 0), 0))
			assert.Equal(t, admit.Decision{Limit: 3, RetryAfter: admit.Never}, sub.Allow(at(1, 0), -1))
			assert.Equal(t, admit.Decision{Limit: 3, RetryAfter: admit.Never}, sub.Allow(at(1, 0), 4))
			assert.Equal(t, admit.Decision{Limit: 3, RetryAfter: admit.Never}, sub.Allow(at(1, 0), math.MinInt))
			assert.Equal(t, admit.Decision{Limit: 3, RetryAfter: admit.Never}, sub.Allow(at(1, 0), math.MaxInt))
			require.True(t, equalState(zero, sub.State()), "a fresh state was changed: %+v", sub.State())
			assert.True(t, sub.Fresh(at(1, 0)))

			require.True(t, sub.Allow(at(1, 0), 2).Allowed)
			probe := sub.Allow(at(1, 0), 0)
			assert.True(t, probe.Allowed)
			assert.Equal(t, 1, probe.Remaining)
			assert.Positive(t, probe.ResetAfter)
			imp := sub.Allow(at(1, 0), 4)
			assert.False(t, imp.Allowed)
			assert.Equal(t, admit.Never, imp.RetryAfter)
			assert.Equal(t, probe.ResetAfter, imp.ResetAfter, "an impossible request reports the same ResetAfter as a probe")
			assert.True(t, sub.Allow(at(1, 0), 1).Allowed, "the probes consumed nothing")
			assert.False(t, sub.Allow(at(1, 0), 1).Allowed)
		})
	}
}

// S33: a fresh key's first request with n <= Limit is always allowed, at any
// reading, including the ends of the clock, with Remaining = Limit - n.
func TestFreshKeyFirstRequest(t *testing.T) {
	readings := []time.Duration{math.MinInt64, math.MinInt64 + 1, -time.Hour - 1, -1, 0, 1, time.Hour + 1, 1 << 55, maxInt64 / 2, maxInt64 - 1, maxInt64}
	for _, alg := range algorithms {
		for _, r := range []admit.Rule{rule(alg, 1, 1), rule(alg, 5, 10*time.Second), rule(alg, 1000, time.Hour)} {
			for _, now := range readings {
				for _, n := range []int{0, 1, r.Limit / 2, r.Limit} {
					d := newSubject(r).Allow(now, n)
					if !d.Allowed || d.Remaining != r.Limit-n || d.RetryAfter != 0 || d.ResetAfter < 0 || d.Limit != r.Limit {
						t.Errorf("%v: a fresh key's AllowN(t=%d, %d) = %s, want allowed with Remaining %d", r, now, n, fmtDecision(d), r.Limit-n)
					}
				}
			}
		}
	}
}

// The zero state is fresh at every reading, and Fresh does not write it.
func TestZeroStateIsFresh(t *testing.T) {
	for _, alg := range algorithms {
		sub := newSubject(rule(alg, 3, time.Second))
		zero := sub.State()
		for _, now := range []time.Duration{math.MinInt64, -1, 0, 1, maxInt64} {
			assert.True(t, sub.Fresh(now), "%v: Fresh(t=%d) of the zero state", alg, now)
		}
		assert.True(t, equalState(zero, sub.State()))
	}
}

// Fresh turns true exactly when the state has returned to a fresh one: at
// now+ResetAfter, not 1ns earlier.
func TestFreshAtResetAfter(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			sub := newSubject(rule(alg, 3, 10*time.Second))
			now := at(12, 345)
			d := sub.Allow(now, 2)
			require.True(t, d.Allowed)
			require.Positive(t, d.ResetAfter)
			assert.False(t, sub.Fresh(now))
			assert.False(t, sub.Fresh(now+d.ResetAfter-1))
			assert.True(t, sub.Fresh(now+d.ResetAfter))
			assert.Equal(t, time.Duration(1), sub.Clone().Allow(now+d.ResetAfter-1, 0).ResetAfter)
			assert.Equal(t, admit.Decision{Allowed: true, Limit: 3, Remaining: 3}, sub.Clone().Allow(now+d.ResetAfter, 0))
		})
	}
}

// TestEndOfClock: readings beyond ±(2^62-1) ns are clamped to that range, where
// time stands still: a limiter keeps refusing beyond its limit there, instead
// of wrapping or resetting.
func TestEndOfClock(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			sub := newSubject(rule(alg, 3, time.Second))
			require.True(t, sub.Allow(maxInt64/2, 3).Allowed)
			for _, now := range []time.Duration{maxInt64/2 + 1, maxInt64/2 + time.Hour, maxInt64} {
				d := sub.Allow(now, 1)
				assert.False(t, d.Allowed, "AllowN(t=%d, 1) past the end of the clock", now)
				assert.Positive(t, d.RetryAfter)
			}
			fresh := newSubject(rule(alg, 3, time.Second))
			assert.True(t, fresh.Allow(maxInt64, 3).Allowed, "a fresh key passes at any reading")
			assert.False(t, fresh.Allow(math.MinInt64, 1).Allowed, "the same instant, seen from the other end")
		})
	}
}

// S9/K4: after an idle of 2^55 ns, and of MaxInt64/2, a full burst passes and
// one more does not; nothing wraps. Every decision matches the model.
func TestLongIdle(t *testing.T) {
	us := time.Microsecond
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			r := rule(alg, 10, 10*us)
			sub, ref := newSubject(r), newModel(r)
			call := func(now time.Duration, n int) admit.Decision {
				t.Helper()
				got, want := sub.Allow(now, n), ref.Allow(now, n)
				require.Equal(t, fmtDecision(want), fmtDecision(got), "AllowN(t=%d, %d): kernel vs reference model", now, n)
				assert.GreaterOrEqual(t, got.RetryAfter, time.Duration(0))
				assert.GreaterOrEqual(t, got.ResetAfter, time.Duration(0))
				return got
			}
			t0 := at(1, 0)
			require.True(t, call(t0, 10).Allowed)
			for _, now := range []time.Duration{t0 + 1<<55, maxInt64 / 4, maxInt64 / 2} { // maxInt64/2 is the end of the kernels' clock range
				assert.True(t, sub.Fresh(now), "Fresh(t=%d)", now)
				d := call(now, 10)
				assert.True(t, d.Allowed, "AllowN(t=%d, 10)", now)
				assert.Equal(t, 0, d.Remaining)
				d = call(now, 1)
				assert.False(t, d.Allowed, "AllowN(t=%d, 1) after the burst", now)
				assert.Positive(t, d.RetryAfter)
				assert.LessOrEqual(t, d.RetryAfter, 2*10*us)
			}
		})
	}
}

// K4: the ends of the int64 clock. Nothing may panic, wrap or go negative;
// waits saturate. Near the top a retry time past MaxInt64 is cut to MaxInt64
// (arith.go: "a time past the end of the clock is the end of the clock"), so
// a denial at the last reading may report RetryAfter 0: there is no later
// reading to report. Only an admission must report exactly 0.
func TestEndsOfClock(t *testing.T) {
	readings := []time.Duration{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 7, -1, 0, maxInt64 - 7, maxInt64 - 1, maxInt64}
	for _, alg := range algorithms {
		for _, r := range []admit.Rule{rule(alg, 1, 1), rule(alg, 3, 10), rule(alg, 5, time.Hour)} {
			for _, first := range readings {
				for _, second := range readings {
					sub := newSubject(r)
					for i, now := range []time.Duration{first, first, second, second, first} {
						for _, n := range []int{1, r.Limit, 0, -1} {
							d := sub.Allow(now, n)
							ctx := fmt.Sprintf("%v: call %d AllowN(t=%d, %d) = %s", r, i, now, n, fmtDecision(d))
							if d.Remaining < 0 || d.Remaining > r.Limit || d.RetryAfter < 0 || d.ResetAfter < 0 {
								t.Fatalf("%s: out of range", ctx)
							}
							if d.Allowed && d.RetryAfter != 0 || !d.Allowed && d.Remaining != 0 {
								t.Fatalf("%s: an admission has RetryAfter 0, a denial Remaining 0", ctx)
							}
							if !d.Allowed && d.RetryAfter == 0 && now < maxInt64-2*r.Window {
								t.Fatalf("%s: a denial far from the end of the clock has RetryAfter 0", ctx)
							}
							if n == 0 && !d.Allowed {
								t.Fatalf("%s: a probe is always allowed", ctx)
							}
							_ = sub.Fresh(now)
						}
					}
				}
			}
		}
	}
}

// C12: Allow allocates nothing, allowed or denied; the sliding log's ring is
// allocated once, on a key's first admission, and then reused.
func TestAllowDoesNotAllocate(t *testing.T) {
	r := func(alg admit.Algorithm) admit.Rule { return rule(alg, 10, time.Second) }
	step := 37 * time.Millisecond // about one admission in three is denied
	{
		k := NewTokenBucket(r(admit.TokenBucket))
		var s TokenBucketState
		now := time.Duration(0)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { now += step; k.Allow(&s, now, 1); k.Allow(&s, now, 11) }), "token bucket")
	}
	{
		k := NewFixedWindow(r(admit.FixedWindow))
		var s FixedWindowState
		now := time.Duration(0)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { now += step; k.Allow(&s, now, 1); k.Allow(&s, now, 11) }), "fixed window")
	}
	{
		k := NewSlidingLog(r(admit.SlidingLog))
		var s Log
		k.Allow(&s, 0, 1) // allocates the ring
		now := time.Duration(0)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { now += step; k.Allow(&s, now, 1); k.Allow(&s, now, 3); k.Allow(&s, now, 11) }), "sliding log")
	}
	{
		k := NewSlidingCounter(r(admit.SlidingCounter))
		var s SlidingCounterState
		now := time.Duration(0)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { now += step; k.Allow(&s, now, 1); k.Allow(&s, now, 11) }), "sliding counter")
	}
}
