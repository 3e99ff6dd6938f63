package kernel

import (
	"math/bits"
	"time"

	"github.com/admit-go/admit"
)

// SlidingCounter is the sliding-window-counter kernel. It keeps the counts of
// the current fixed window [kW, (k+1)W) and of the previous one, and estimates
// the requests in the sliding span (now-W, now] as
//
//	prev × (W - elapsed)/W + curr
//
// where elapsed = now - kW: the previous window is assumed to have been
// uniform. A request for n passes if the estimate plus n is at most Limit. The
// comparison is done in integers, prev×(W-elapsed) + (curr+n)×W <= Limit×W, so
// no floating point drifts.
//
// Bounds, which the tests check: any aligned window [kW, (k+1)W) admits at most
// Limit, and any span of length W at most 2×Limit (when the previous window's
// admissions all came at its very end). "At most Limit in any span of length W"
// is NOT guaranteed; use the sliding log where that matters.
type SlidingCounter struct {
	limit     int64
	window    int64
	perWindow divider // divides by window
}

// SlidingCounterState is one key's pair of counters. The zero value is fresh.
type SlidingCounterState struct {
	Window int64 // index k of the current window
	Prev   int64 // admitted in window k-1
	Curr   int64 // admitted in window k
}

// NewSlidingCounter returns the kernel for rule, which must be valid.
func NewSlidingCounter(rule admit.Rule) *SlidingCounter {
	return &SlidingCounter{limit: int64(rule.Limit), window: int64(rule.Window), perWindow: newDivider(int64(rule.Window))}
}

// Index returns the index k of the fixed window [kW, (k+1)W) holding reading now.
func (k *SlidingCounter) Index(now time.Duration) int64 {
	return k.perWindow.floorDiv(int64(clampTime(now)))
}

// current rolls the state forward to reading now: it returns the window index,
// the elapsed time in it and the two counts in effect. A reading older than the
// state's window counts as the start of that window, which weighs the previous
// window fully: a stale reading is never treated more kindly than the truth.
func (k *SlidingCounter) current(s *SlidingCounterState, now int64) (idx, elapsed, prev, curr int64) {
	idx = k.Index(time.Duration(now))
	elapsed = now - mulSat(idx, k.window)
	if s.Prev == 0 && s.Curr == 0 {
		return idx, elapsed, 0, 0
	}
	switch {
	case idx < s.Window:
		return s.Window, 0, s.Prev, s.Curr
	case idx == s.Window:
		return idx, elapsed, s.Prev, s.Curr
	case idx == s.Window+1:
		return idx, elapsed, s.Curr, 0
	}
	return idx, elapsed, 0, 0
}

// fits reports whether n more pass with counts prev and curr at elapsed:
// prev×(W-elapsed) <= (limit-curr-n)×W. The right side is at most
// limit×window <= 2^62; the left one is taken in 128 bits, since a count
// carried past the Limit by a change of limits (Convert: up to 2^31) times
// the window can pass 2^64, and wrapped it would admit.
func (k *SlidingCounter) fits(elapsed, prev, curr, n int64) bool {
	if curr+n > k.limit {
		return false
	}
	hi, used := bits.Mul64(uint64(prev), uint64(k.window-elapsed))
	return hi == 0 && used <= uint64((k.limit-curr-n)*k.window)
}

// Allow implements [Kernel].
func (k *SlidingCounter) Allow(s *SlidingCounterState, now time.Duration, n int) (d admit.Decision) {
	k.Decide(s, now, n).fill(&d, int(k.limit))
	return d
}

// Decide is Allow without the Limit, for hot paths (see [Verdict]).
func (k *SlidingCounter) Decide(s *SlidingCounterState, now time.Duration, n int) Verdict {
	now = clampTime(now)
	idx, elapsed, prev, curr := k.current(s, int64(now))
	start := mulSat(idx, k.window)
	if n < 0 || int64(n) > k.limit {
		return Verdict{RetryAfter: admit.Never, ResetAfter: time.Duration(k.untilIdle(start, prev, curr, int64(now)))}
	}
	// n == 0 is a free probe and always passes: at a stale reading the estimate
	// can exceed Limit even with nothing more (see current), so fits(0) may fail.
	if n > 0 && !k.fits(elapsed, prev, curr, int64(n)) {
		return Verdict{
			RetryAfter: time.Duration(wait(k.earliest(start, elapsed, prev, curr, int64(n)), int64(now))),
			ResetAfter: time.Duration(k.untilIdle(start, prev, curr, int64(now))),
		}
	}
	if n > 0 {
		curr += int64(n)
		*s = SlidingCounterState{Window: idx, Prev: prev, Curr: curr}
	}
	return Verdict{
		Allowed:    true,
		Remaining:  k.remaining(elapsed, prev, curr),
		ResetAfter: time.Duration(k.untilIdle(start, prev, curr, int64(now))),
	}
}

