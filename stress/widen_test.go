package stress

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
)

// This file widens race windows, so that interleavings that a 2-core machine
// produces once a week happen within seconds:
//
//   - yielder: at a hook site (between a variant's load and its CAS, between
//     a keyed store's lookup and its use) yield the processor with some
//     probability. The variants reach it through internal/hook, which calls
//     it only in builds with the tag admitstress; the broken limiters of the
//     self-tests are test code and call it directly through between.
//   - stressClock: a clock whose readings yield between being taken and
//     being returned, and, in the stale modes, return on purpose a reading
//     taken earlier (up to one clock step old).

// yielder yields the processor at a hook site with probability permille/1000,
// drawn from a counter hashed with the seed: deterministic per call number,
// safe for concurrent use, no lock.
type yielder struct {
	seed     uint64
	permille uint64
	calls    atomic.Uint64
	yields   atomic.Int64
}

func (y *yielder) at(hook.Site) {
	if mix64(y.seed^y.calls.Add(1))%1000 < y.permille {
		y.yields.Add(1)
		runtime.Gosched()
	}
}

// current is the installed yielder, or nil.
var current atomic.Pointer[yielder]

// widen installs a yielder for the duration of one workload and returns it
// and a function that removes it. Tests run one workload at a time.
func widen(seed uint64, permille int) (*yielder, func()) {
	y := &yielder{seed: seed, permille: uint64(permille)}
	current.Store(y)
	hook.Set(y.at) // a no-op unless built with -tags admitstress
	return y, func() {
		hook.Set(nil)
		current.Store(nil)
	}
}

// between is the test code's own hook call: the broken limiters call it where
// the variants call hook.Between, and it reaches the installed yielder in
// every build.
func between(s hook.Site) {
	if y := current.Load(); y != nil {
		y.at(s)
	}
}

// stressClock is a fake clock for the harness. The test moves it only with
// advance: between bursts at quiescent points (the phased modes) or from a
// ticker goroutine during a burst (the ticking mode).
//
// Each reading may yield the processor between being taken and being
// returned (yieldPermille), so that the caller's reading goes stale while
// others run. With stalePermille > 0 a reading may instead return, after the
// yield, held: the clock's reading before its latest advance, a reading taken
// earlier and at most one step old. A call's reading is therefore within
// [before-lag, after], where before and after are the base clock around the
// call and lag the latest step (see lag).
type stressClock struct {
	base          clock.Fake
	held          atomic.Int64 // the reading before the latest advance
	lagNs         atomic.Int64 // the latest advance's step
	seed          uint64
	yieldPermille uint64
	stalePermille uint64
	calls         atomic.Uint64
	stale         atomic.Int64 // readings returned stale
}

func newStressClock(start time.Duration, seed uint64, yieldPermille, stalePermille int) *stressClock {
	c := &stressClock{seed: seed, yieldPermille: uint64(yieldPermille), stalePermille: uint64(stalePermille)}
	c.base.Set(start)
	c.held.Store(int64(start))
	return c
}

// Now implements clock.Clock.
func (c *stressClock) Now() time.Duration {
	r := c.base.Now()
	x := mix64(c.seed ^ c.calls.Add(1))
	if x%1000 < c.stalePermille {
		runtime.Gosched()
		// held only grows, and is at most one step behind the base clock
		// at any moment, so h >= r - lag.
		if h := time.Duration(c.held.Load()); h <= r {
			c.stale.Add(1)
			return h
		}
		return r
	}
	if (x>>20)%1000 < c.yieldPermille {
		runtime.Gosched()
	}
	return r
}

// advance moves the clock forward by d; held becomes the reading before.
func (c *stressClock) advance(d time.Duration) {
	c.lagNs.Store(int64(d))
	c.held.Store(int64(c.base.Now()))
	c.base.Advance(d)
}

// now is the base clock's reading, for the harness's own bounds.
func (c *stressClock) now() time.Duration { return c.base.Now() }

// lag bounds how much older than the base clock a stale reading can be.
func (c *stressClock) lag() time.Duration {
	if c.stalePermille == 0 {
		return 0
	}
	return time.Duration(c.lagNs.Load())
}
