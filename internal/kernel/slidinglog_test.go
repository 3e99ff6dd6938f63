package kernel

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Sliding-log step tables: an admission at t counts against requests in
// [t, t+W) and expires at exactly t+W.

func sl(limit int, window time.Duration) admit.Rule { return rule(admit.SlidingLog, limit, window) }

// The boundary burst, 3 per 10s: three at 9.0s, and none of three more at 10.0s
// (the log is exact over every span of length W).
func TestSlidingLogBoundaryBurst(t *testing.T) {
	s := time.Second
	runSteps(t, sl(3, 10*s), []step{
		{at(9, 0), 1, allowed(2, 10*s)},
		{at(9, 0), 1, allowed(1, 10*s)},
		{at(9, 0), 1, allowed(0, 10*s)},
		{at(10, 0), 1, denied(9*s, 9*s)},
		{at(10, 0), 1, denied(9*s, 9*s)},
		{at(10, 0), 1, denied(9*s, 9*s)},
		{at(19, -1), 1, denied(1, 1)},
		{at(19, 0), 3, allowed(0, 10*s)},
	})
}

// S26: N at t=0; at W-1ns still denied; at exactly W the entries expire.
func TestSlidingLogExpiry(t *testing.T) {
	s := time.Second
	runSteps(t, sl(3, 10*s), []step{
		{0, 3, allowed(0, 10*s)},
		{at(10, -1), 1, denied(1, 1)},
		{at(10, 0), 1, allowed(2, 10*s)},
	})
	// The smallest rule: one per nanosecond.
	runSteps(t, sl(1, 1), []step{
		{0, 1, allowed(0, 1)},
		{0, 1, denied(1, 1)},
		{1, 1, allowed(0, 1)},
		{2, 1, allowed(0, 1)},
	})
}

// S29: AllowN's RetryAfter is the (count+n-Limit)-th oldest entry + W - now.
func TestSlidingLogMultiTokenRetryAfter(t *testing.T) {
	s := time.Second
	runSteps(t, sl(5, 10*s), []step{
		{at(1, 0), 1, allowed(4, 10*s)},
		{at(2, 0), 1, allowed(3, 10*s)},
		{at(3, 0), 1, allowed(2, 10*s)},
		{at(4, 0), 1, allowed(1, 10*s)},
		{at(5, 0), 1, allowed(0, 10*s)},
		{at(6, 0), 1, denied(5*s, 9*s)}, // the 1st oldest (1s) expires at 11s
		{at(6, 0), 3, denied(7*s, 9*s)}, // the 3rd oldest (3s) expires at 13s
		{at(6, 0), 5, denied(9*s, 9*s)}, // the 5th oldest (5s) expires at 15s
		{at(6, 0), 6, impossible(9 * s)},
		{at(13, -1), 3, denied(1, 2*s+1)},
		{at(13, 0), 3, allowed(0, 10*s)},  // 4s and 5s are still live
		{at(14, 0), 1, allowed(0, 10*s)},  // 4s expired
		{at(14, 0), 1, denied(1*s, 10*s)}, // 5s expires at 15s
		{at(14, 0), 2, denied(9*s, 10*s)}, // then the first 13s entry, at 23s
		{at(14, 0), 4, denied(9*s, 10*s)},
		{at(14, 0), 5, denied(10*s, 10*s)}, // then the 14s entry, at 24s
	})
}

// S28/K1/K2: a stale reading is treated as the newest time seen, so an entry
// admitted at a stale reading is logged at the newest time (future-dated
// relative to the caller) and counted conservatively; many equal timestamps
// expire together.
func TestSlidingLogClockBackwards(t *testing.T) {
	s := time.Second
	runSteps(t, sl(3, 10*s), []step{
		{at(20, 0), 1, allowed(2, 10*s)},
		{at(5, 0), 1, allowed(1, 25*s)}, // logged at 20s
		{at(5, 0), 1, allowed(0, 25*s)}, // logged at 20s
		{at(5, 0), 1, denied(25*s, 25*s)},
		{at(-5, 0), 0, allowed(0, 35*s)},
		{at(30, -1), 1, denied(1, 1)},
		{at(30, 0), 3, allowed(0, 10*s)}, // all three expired together at 30s
		{at(29, 0), 1, denied(11*s, 11*s)},
		{at(40, 0), 2, allowed(1, 10*s)},
	})
}

// S27: overload at 10× the rate for 10 windows, then W of quiet: exactly Limit
// are admitted. Denials are never logged, so they cannot fill the ring and
// lock the key out.
func TestSlidingLogOverloadThenQuiet(t *testing.T) {
	const limit = 5
	w := time.Second
	r := sl(limit, w)
	k := NewSlidingLog(r)
	ref := newModel(r)
	var l Log
	every := w / (10 * limit) // 10× the allowed rate
	admitted := 0
	var last time.Duration
	for now := time.Duration(0); now < 10*w; now += every {
		d := k.Allow(&l, now, 1)
		if want := ref.Allow(now, 1); d != want {
			t.Fatalf("AllowN(t=%v, 1) = %s, reference model %s", now, fmtDecision(d), fmtDecision(want))
		}
		if d.Allowed {
			admitted++
		}
		if l.Len() > limit {
			t.Fatalf("after AllowN(t=%v, 1) the log holds %d entries, more than the limit %d", now, l.Len(), limit)
		}
		last = now
	}
	if admitted != 10*limit {
		t.Errorf("admitted %d during 10 windows of overload, want exactly %d", admitted, 10*limit)
	}
	quiet := last + w
	for i := range limit {
		if d := k.Allow(&l, quiet, 1); !d.Allowed || d.Remaining != limit-1-i {
			t.Fatalf("after W of quiet, request %d: AllowN(t=%v, 1) = %s, want allowed with Remaining %d", i, quiet, fmtDecision(d), limit-1-i)
		}
	}
	if d := k.Allow(&l, quiet, 1); d.Allowed || d.RetryAfter != w {
		t.Fatalf("after W of quiet, request %d: AllowN(t=%v, 1) = %s, want denied with RetryAfter %v", limit, quiet, fmtDecision(d), w)
	}
}

// The ring is allocated once, at exactly Limit entries, on the first
// admission; a probe, a denial or an impossible request on a fresh log
// allocates nothing and leaves it nil.
func TestSlidingLogRing(t *testing.T) {
	k := NewSlidingLog(sl(4, time.Second))
	var l Log
	k.Allow(&l, 0, 0)
	k.Allow(&l, 0, 5)
	k.Allow(&l, 0, -1)
	if l.ts != nil || l.Len() != 0 {
		t.Fatalf("a probe and impossible requests touched a fresh log: %+v", l)
	}
	k.Allow(&l, 0, 1)
	if len(l.ts) != 4 || cap(l.ts) != 4 || l.Len() != 1 {
		t.Fatalf("after the first admission the log is %+v, want a ring of exactly 4 with 1 entry", l)
	}
	ring := &l.ts[0]
	for i := range 100 { // wrap the ring many times
		k.Allow(&l, time.Duration(i)*300*time.Millisecond, 1)
	}
	if &l.ts[0] != ring || l.Len() > 4 {
		t.Fatalf("the ring was reallocated or overfilled: %+v", l)
	}
}