// remaining returns how many more single requests pass with counts prev and
// curr at elapsed: the largest m with prev×(W-elapsed) + (curr+m)×W <=
// limit×W, at least 0 and at most limit. A count carried past the Limit by a
// change of limits (Convert) can weigh more than the whole budget: then
// prev×(W-elapsed), which may exceed 2^64, leaves no room, and the
// remainder is not divided (the divider is exact only for a dividend >= 0).
func (k *SlidingCounter) remaining(elapsed, prev, curr int64) int {
	hi, used := bits.Mul64(uint64(prev), uint64(k.window-elapsed))
	budget := uint64(k.limit * k.window) // <= 2^62
	if hi != 0 || used > budget {
		return 0
	}
	room := k.perWindow.div(int64(budget - used))
	return int(max(0, min(room-curr, k.limit)))
}

// earliest returns the earliest time at which n (0 < n <= limit) would pass,
// given that it does not pass now, in window starting at start.
func (k *SlidingCounter) earliest(start, elapsed, prev, curr, n int64) int64 {
	w := k.window
	// In this window the previous window's weight falls as time passes: the
	// request fits once prev×(W-e) <= (limit-curr-n)×W.
	if prev > 0 && curr+n <= k.limit {
		if e := w - (k.limit-curr-n)*w/prev; e < w && e > elapsed {
			return addSat(start, e)
		}
	}
	// In the next window, curr becomes the previous count and weighs
	// curr×(W-e) <= (limit-n)×W.
	next := addSat(start, w)
	if curr <= k.limit-n {
		return next
	}
	if e := w - (k.limit-n)*w/curr; e < w {
		return addSat(next, e)
	}
	// Two windows on, both counts are gone.
	return addSat(next, w)
}

// untilIdle is the wait from now until both counts have rolled out.
func (k *SlidingCounter) untilIdle(start, prev, curr, now int64) int64 {
	switch {
	case curr > 0:
		return wait(addSat(addSat(start, k.window), k.window), now) // 2W may exceed MaxInt64
	case prev > 0:
		return wait(addSat(start, k.window), now)
	}
	return 0
}

// Limit returns the rule's Limit.
func (k *SlidingCounter) Limit() int { return int(k.limit) }

// Fresh implements [Kernel]: both counts have rolled out.
func (k *SlidingCounter) Fresh(s *SlidingCounterState, now time.Duration) bool {
	now = clampTime(now)
	_, _, prev, curr := k.current(s, int64(now))
	return prev == 0 && curr == 0
}

// AllowOne is Decide(s, now, 1) for the call most limiters make most often,
// an admission of one request in the current window or a later one. It
// advances *s and returns the Verdict with ok true, or returns ok false,
// leaving *s alone, when the request is denied, the reading is stale (its
// window is older than the state's) or it lies outside the clock range; the
// caller then takes the general path, Decide.
//
// It is a specialisation, not a second definition: within the clock range no
// clamp applies and a window's start idx·W lies within one window of the
// reading, so nothing saturates there; the roll forward, the fit, Remaining
// and ResetAfter are Decide's for n = 1 with the stale branch left out.
// TestSlidingCounterAllowOneEqualsDecide compares the two over random rules,
// states and readings.
func (k *SlidingCounter) AllowOne(s *SlidingCounterState, now time.Duration) (v Verdict, ok bool) {
	if now < minTime || now > maxTime {
		return v, false
	}
	idx := k.perWindow.floorDiv(int64(now))
	start := idx * k.window
	elapsed := int64(now) - start
	var prev, curr int64
	if s.Prev != 0 || s.Curr != 0 {
		switch idx - s.Window {
		case 0:
			prev, curr = s.Prev, s.Curr
		case 1:
			prev = s.Curr
		default:
			if idx < s.Window {
				return v, false
			}
		}
	}
	if !k.fits(elapsed, prev, curr, 1) {
		return v, false
	}
	curr++
	*s = SlidingCounterState{Window: idx, Prev: prev, Curr: curr}
	room := k.perWindow.div(k.limit*k.window - prev*(k.window-elapsed))
	v.Allowed = true
	v.Remaining = int(max(0, min(room-curr, k.limit)))
	v.ResetAfter = time.Duration(k.untilIdle(start, prev, curr, int64(now)))
	return v, true
}
