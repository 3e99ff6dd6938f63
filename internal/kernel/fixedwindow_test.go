package kernel

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Fixed-window step tables: windows [kW, (k+1)W) with k = floor(t/W).

func fw(limit int, window time.Duration) admit.Rule { return rule(admit.FixedWindow, limit, window) }

// The seed walkthrough: 2 per 10s at t=2s; the third waits for the window's end.
func TestFixedWindowSeedWalkthrough(t *testing.T) {
	s := time.Second
	runSteps(t, fw(2, 10*s), []step{
		{at(2, 0), 1, allowed(1, 8*s)},
		{at(2, 0), 1, allowed(0, 8*s)},
		{at(2, 0), 1, denied(8*s, 8*s)},
		{at(10, 0), 1, allowed(1, 10*s)},
	})
}

// The boundary burst, 3 per 10s: three at 9.0s, three more at 10.0s (a new
// window). 2×Limit within a second is the algorithm, not a bug.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	s := time.Second
	runSteps(t, fw(3, 10*s), []step{
		{at(9, 0), 1, allowed(2, s)},
		{at(9, 0), 1, allowed(1, s)},
		{at(9, 0), 1, allowed(0, s)},
		{at(10, 0), 1, allowed(2, 10*s)},
		{at(10, 0), 1, allowed(1, 10*s)},
		{at(10, 0), 1, allowed(0, 10*s)},
		{at(10, 0), 1, denied(10*s, 10*s)},
	})
}

// S22, S25: N admits in [kW, (k+1)W), then one more is denied until exactly
// (k+1)W; RetryAfter = (k+1)W - now and Remaining = N - count.
func TestFixedWindowBoundaries(t *testing.T) {
	s := time.Second
	runSteps(t, fw(3, 10*s), []step{
		{at(10, 0), 2, allowed(1, 10*s)},
		{at(13, 0), 1, allowed(0, 7*s)},
		{at(13, 0), 1, denied(7*s, 7*s)},
		{at(19, 0), 0, allowed(0, s)},
		{at(20, -1), 1, denied(1, 1)},
		{at(20, 0), 1, allowed(2, 10*s)},
		{at(20, 0), 3, denied(10*s, 10*s)},
		{at(20, 0), 2, allowed(0, 10*s)},
	})
}

// S23: N at (k+1)W-1ns and N at (k+1)W are all admitted.
func TestFixedWindowBoundaryBurstNanosecond(t *testing.T) {
	s := time.Second
	runSteps(t, fw(3, 10*s), []step{
		{at(10, -1), 3, allowed(0, 1)},
		{at(10, -1), 1, denied(1, 1)},
		{at(10, 0), 3, allowed(0, 10*s)},
	})
}

// S24: negative readings. The window of -1ns is [-W, 0), found by floor
// division; Go's truncating -1/W == 0 would merge (-W, W) into one window of 2W.
func TestFixedWindowNegativeClock(t *testing.T) {
	s := time.Second
	runSteps(t, fw(2, 10*s), []step{
		{-10*s + 1, 1, allowed(1, 10*s-1)},
		{-1, 1, allowed(0, 1)},
		{-1, 1, denied(1, 1)},
		{0, 1, allowed(1, 10*s)},
		{0, 1, allowed(0, 10*s)},
		{10*s - 1, 1, denied(1, 1)},
	})
	runSteps(t, fw(2, 10*s), []step{
		{-10*s - 1, 2, allowed(0, 1)},  // window [-20s, -10s)
		{-10 * s, 2, allowed(0, 10*s)}, // window [-10s, 0)
		{-1, 1, denied(1, 1)},
		{0, 2, allowed(0, 10*s)},
	})
	runSteps(t, fw(1, 3), []step{ // W = 3ns: windows ..., [-6,-3), [-3,0), [0,3), ...
		{-4, 1, allowed(0, 1)},
		{-3, 1, allowed(0, 3)},
		{-1, 1, denied(1, 1)},
		{0, 1, allowed(0, 3)},
	})
}

// S28/K1/K2: a stale reading is treated as the newest time seen: it never
// reopens an older window, and an admission at a stale reading counts in the
// newest window. Waits are measured from the caller's reading.
func TestFixedWindowClockBackwards(t *testing.T) {
	s := time.Second
	runSteps(t, fw(2, 10*s), []step{
		{at(25, 0), 2, allowed(0, 5*s)},
		{at(15, 0), 1, denied(15*s, 15*s)}, // window [10s, 20s) is not reopened
		{at(-5, 0), 1, denied(35*s, 35*s)}, // nor is [-10s, 0)
		{at(-5, 0), 0, allowed(0, 35*s)},   // a probe reports the newest window
		{at(30, -1), 1, denied(1, 1)},      // forward again, 1ns short
		{at(30, 0), 1, allowed(1, 10*s)},   // past the old maximum's window
		{at(25, 0), 1, allowed(0, 15*s)},   // stale: counts in window [30s, 40s)
		{at(39, 0), 1, denied(1*s, 1*s)},   // so that window is full
		{at(40, 0), 2, allowed(0, 10*s)},
	})
}
