package kernel

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
)

// Sliding-counter step tables. A request for n passes at elapsed e into window
// k when prev×(W−e) + (curr+n)×W <= L×W, prev and curr being the counts of
// windows k-1 and k.

func sc(limit int, window time.Duration) admit.Rule { return rule(admit.SlidingCounter, limit, window) }

// The boundary burst, 3 per 10s: three at 9.0s; at 10.0s the previous window
// still weighs fully, so none of three more passes until its weight has fallen
// to 2/3: at 10s + ceil(10s/3).
func TestSlidingCounterBoundaryBurst(t *testing.T) {
	s := time.Second
	runSteps(t, sc(3, 10*s), []step{
		{at(9, 0), 1, allowed(2, 11*s)},
		{at(9, 0), 1, allowed(1, 11*s)},
		{at(9, 0), 1, allowed(0, 11*s)},
		{at(10, 0), 1, denied(3333333334, 10*s)},
		{at(10, 0), 1, denied(3333333334, 10*s)},
		{at(10, 0), 1, denied(3333333334, 10*s)},
		{13333333333, 1, denied(1, 6666666667)},
		{13333333334, 1, allowed(0, 16666666666)},
	})
}

// S31: after two windows of idle the previous count is 0, not the stale
// current count; a full burst passes.
func TestSlidingCounterWindowSkip(t *testing.T) {
	s := time.Second
	runSteps(t, sc(4, 10*s), []step{
		{at(5, 0), 4, allowed(0, 15*s)},
		{at(20, 0), 4, allowed(0, 20*s)}, // window [20s, 30s): window [10s, 20s) was empty
		{at(25, 0), 1, denied(7500*time.Millisecond, 15*s)},
		{at(32, 500_000_000-1), 1, denied(1, 7500*time.Millisecond+1)},
		{at(32, 500_000_000), 1, allowed(0, 17500*time.Millisecond)},
	})
}

// The previous window's weight falls nanosecond by nanosecond, and rolls over
// at the window boundary.
func TestSlidingCounterWeighting(t *testing.T) {
	s := time.Second
	runSteps(t, sc(4, 10*s), []step{
		{at(5, 0), 4, allowed(0, 15*s)},
		{at(20, -1), 4, denied(1, 1)},       // prev 4 still weighs 1ns out of 10s
		{at(20, -1), 1, allowed(2, 10*s+1)}, // 4×1ns + 1×10s <= 4×10s
		{at(20, 0), 4, denied(10*s, 10*s)},  // window 2: prev 1 weighs fully
		{at(20, 0), 3, allowed(0, 20*s)},
		{at(30, -1), 1, denied(1, 10*s+1)},
		{at(30, 0), 1, allowed(0, 20*s)}, // prev 3 weighs 30s, curr 1
	})
}

// S28/K1/K2: stale readings. The counter's state keeps only its window index,
// not the newest time seen, so (unlike the other kernels) it cannot clamp a
// stale reading to that time. A reading in an older window counts as the start
// of the state's window, where the previous window weighs fully; a stale
// reading within the state's window is judged at its own elapsed time. Both
// are harsher than the newest time, never kinder, and a probe (n == 0) is
// still always allowed (the kernel once denied it: the first table's probe at
// 11s and at 5s).
func TestSlidingCounterClockBackwards(t *testing.T) {
	s := time.Second
	runSteps(t, sc(2, 10*s), []step{
		{at(5, 0), 2, allowed(0, 15*s)},
		{at(19, 0), 1, allowed(0, 11*s)},  // 2×1s + 1×10s <= 2×10s
		{at(11, 0), 0, allowed(0, 19*s)},  // stale, same window: 2×9s + 1×10s > 2×10s, but a probe passes
		{at(11, 0), 1, denied(9*s, 19*s)}, // as at 19s: the next window's start
		{at(5, 0), 1, denied(15*s, 25*s)}, // stale, older window
		{at(5, 0), 0, allowed(0, 25*s)},
		{at(20, 0), 1, allowed(0, 20*s)}, // 1×10s + 1×10s <= 2×10s
		{at(15, 0), 1, denied(15*s, 25*s)},
		{at(15, 0), 0, allowed(0, 25*s)},
	})
	// Within the state's window a stale reading is judged at its own time: at
	// 11s the previous window weighs 9s, not the 1s it weighed at 19s.
	runSteps(t, sc(4, 10*s), []step{
		{at(5, 0), 4, allowed(0, 15*s)},
		{at(19, 0), 1, allowed(2, 11*s)},  // 4×1s + 1×10s: room for 3, 1 used
		{at(11, 0), 0, allowed(0, 19*s)},  // 4×9s + 1×10s: none left (at 19s: 2)
		{at(11, 0), 1, denied(4*s, 19*s)}, // 4×(10s−e) + 2×10s <= 4×10s from e = 5s
		{at(15, 0), 1, allowed(0, 15*s)},
	})
	// Admissions at stale readings count in the newest window.
	runSteps(t, sc(4, 10*s), []step{
		{at(15, 0), 1, allowed(3, 15*s)},
		{at(12, 0), 1, allowed(2, 18*s)},
		{at(3, 0), 1, allowed(1, 27*s)},
		{at(19, 0), 2, denied(4333333334, 11*s)}, // next window: 3×(W−e) + 2×W <= 4×W at e = ceil(W/3)
		{at(19, 0), 1, allowed(0, 11*s)},
	})
}

