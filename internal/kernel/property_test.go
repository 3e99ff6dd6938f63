package kernel

// Property tests: generated sequences of requests, with the clock moving
// between calls (standing still, creeping by nanoseconds, jumping by up to two
// windows or by 2^55 ns, and being set backwards by up to five windows), for
// every algorithm. On every call the kernel must agree with the reference
// model on all five Decision fields, and a handful of checks that do not rely on
// the model's formulas must hold. At the end the admissions must respect the
// algorithm's interval bounds (docs/reliability.md).
//
// Raise the number of generated cases with -rapid.checks, for example
//
//	go test ./internal/kernel/ -run Property -rapid.checks=20000

import (
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// clockBound keeps every reading within ±2^62 ns (±146 years), so that a
// reading plus a few windows never leaves int64 and the oracles below can
// retry at now+RetryAfter. The ends of the int64 clock have tests of their own.
const clockBound = int64(1) << 62

func TestPropertyTokenBucket(t *testing.T)    { rapid.Check(t, propertyCheck(admit.TokenBucket)) }
func TestPropertyFixedWindow(t *testing.T)    { rapid.Check(t, propertyCheck(admit.FixedWindow)) }
func TestPropertySlidingLog(t *testing.T)     { rapid.Check(t, propertyCheck(admit.SlidingLog)) }
func TestPropertySlidingCounter(t *testing.T) { rapid.Check(t, propertyCheck(admit.SlidingCounter)) }

// drawRule draws a valid rule: Limit mostly in 1..50, sometimes large; Window
// from Limit ns (one request per nanosecond) up to two days, within
// Limit×Window <= 2^62.
func drawRule(t *rapid.T, alg admit.Algorithm) admit.Rule {
	large := []int{1000, 1_000_000, 1 << 20, 10_000_000, admit.MaxLimit} // 2^20 allows L×W = 2^62 exactly
	if alg == admit.SlidingLog {
		large = []int{100, 1000} // one timestamp per request: keep the copies cheap
	}
	limit := rapid.OneOf(
		rapid.IntRange(1, 5),
		rapid.IntRange(1, 50),
		rapid.IntRange(1, 50),
		rapid.SampledFrom(large),
	).Draw(t, "limit")
	l := int64(limit)
	const maxWindow = int64(48 * time.Hour)
	w := rapid.OneOf(
		rapid.Int64Range(l, 20*l),          // about one request per nanosecond
		rapid.Int64Range(l, max(l, 1<<20)), // microseconds
		rapid.Int64Range(l, max(l, 1<<40)), // up to about 18 minutes
		rapid.Int64Range(l, max(l, maxWindow)),
		rapid.SampledFrom([]int64{int64(time.Second), int64(10 * time.Second), int64(time.Minute), int64(time.Hour), int64(24 * time.Hour)}),
	).Draw(t, "window")
	w = max(w, l)
	w = min(w, (int64(1)<<62)/l, maxWindow)
	r := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Duration(w)}
	if err := r.Validate(); err != nil {
		t.Fatalf("drawRule made an invalid rule %v: %v", r, err)
	}
	return r
}

// drawN draws a request size in -1..Limit+1, favouring small sizes and the
// edges.
func drawN(t *rapid.T, limit int, label string) int {
	return rapid.OneOf(
		rapid.IntRange(-1, limit+1),
		rapid.IntRange(0, min(limit, 3)),
		rapid.IntRange(1, min(limit, 3)),
		rapid.IntRange(1, limit),
		rapid.SampledFrom([]int{-1, 0, 1, limit, limit + 1}),
	).Draw(t, label)
}

func drawStart(t *rapid.T, w int64) int64 {
	return rapid.OneOf(
		rapid.Int64Range(-1<<60, 1<<60),
		rapid.Int64Range(-3*w, 3*w),
		rapid.SampledFrom([]int64{0, -1, 1, w, -w, w - 1, -w + 1, -w - 1}),
	).Draw(t, "start")
}

// move returns the next clock reading: the same, a few nanoseconds on, up to
// two windows on, 2^55 ns on, or set back by up to five windows.
func move(t *rapid.T, now, limit, w int64, label string) int64 {
	switch rapid.IntRange(0, 5).Draw(t, label) {
	case 0:
		// the clock stands still
	case 1:
		now += rapid.Int64Range(0, 10).Draw(t, label+"-small")
	case 2:
		now += rapid.Int64Range(0, 2*w).Draw(t, label+"-windows")
	case 3:
		now += rapid.Int64Range(0, 3*max(1, w/limit)).Draw(t, label+"-tokens") // a few token intervals
	case 4:
		now += 1 << 55
	case 5:
		now -= rapid.Int64Range(1, 5*w).Draw(t, label+"-back")
	}
	return max(-clockBound, min(now, clockBound))
}

