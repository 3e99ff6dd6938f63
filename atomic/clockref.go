package atomic

import (
	"reflect"
	"time"

	"github.com/admit-go/admit/clock"
)

// clockRef is a limiter's clock. When it is clock.System(), the limiter
// reads it by a call the compiler resolves statically, clock.System().Now()
// (System is inlined, its concrete type is then known, and the call is
// devirtualized and inlined down to time.Since), instead of a dynamic call
// through the Clock interface and the pointer wrapper Go generates for a
// value method called that way: about 14 fewer instructions per call, on
// every call (docs/algorithms.md). It is still time.Since, so a limiter in a
// testing/synctest bubble reads the bubble's fake time as before, and any
// other clock, a clock.Fake or a clock.CoarseClock, is called as it is.
//
// A *clock.CoarseClock is called directly too (coarse): its Now is one
// atomic load and a comparison, which the compiler inlines once the call is
// static, so the dynamic call is most of what a coarse reading costs.
type clockRef struct {
	c      clock.Clock
	sys    bool               // c is clock.System()
	coarse *clock.CoarseClock // c, when it is a coarse clock
}

// systemType is the dynamic type of clock.System().
var systemType = reflect.TypeOf(clock.System())

// newClockRef returns c as a clockRef. It compares dynamic types, not
// values: == on two interfaces panics when their dynamic type is not
// comparable (a user's clock may be a struct holding a func), and System's
// type is an empty struct, so its type is its value.
func newClockRef(c clock.Clock) clockRef {
	coarse, _ := c.(*clock.CoarseClock)
	return clockRef{c: c, sys: reflect.TypeOf(c) == systemType, coarse: coarse}
}

// now reads the clock.
func (r *clockRef) now() time.Duration {
	if r.sys {
		return clock.System().Now()
	}
	if r.coarse == nil {
		return r.c.Now()
	}
	return r.coarseNow()
}

// coarseNow reads the coarse clock by a static call, in which its Now (an
// atomic load) inlines. It is outlined so that the hottest paths, which
// test sys and read the system clock in their own frame, stay small: inlined
// there it cost the system-clock path three instructions per call.
//
//go:noinline
func (r *clockRef) coarseNow() time.Duration { return r.coarse.Now() }