// Negative readings use floor division for the window index.
func TestSlidingCounterNegativeClock(t *testing.T) {
	s := time.Second
	runSteps(t, sc(2, 10*s), []step{
		{-1, 2, allowed(0, 10*s+1)}, // window [-10s, 0)
		{0, 1, denied(5*s, 10*s)},   // window [0, 10s): prev 2 weighs fully
		{5 * s, 1, allowed(0, 15*s)},
	})
}

// S32: Limit×Window near 2^62. Limit 1e7 per hour would need 3.6e19 > 2^63
// and is rejected by Rule.Validate; the largest valid products must not
// overflow the comparison prev×(W−e) + (curr+n)×W <= L×W (each product up to
// 2^62, the sum up to 2^63: with L×W = 2^62 exactly, prev = L at e = 0 and
// n = L, an int64 sum wraps to MinInt64 and would admit).
func TestSlidingCounterLargeProducts(t *testing.T) {
	err := sc(10_000_000, time.Hour).Validate()
	require.Error(t, err)
	assert.True(t, errors.Is(err, admit.ErrInvalidRule), "%v", err)

	for _, limit := range []int{10_000_000, admit.MaxLimit, 1 << 20} {
		w := time.Duration((int64(1) << 62) / int64(limit))
		r := sc(limit, w)
		require.NoError(t, r.Validate())
		t.Run(r.String(), func(t *testing.T) {
			sub, ref := newSubject(r), newModel(r)
			call := func(now time.Duration, n int) admit.Decision {
				t.Helper()
				got, want := sub.Allow(now, n), ref.Allow(now, n)
				require.Equal(t, fmtDecision(want), fmtDecision(got), "AllowN(t=%d, %d)", now, n)
				return got
			}
			assert.True(t, call(w-1, limit).Allowed)
			assert.False(t, call(w, 1).Allowed, "prev = L weighs fully at the window's start")
			assert.False(t, call(w, limit).Allowed, "prev = L weighs fully at the window's start")
			assert.True(t, call(w, 0).Allowed)
			assert.True(t, call(2*w-1, limit-1).Allowed, "prev weighs L×1ns: L-1 fit since L <= W")
			assert.False(t, call(2*w-1, 1).Allowed)
			assert.True(t, call(2*w, 1).Allowed, "(L-1)×W + 1×W <= L×W")
			assert.False(t, call(2*w, 1).Allowed)
			for _, e := range []time.Duration{1, w / 3, w / 2, w - 1} {
				for _, n := range []int{0, 1, limit / 2, limit} {
					call(2*w+e, n)
				}
			}
			assert.True(t, call(4*w, limit).Allowed, "two windows on, both counts are gone")
		})
	}
}

// TestSlidingCounterLongestWindow: the longest window a rule may have, 2^62
// ns, reports the wait of two windows until idle (saturated), not 0: 2W
// does not fit an int64.
func TestSlidingCounterLongestWindow(t *testing.T) {
	k := NewSlidingCounter(admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1, Window: 1 << 62})
	var s SlidingCounterState
	d := k.Allow(&s, 0, 1)
	require.True(t, d.Allowed)
	assert.Equal(t, time.Duration(math.MaxInt64), d.ResetAfter, "ResetAfter saturates at the end of time")
	assert.False(t, k.Fresh(&s, 1<<62), "one window later the admission still counts as the previous window")
}