// admission is one admitted request for n at effective time at.
type admission struct {
	at int64
	n  int64
}

func propertyCheck(alg admit.Algorithm) func(*rapid.T) {
	return func(t *rapid.T) {
		r := drawRule(t, alg)
		l, w := int64(r.Limit), int64(r.Window)
		sub, ref := newSubject(r), newModel(r)
		now := drawStart(t, w)
		var log []admission
		var newest int64 // effective time of the newest admission, once there is one
		steps := rapid.IntRange(1, 100).Draw(t, "steps")
		for i := range steps {
			if i > 0 {
				now = move(t, now, l, w, "move")
			}
			n := drawN(t, r.Limit, "n")
			before := sub.Clone()
			got := sub.Allow(time.Duration(now), n)
			want := ref.Allow(time.Duration(now), n)
			if got != want {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s, reference model %s", i, r, now, n, fmtDecision(got), fmtDecision(want))
			}
			checkDecision(t, i, r, now, n, got)
			if !got.Allowed || n == 0 {
				if !equalState(before.State(), sub.State()) {
					t.Fatalf("step %d: AllowN(t=%d, %d) = %s changed the state from %+v to %+v",
						i, now, n, fmtDecision(got), before.State(), sub.State())
				}
			}
			if !got.Allowed && got.RetryAfter != admit.Never {
				checkRetryAfter(t, i, alg, before, now, n, got.RetryAfter)
			}
			if alg == admit.SlidingCounter && len(log) > 0 && now < newest {
				checkStaleCounter(t, i, before, now, newest, n, got)
			}
			if alg == admit.TokenBucket && len(log) > 0 && now < newest {
				checkStaleTokenBucket(t, i, before, now, newest, n, got)
			}
			if got.Allowed && n > 0 {
				eff := now
				if len(log) > 0 {
					eff = max(eff, newest)
				}
				newest = eff
				log = append(log, admission{at: eff, n: int64(n)})
				checkMonotone(t, i, before, now, w, n)
			}
			checkFresh(t, i, r, sub, now)
		}
		checkBounds(t, r, log)
	}
}

// checkDecision checks the ranges and invariants every Decision obeys.
func checkDecision(t *rapid.T, i int, r admit.Rule, now int64, n int, d admit.Decision) {
	call := func() string { return fmtDecision(d) }
	switch {
	case d.Limit != r.Limit:
		t.Fatalf("step %d: AllowN(t=%d, %d) = %s: Limit is not the rule's %d", i, now, n, call(), r.Limit)
	case d.Remaining < 0 || d.Remaining > r.Limit:
		t.Fatalf("step %d: AllowN(t=%d, %d) = %s: Remaining outside [0, %d]", i, now, n, call(), r.Limit)
	case d.RetryAfter < 0 || d.ResetAfter < 0:
		t.Fatalf("step %d: AllowN(t=%d, %d) = %s: negative wait", i, now, n, call())
	case d.Allowed && d.RetryAfter != 0:
		t.Fatalf("step %d: AllowN(t=%d, %d) = %s: allowed with a RetryAfter", i, now, n, call())
	case !d.Allowed && (d.Remaining != 0 || d.RetryAfter == 0):
		t.Fatalf("step %d: AllowN(t=%d, %d) = %s: a denial needs Remaining 0 and RetryAfter > 0", i, now, n, call())
	case (n < 0 || n > r.Limit) != (d.RetryAfter == admit.Never):
		t.Fatalf("step %d: AllowN(t=%d, %d) = %s: RetryAfter Never exactly for n < 0 or n > Limit", i, now, n, call())
	case n == 0 && !d.Allowed:
		t.Fatalf("step %d: AllowN(t=%d, 0) = %s: a probe is always allowed", i, now, call())
	}
}

