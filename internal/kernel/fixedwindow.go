package kernel

import (
	"time"

	"github.com/admit-go/admit"
)

// FixedWindow is the fixed-window kernel: at most Limit admissions in each
// window [kW, (k+1)W) of the clock, where k = floor(now / W) (floor, not Go's
// truncating division, so negative readings get windows of their own).
// Across a window boundary up to 2×Limit may pass within a nanosecond; that is
// the algorithm, not a bug.
type FixedWindow struct {
	limit     int64
	window    int64
	perWindow divider // divides nanoseconds by window
}

// FixedWindowState is one key's window. The zero value is an empty window.
type FixedWindowState struct {
	Window int64 // index k of the window Count belongs to
	Count  int64 // admitted in window Window; 0 means fresh, Window meaningless
}

// NewFixedWindow returns the kernel for rule, which must be valid.
func NewFixedWindow(rule admit.Rule) *FixedWindow {
	return &FixedWindow{limit: int64(rule.Limit), window: int64(rule.Window), perWindow: newDivider(int64(rule.Window))}
}

// Index returns the index k of the window [kW, (k+1)W) holding reading now.
func (k *FixedWindow) Index(now time.Duration) int64 {
	return k.perWindow.floorDiv(int64(clampTime(now)))
}

// current returns the window index and count in effect at reading now. A
// reading that falls in a window older than the state's counts against the
// state's window: a stale reading never reopens an old window.
func (k *FixedWindow) current(s *FixedWindowState, now int64) (idx, count int64) {
	idx = k.Index(time.Duration(now))
	if s.Count == 0 {
		return idx, 0
	}
	if idx <= s.Window {
		return s.Window, s.Count
	}
	return idx, 0
}

// Allow implements [Kernel].
func (k *FixedWindow) Allow(s *FixedWindowState, now time.Duration, n int) (d admit.Decision) {
	k.Decide(s, now, n).fill(&d, int(k.limit))
	return d
}

// Decide is Allow without the Limit, for hot paths (see [Verdict]).
func (k *FixedWindow) Decide(s *FixedWindowState, now time.Duration, n int) Verdict {
	now = clampTime(now)
	idx, count := k.current(s, int64(now))
	end := wait(addSat(mulSat(idx, k.window), k.window), int64(now)) // until (idx+1)W
	reset := end
	if count == 0 {
		reset = 0
	}
	if n < 0 || int64(n) > k.limit {
		return Verdict{RetryAfter: admit.Never, ResetAfter: time.Duration(reset)}
	}
	if n > 0 && count+int64(n) > k.limit { // a probe passes, even past a carried Limit
		return Verdict{RetryAfter: time.Duration(end), ResetAfter: time.Duration(end)}
	}
	if n > 0 {
		count += int64(n)
		*s = FixedWindowState{Window: idx, Count: count}
		reset = end
	}
	return Verdict{
		Allowed:    true,
		Remaining:  int(max(0, k.limit-count)), // a probe may find a carried count past Limit
		ResetAfter: time.Duration(reset),
	}
}

// Limit returns the rule's Limit.
func (k *FixedWindow) Limit() int { return int(k.limit) }

// Fresh implements [Kernel]: the window is empty or over.
func (k *FixedWindow) Fresh(s *FixedWindowState, now time.Duration) bool {
	now = clampTime(now)
	_, count := k.current(s, int64(now))
	return count == 0
}

// AllowOne is Decide(s, now, 1) for the call most limiters make most often,
// an admission of one request in the current window or a later one. It
// advances *s and returns the Verdict with ok true, or returns ok false,
// leaving *s alone, when the request is denied, the reading is stale (its
// window is older than the state's) or it lies outside the clock range; the
// caller then takes the general path, Decide.
//
// It is a specialisation, not a second definition: within the clock range
// no clamp applies and the window's end (idx+1)·W is at most 2^62 − 1 + W <
// 2^63, so nothing saturates; the rest is Decide's arithmetic for n = 1
// with the stale branch left out. TestFixedWindowAllowOneEqualsDecide
// compares the two over random rules, states and readings.
func (k *FixedWindow) AllowOne(s *FixedWindowState, now time.Duration) (v Verdict, ok bool) {
	if now < minTime || now > maxTime {
		return v, false
	}
	idx := k.perWindow.floorDiv(int64(now))
	count := s.Count
	if count == 0 || idx > s.Window {
		count = 0
	} else if idx < s.Window || count >= k.limit {
		return v, false
	}
	*s = FixedWindowState{Window: idx, Count: count + 1}
	v.Allowed = true
	v.Remaining = int(k.limit - count - 1)
	v.ResetAfter = time.Duration((idx+1)*k.window - int64(now))
	return v, true
}
