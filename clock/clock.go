// Package clock is the only place in admit that reads the runtime's clock.
//
// Limiters take a [Clock] and ask it for the current time once per call; the
// algorithms themselves are pure functions of that reading. Production code uses
// [System], a monotonic clock that wall-clock steps (NTP, daylight saving, manual
// changes) cannot move. Tests use [Fake], which moves only when the test moves
// it, so "wait ten seconds and try again" is a call to Advance, not a sleep.
package clock

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Clock reports the current time as a monotonic duration since an arbitrary,
// fixed origin. Readings never go backwards for a single caller of [System];
// limiters nevertheless tolerate a reading older than one they have already seen
// (a concurrent caller's stale reading, or a [Fake] moved back with Set): such a
// reading is never treated more kindly than the newest the limiter has seen, so
// it can neither refill a bucket nor reopen a window (package admit, "Time",
// says how each algorithm judges it).
//
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Duration
}

// origin is the fixed instant System measures from. It carries the runtime's
// monotonic reading, so time.Since(origin) is immune to wall-clock steps.
var origin = time.Now()

type system struct{}

// Now returns the monotonic time elapsed since the package was initialised.
func (system) Now() time.Duration { return time.Since(origin) }

// System returns the runtime's monotonic clock. Its readings start near zero when
// the process starts and never go backwards. It is never the wall clock: it does
// not jump when the system time is set. On some platforms the monotonic clock
// does not advance while the machine is suspended; limits then resume where they
// were when the machine went to sleep.
func System() Clock { return system{} }

// Fake is a manually driven clock for tests. Its zero value, like [NewFake],
// reads 0 and is ready to use. It moves only through [Fake.Advance] and
// [Fake.Set], and is safe for concurrent use: a test may advance it while
// goroutines read it.
type Fake struct {
	now atomic.Int64 // nanoseconds since the fake origin
}

// NewFake returns a fake clock that reads 0.
func NewFake() *Fake { return new(Fake) }

// Now returns the fake clock's current reading.
func (f *Fake) Now() time.Duration { return time.Duration(f.now.Load()) }

// Advance moves the clock forward by d. It panics if d is negative (use Set to
// simulate a clock that jumps backwards) or if the reading would overflow
// time.Duration; both are mistakes in the test, not conditions to survive.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("clock: Fake.Advance(%v): negative step; use Set to move the clock backwards", d))
	}
	for {
		cur := f.now.Load()
		if cur > math.MaxInt64-int64(d) {
			panic(fmt.Sprintf("clock: Fake.Advance(%v) from %v overflows time.Duration", d, time.Duration(cur)))
		}
		if f.now.CompareAndSwap(cur, cur+int64(d)) {
			return
		}
	}
}

// Set moves the clock to t. Unlike Advance it may move the clock backwards, to
// simulate a clock jump or a caller holding a stale reading.
func (f *Fake) Set(t time.Duration) { f.now.Store(int64(t)) }
