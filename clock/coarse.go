package clock

import (
	"fmt"
	"math"
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
type CoarseClock struct {
	now      atomic.Int64 // the last stored reading; stopped once Stop ran
	src      func() time.Duration
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// stopped marks a stopped CoarseClock: no System reading is ever MinInt64.
const stopped = math.MinInt64

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
	c.now.Store(int64(src()))
	ticker := time.NewTicker(resolution)
	go func() {
		defer close(c.done)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				c.now.Store(int64(c.src()))
			case <-c.stop:
				return
			}
		}
	}()
	return c, nil
}

// Now returns the reading stored at the last tick.
func (c *CoarseClock) Now() time.Duration {
	if v := c.now.Load(); v != stopped {
		return time.Duration(v)
	}
	return c.src()
}

// Stop ends the clock's goroutine and waits for it to exit; later calls to Now
// read the source clock directly. Stop is idempotent and safe for concurrent use.
func (c *CoarseClock) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.now.Store(stopped)
	})
}
