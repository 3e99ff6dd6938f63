// Package clockref is how the lock-free limiters (package atomic: its
// single-key limiters and New's keyed table) read their clock cheaply.
package clockref

import (
	"reflect"
	"time"

	"github.com/admit-go/admit/clock"
)

// Ref is a limiter's clock. When it is clock.System(), the limiter
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
type Ref struct {
	C      clock.Clock
	Sys    bool               // C is clock.System()
	Coarse *clock.CoarseClock // C, when it is a coarse clock
}

// systemType is the dynamic type of clock.System().
var systemType = reflect.TypeOf(clock.System())

// New returns c as a Ref. It compares dynamic types, not
// values: == on two interfaces panics when their dynamic type is not
// comparable (a user's clock may be a struct holding a func), and System's
// type is an empty struct, so its type is its value.
func New(c clock.Clock) Ref {
	coarse, _ := c.(*clock.CoarseClock)
	return Ref{C: c, Sys: reflect.TypeOf(c) == systemType, Coarse: coarse}
}

// Now reads the clock. The hottest paths test Sys and read the system clock
// in their own frame instead (see atomic.TokenBucket.Allow).
func (r *Ref) Now() time.Duration {
	if r.Sys {
		return clock.System().Now()
	}
	if r.Coarse == nil {
		return r.C.Now()
	}
	return r.CoarseNow()
}

// CoarseNow reads the coarse clock by a static call, in which its Now (an
// atomic load) inlines. It is outlined so that the hottest paths, which
// test sys and read the system clock in their own frame, stay small: inlined
// there it cost the system-clock path three instructions per call.
//
//go:noinline
func (r *Ref) CoarseNow() time.Duration { return r.Coarse.Now() }