// checkRetryAfter is the RetryAfter oracle, independent of any formula: the
// same request on a copy of the state is admitted at now+d, and (for the exact
// algorithms) denied at now+d-1ns. For the sliding counter, whose estimate only
// falls with time, d must be the smallest admitting wait, found by bisection.
func checkRetryAfter(t *rapid.T, i int, alg admit.Algorithm, s subject, now int64, n int, d time.Duration) {
	if now > math.MaxInt64-int64(d) {
		t.Fatalf("step %d: AllowN(t=%d, %d): RetryAfter %v runs past the end of the clock", i, now, n, d)
	}
	retry := now + int64(d)
	if got := s.Clone().Allow(time.Duration(retry), n); !got.Allowed {
		t.Fatalf("step %d: AllowN(t=%d, %d) said RetryAfter %v, but AllowN(t=%d, %d) on a copy = %s",
			i, now, n, d, retry, n, fmtDecision(got))
	}
	if alg != admit.SlidingCounter {
		if got := s.Clone().Allow(time.Duration(retry-1), n); got.Allowed {
			t.Fatalf("step %d: AllowN(t=%d, %d) said RetryAfter %v, but 1ns earlier AllowN(t=%d, %d) on a copy = %s",
				i, now, n, d, retry-1, n, fmtDecision(got))
		}
		return
	}
	lo, hi := int64(0), int64(d) // denied after lo, allowed after hi
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if s.Clone().Allow(time.Duration(now+mid), n).Allowed {
			hi = mid
		} else {
			lo = mid
		}
	}
	if hi != int64(d) {
		t.Fatalf("step %d: AllowN(t=%d, %d) said RetryAfter %v, but a copy is admitted after only %v",
			i, now, n, d, time.Duration(hi))
	}
}

// checkStaleCounter: the sliding counter does not clamp a stale reading to
// the newest time seen (its state does not keep it), but it must never be
// kinder than that clamp: whatever the kernel admits at the stale reading now,
// it admits at newest, with at least as much Remaining; a denial's earliest
// admitting reading is no earlier; the state empties at the same time.
func checkStaleCounter(t *rapid.T, i int, before subject, now, newest int64, n int, got admit.Decision) {
	strict := before.Clone().Allow(time.Duration(newest), n)
	switch {
	case got.Allowed && !strict.Allowed,
		got.Remaining > strict.Remaining,
		!got.Allowed && !strict.Allowed && got.RetryAfter != admit.Never && now+int64(got.RetryAfter) < newest+int64(strict.RetryAfter),
		now+int64(got.ResetAfter) != newest+int64(strict.ResetAfter):
		t.Fatalf("step %d: at the stale reading %d, AllowN(%d) = %s is kinder than at the newest reading %d: %s",
			i, now, n, fmtDecision(got), newest, fmtDecision(strict))
	}
}

// checkStaleTokenBucket: the token bucket judges a stale reading at its own
// time, never more kindly than the newest reading would: whatever it admits
// at the stale reading now, it admits at newest, with at least as much
// Remaining; and a denial names the same earliest admitting reading (the
// instant the bucket can pay, which does not depend on the reading).
func checkStaleTokenBucket(t *rapid.T, i int, before subject, now, newest int64, n int, got admit.Decision) {
	strict := before.Clone().Allow(time.Duration(newest), n)
	switch {
	case got.Allowed && !strict.Allowed,
		got.Remaining > strict.Remaining,
		!got.Allowed && !strict.Allowed && got.RetryAfter != admit.Never && now+int64(got.RetryAfter) != newest+int64(strict.RetryAfter):
		t.Fatalf("step %d: at the stale reading %d, AllowN(%d) = %s is kinder than at the newest reading %d: %s",
			i, now, n, fmtDecision(got), newest, fmtDecision(strict))
	}
}

// checkMonotone: a request admitted at now is admitted later as well, on a
// copy of the state it was admitted from (single caller, nothing else arrives).
func checkMonotone(t *rapid.T, i int, before subject, now, w int64, n int) {
	for _, dt := range []int64{1, w / 3, w, 3 * w} {
		if got := before.Clone().Allow(time.Duration(now+dt), n); !got.Allowed {
			t.Fatalf("step %d: AllowN(t=%d, %d) was admitted, but on a copy of that state AllowN(t=%d, %d) = %s",
				i, now, n, now+dt, n, fmtDecision(got))
		}
	}
}

