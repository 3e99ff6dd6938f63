package kernel

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// Where the sliding counter's excess over Limit can come (docs/algorithms.md,
// "The sliding counter's error"). At elapsed e into a window the previous
// window's count prev weighs prev×(W−e)/W, so an admission at e needs
// prev×(W−e) + curr×W <= L×W, curr counting it. A span (t−W, t] that ends e
// into a window holds at most prev admissions of the previous window and curr
// of the current one, so at most
//
//	prev + L − ceil(prev×(W−e)/W) = L + floor(prev×e/W) <= L + floor(L×e/W):
//
// the excess over L grows at most at the rule's rate L/W from the start of
// the window, and stays below L. It comes late in a window, never early.

// The worst case, 10 per 10s: ten admitted in the last nanosecond of window
// [0s, 10s). Window [10s, 20s) admits nothing before 11s, then one each
// second, each not one nanosecond earlier: the m-th at m×W/L into the window.
// The span (9.5s, 19.5s] holds 19 = L + floor(L × 9.5s/10s).
func TestSlidingCounterExcessComesLate(t *testing.T) {
	s := time.Second
	burst := at(9, 999_999_999)
	var steps []step
	for i := range 10 {
		steps = append(steps, step{burst, 1, allowed(9-i, 10*s+1)})
	}
	steps = append(steps,
		step{at(10, 0), 1, denied(s, 10*s)}, // the previous window weighs fully
		step{at(10, 500_000_000), 1, denied(500*time.Millisecond, 9500*time.Millisecond)},
	)
	for m := int64(1); m <= 9; m++ {
		idle := 30 * s // both counts roll out two windows after [10s, 20s) starts
		if m == 1 {
			idle = 20 * s // only the previous window's count so far
		}
		steps = append(steps,
			step{at(10+m, -1), 1, denied(1, idle-at(10+m, -1))},
			step{at(10+m, 0), 1, allowed(0, 30*s-at(10+m, 0))},
		)
	}
	// The tenth would need the previous window's weight to reach 0: it waits
	// for the next window, where the nine weigh 9×(W−e)/W.
	steps = append(steps, step{at(19, 999_999_999), 1, denied(1, 10*s+1)})
	runSteps(t, sc(10, 10*s), steps)

	// The admissions above, as (reading, n): the span (9.5s, 19.5s].
	var log []admission
	log = append(log, admission{at: int64(burst), n: 10})
	for m := int64(1); m <= 9; m++ {
		log = append(log, admission{at: int64(at(10+m, 0)), n: 1})
	}
	if got := spanSum(log, int64(at(19, 500_000_000)), int64(10*s)); got != 19 {
		t.Errorf("admitted in (9.5s, 19.5s] = %d, want 19 = L + floor(L×9.5s/10s)", got)
	}
}

// spanSum returns the admissions of log in the span (end−w, end].
func spanSum(log []admission, end, w int64) int64 {
	var a int64
	for _, x := range log {
		if x.at > end-w && x.at <= end {
			a += x.n
		}
	}
	return a
}

// excessBound is L + floor(L×e/W), the most a span of length W ending at
// reading end admits, e being end's elapsed time in its window.
func excessBound(l, w, end int64) int64 {
	e := end - floorDivBig(end, w)*w
	return l + l*e/w // l×e < l×w <= 2^62
}

// TestPropertySlidingCounterSpan checks the bound on generated histories:
// requests of any size, the clock standing still, creeping, jumping and
// sometimes going back (an admission counts at its effective time: its
// reading, or the previous admission's if that is later, as in checkBounds).
// Every span of length W that ends at an admission must hold at most
// L + floor(L×e/W); those are the spans to check, since between two
// admissions of a window the count can only fall and the bound only rise.
func TestPropertySlidingCounterSpan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := int64(rapid.IntRange(1, 20).Draw(t, "limit"))
		w := rapid.Int64Range(l, 200*l).Draw(t, "window")
		k := NewSlidingCounter(admit.Rule{Algorithm: admit.SlidingCounter, Limit: int(l), Window: time.Duration(w)})
		var st SlidingCounterState
		now := rapid.Int64Range(-3*w, 3*w).Draw(t, "start")
		var newest int64 // the newest effective time, once there is an admission
		var log []admission
		for i := range rapid.IntRange(1, 150).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "move") {
			case 0:
			case 1, 2, 3:
				now += rapid.Int64Range(0, 3).Draw(t, "creep")
			case 4:
				now -= rapid.Int64Range(0, w).Draw(t, "back")
			default:
				now += rapid.Int64Range(0, w).Draw(t, "jump")
			}
			n := rapid.IntRange(1, int(l)).Draw(t, "n")
			if !k.Allow(&st, time.Duration(now), n).Allowed {
				continue
			}
			if len(log) == 0 || now > newest {
				newest = now
			}
			log = append(log, admission{at: newest, n: int64(n)})
			if got, bound := spanSum(log, newest, w), excessBound(l, w, newest); got > bound {
				t.Fatalf("step %d: %d per %dns admitted %d in (%d, %d], more than L + floor(L×e/W) = %d", i, l, w, got, newest-w, newest, bound)
			}
		}
	})
}

// TestPropertySlidingCounterSpanTight: the bound is reached. L admitted in
// the last nanosecond of a window, then each further request as early as it
// passes (at its RetryAfter): the m-th passes exactly at ceil(m×W/L) into the
// next window, not a nanosecond earlier, and the span of length W ending
// there holds L + m = L + floor(L×e/W).
func TestPropertySlidingCounterSpanTight(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := int64(rapid.IntRange(1, 50).Draw(t, "limit"))
		w := rapid.Int64Range(2*l, 1<<40).Draw(t, "window")
		k := NewSlidingCounter(admit.Rule{Algorithm: admit.SlidingCounter, Limit: int(l), Window: time.Duration(w)})
		var st SlidingCounterState
		start := w * rapid.Int64Range(-3, 3).Draw(t, "window index") // a window's start
		if d := k.Allow(&st, time.Duration(start-1), int(l)); !d.Allowed {
			t.Fatalf("a fresh key's first AllowN(%d) = %s", l, fmtDecision(d))
		}
		log := []admission{{at: start - 1, n: l}}
		now := start
		for m := int64(1); m < l; m++ {
			e := (m*w + l - 1) / l // ceil(m×W/L)
			d := k.Allow(&st, time.Duration(now), 1)
			if d.Allowed || now+int64(d.RetryAfter) != start+e {
				t.Fatalf("%d per %dns, admission %d of the window: Allow at %d = %s, want a denial until %d", l, w, m, now-start, fmtDecision(d), e)
			}
			if d := k.Allow(&st, time.Duration(start+e-1), 1); d.Allowed {
				t.Fatalf("%d per %dns: admission %d of the window passed at %d, before ceil(m×W/L) = %d", l, w, m, e-1, e)
			}
			now = start + e
			if d := k.Allow(&st, time.Duration(now), 1); !d.Allowed {
				t.Fatalf("%d per %dns: admission %d of the window denied at its RetryAfter %d: %s", l, w, m, e, fmtDecision(d))
			}
			log = append(log, admission{at: now, n: 1})
			if got, bound := spanSum(log, now, w), excessBound(l, w, now); got != l+m || got != bound {
				t.Fatalf("%d per %dns: %d admitted in the span of length W ending at %d into the window, want L + m = %d = L + floor(L×e/W) = %d", l, w, got, e, l+m, bound)
			}
		}
	})
}
