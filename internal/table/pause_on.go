//go:build admittest

package table

import (
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
)

// pauseEnabled reports whether this build has the tests' pause point: in
// builds with the tag admittest only, which make test passes to the tests
// that need it. A normal build has none (pause_off.go).
const pauseEnabled = true

// pausePoint is the tests' pause: when set, the function is called once, by
// the first call to reach it, after it has loaded its key's state word and
// before it publishes (or, on the slow path, before it takes the shard's
// mutex).
type pausePoint struct{ f atomic.Pointer[func()] }

// armed reports whether a pause is set.
func (p *pausePoint) armed() bool { return p.f.Load() != nil }

// take returns the pause if this call is the first to reach it, and nil
// otherwise.
func (p *pausePoint) take() func() {
	if f := p.f.Load(); f != nil && p.f.CompareAndSwap(f, nil) {
		return *f
	}
	return nil
}

// set makes f the pause.
func (p *pausePoint) set(f func()) { p.f.Store(&f) }

// The test-only side of a table, for the conformance suite's StoreHooks
// (internal/conformance), which the tests of other packages wire to these
// functions in builds with the tag admittest. Nothing else calls them.

// of returns the table behind lim, a limiter New returned, or nil.
func of(lim admit.KeyedLimiter) *Table {
	switch l := lim.(type) {
	case reserver:
		return l.Table
	case *Table:
		return l
	}
	return nil
}

// Is reports whether lim is a table New returned.
func Is(lim admit.KeyedLimiter) bool { return of(lim) != nil }

// EvictAt evicts every key of lim, a table, whose state is fresh at reading
// at (without the slack of the store's own sweeps), raises the floor of each
// shard it evicted from to at, and returns how many keys it evicted.
func EvictAt(lim admit.KeyedLimiter, at time.Duration) int { return of(lim).sweepAt(at) }

// Pause makes the next call of lim, a table, on any key, run f once at its
// pause point: after it has loaded its key's state word and before it
// publishes, or, for a key the table does not hold, before it takes the
// shard's mutex.
func Pause(lim admit.KeyedLimiter, f func()) { of(lim).pause.set(f) }