// checkFresh: Fresh(s, now) holds exactly when s is indistinguishable from the
// zero state from now on. When it holds, a few follow-up requests at now and
// later get the same decisions from s and from a zero state; when it does not,
// a probe at now already tells them apart.
func checkFresh(t *rapid.T, i int, r admit.Rule, s subject, now int64) {
	w := int64(r.Window)
	fresh := s.Fresh(time.Duration(now))
	probe, zeroProbe := s.Clone().Allow(time.Duration(now), 0), newSubject(r).Allow(time.Duration(now), 0)
	if !fresh {
		if probe == zeroProbe {
			t.Fatalf("step %d: Fresh(t=%d) = false, but a probe gets %s from the state, as from a fresh one",
				i, now, fmtDecision(probe))
		}
		return
	}
	if probe != zeroProbe {
		t.Fatalf("step %d: Fresh(t=%d) = true, but a probe gets %s from the state and %s from a fresh one",
			i, now, fmtDecision(probe), fmtDecision(zeroProbe))
	}
	a, z := s.Clone(), newSubject(r)
	when := now
	for j := range rapid.IntRange(0, 3).Draw(t, "follow-ups") {
		if j > 0 {
			when += rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 3*w)).Draw(t, "follow-up-dt")
		}
		n := drawN(t, r.Limit, "follow-up-n")
		if ga, gz := a.Allow(time.Duration(when), n), z.Allow(time.Duration(when), n); ga != gz {
			t.Fatalf("step %d: Fresh(t=%d) = true, but follow-up %d AllowN(t=%d, %d) = %s, and %s on a zero state",
				i, now, j, when, n, fmtDecision(ga), fmtDecision(gz))
		}
	}
}

// checkBounds checks the interval bounds of docs/reliability.md exactly, over
// every pair of admissions (the log is in order of effective time).
func checkBounds(t *rapid.T, r admit.Rule, log []admission) {
	l, w := int64(r.Limit), int64(r.Window)
	sum := func(i, j int) int64 { // admitted in log[i..j]
		var a int64
		for _, x := range log[i : j+1] {
			a += x.n
		}
		return a
	}
	for i := range log {
		if i > 0 && log[i].at < log[i-1].at {
			t.Fatalf("effective times went backwards: %d after %d", log[i].at, log[i-1].at)
		}
		for j := i; j < len(log); j++ {
			a, span := sum(i, j), log[j].at-log[i].at // span >= 0 and fits: readings are within ±2^62
			switch r.Algorithm {
			case admit.TokenBucket:
				// A(t0, t1) <= L + floor((t1-t0)×L/W).
				bound := bAdd(bi(l), bFloorDiv(bMul(bi(span), bi(l)), bi(w)))
				if bi(a).Cmp(bound) > 0 {
					t.Fatalf("token bucket admitted %d in [%d, %d], more than L + floor(d×L/W) = %v", a, log[i].at, log[j].at, bound)
				}
			case admit.SlidingLog:
				if span < w && a > l {
					t.Fatalf("sliding log admitted %d in [%d, %d], a span shorter than W, more than L = %d", a, log[i].at, log[j].at, l)
				}
			case admit.FixedWindow, admit.SlidingCounter:
				if span < w && a > 2*l {
					t.Fatalf("%v admitted %d in [%d, %d], a span shorter than W, more than 2L = %d", r.Algorithm, a, log[i].at, log[j].at, 2*l)
				}
				if floorDivBig(log[i].at, w) == floorDivBig(log[j].at, w) && a > l {
					t.Fatalf("%v admitted %d in [%d, %d], within one aligned window, more than L = %d", r.Algorithm, a, log[i].at, log[j].at, l)
				}
			}
		}
	}
}

func floorDivBig(a, b int64) int64 { return new(big.Int).Div(bi(a), bi(b)).Int64() }

// S33 over generated rules and readings (the whole int64 range): a fresh key's
// first request with n <= Limit is admitted with Remaining = Limit - n, by the
// kernel and, within the models' clock range, identically by the model.
func TestPropertyFreshFirstRequest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alg := rapid.SampledFrom(algorithms).Draw(t, "algorithm")
		r := drawRule(t, alg)
		now := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-clockBound, clockBound)).Draw(t, "now")
		n := rapid.IntRange(0, r.Limit).Draw(t, "n")
		d := newSubject(r).Allow(time.Duration(now), n)
		if !d.Allowed || d.Remaining != r.Limit-n || d.RetryAfter != 0 || d.ResetAfter < 0 {
			t.Fatalf("%v: a fresh key's AllowN(t=%d, %d) = %s, want allowed with Remaining %d", r, now, n, fmtDecision(d), r.Limit-n)
		}
		if now >= -clockBound && now <= clockBound {
			if m := newModel(r).Allow(time.Duration(now), n); m != d {
				t.Fatalf("%v: a fresh key's AllowN(t=%d, %d) = %s, reference model %s", r, now, n, fmtDecision(d), fmtDecision(m))
			}
		}
	})
}
