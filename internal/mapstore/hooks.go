package mapstore

import (
	"time"

	"github.com/admit-go/admit"
)

// The test-only side of a store, for the conformance suite's StoreHooks
// (internal/conformance), which the tests of locked and sharded wire to
// these two functions: their tests cannot reach the unexported methods.
// Nothing else calls them.

// hooked is what every store New returns has, for EvictAt and Pause.
type hooked interface {
	sweepAt(at time.Duration) int
	setPause(f func())
}

// EvictAt evicts every key of lim, a store New returned, whose state is
// fresh at reading at (without the slack of the store's own sweeps), raises
// the floor of each shard it evicted from to at, and returns how many keys
// it evicted.
func EvictAt(lim admit.KeyedLimiter, at time.Duration) int { return lim.(hooked).sweepAt(at) }

// Pause makes the next call of lim, a store New returned, on any key, run f
// once at its pause point: after it has read the clock and before it takes
// its shard's lock.
func Pause(lim admit.KeyedLimiter, f func()) { lim.(hooked).setPause(f) }

// setPause makes the next call stop at the pause point and run f.
func (l *store[KT, S]) setPause(f func()) { l.pause.Store(&f) }
