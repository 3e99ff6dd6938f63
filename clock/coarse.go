package clock

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// CoarseClock is a monotonic clock that trades precision for speed: one
// background goroutine stores a reading of [System] every resolution, and Now
// returns the stored reading (an atomic load, a few nanoseconds, instead of a
// clock read that costs tens of nanoseconds on some machines).
//
// The trade-off: readings lag the true time by up to one resolution, and move
// in steps of it. A limiter on a coarse clock therefore sees time up to one
// resolution late. It never admits more than its rule allows (a late reading
// only delays refills and window changes), but it may deny for up to one
// resolution longer than necessary, and its RetryAfter and ResetAfter can be
// up to one resolution short. Pick a resolution well below your windows'
// emission interval (Window/Limit), e.g. 1ms for limits of 100 per second.
//
// Stop the clock when done with it; after Stop, Now reads [System] directly,
// so limiters still holding the clock keep working, at the full clock's cost.
//
// The zero CoarseClock is a stopped one: Now reads [System] directly, no
// goroutine runs, and Stop does nothing; [Coarse] returns one that ticks. The
// zero value is usable rather than impossible because Go cannot forbid it
// (var c clock.CoarseClock, or a field of a larger struct, always compiles),
// and a stopped clock is the one state that needs no goroutine and gives
// every caller correct readings.
type CoarseClock struct {
	// now is the last stored reading plus one while the goroutine runs, and
	// 0 when none runs (the zero value, or after Stop), so that the zero value
	// is a stopped clock and Now's fast path stays one load and one compare.
	// The offset wraps exactly, even for a reading of MaxInt64; a reading of
	// -1, which no source gives, would only make Now read the source.
	now      atomic.Int64
	src      func() time.Duration // nil: System
	stopOnce sync.Once
	stop     chan struct{} // nil in the zero value: nothing to stop
	done     chan struct{}
}

// Coarse starts a coarse clock refreshed every resolution, which must be
// positive. The returned clock's goroutine runs until [CoarseClock.Stop].
func Coarse(resolution time.Duration) (*CoarseClock, error) {
	return newCoarse(System().Now, resolution)
}

func newCoarse(src func() time.Duration, resolution time.Duration) (*CoarseClock, error) {
	if resolution <= 0 {
		return nil, fmt.Errorf("clock: Coarse(%v): the resolution must be positive, such as time.Millisecond", resolution)
	}
	c := &CoarseClock{src: src, stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(int64(src()) + 1)
	ticker := time.NewTicker(resolution)
	go func() {
		defer close(c.done)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				c.now.Store(int64(c.src()) + 1)
			case <-c.stop:
				return
			}
		}
	}()
	return c, nil
}

// Now returns the reading stored at the last tick; on a stopped or zero
// CoarseClock, a reading of the source clock ([System]).
func (c *CoarseClock) Now() time.Duration {
	if v := c.now.Load(); v != 0 {
		return time.Duration(v - 1)
	}
	return c.read()
}

// read is Now's slow path, outlined so that Now inlines into a caller that
// holds a *CoarseClock: a reading of the source clock.
func (c *CoarseClock) read() time.Duration {
	if c.src == nil {
		return System().Now()
	}
	return c.src()
}

// Stop ends the clock's goroutine and waits for it to exit; later calls to Now
// read the source clock directly. Stop is idempotent and safe for concurrent
// use; on the zero CoarseClock, which runs no goroutine, it does nothing.
func (c *CoarseClock) Stop() {
	c.stopOnce.Do(func() {
		if c.stop == nil {
			return // the zero value: already stopped
		}
		close(c.stop)
		<-c.done
		c.now.Store(0)
	})
}
