package table

import (
	"time"

	"github.com/admit-go/admit"
)

// The test-only side of a table, for the conformance suite's StoreHooks
// (internal/conformance), which the tests of atomic wire to these two
// functions. Nothing else calls them.

// store returns the table behind lim, a limiter New returned.
func store(lim admit.KeyedLimiter) *Store {
	if r, ok := lim.(reserver); ok {
		return r.Store
	}
	return lim.(*Store)
}

// Is reports whether lim is a table New returned.
func Is(lim admit.KeyedLimiter) bool {
	switch lim.(type) {
	case reserver, *Store:
		return true
	}
	return false
}

// EvictAt evicts every key of lim, a table, whose state is fresh at reading
// at (without the slack of the store's own sweeps), raises the floor of each
// shard it evicted from to at, and returns how many keys it evicted.
func EvictAt(lim admit.KeyedLimiter, at time.Duration) int { return store(lim).sweepAt(at) }

// Pause makes the next call of lim, a table, on any key, run f once at its
// pause point: after it has loaded its key's state word and before it
// publishes, or, for a key the table does not hold, before it takes the
// shard's mutex.
func Pause(lim admit.KeyedLimiter, f func()) { store(lim).pause.Store(&f) }
