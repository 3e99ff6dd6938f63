//go:build admittest

package table

import "github.com/admit-go/admit"

// More of the test-only side of a table (pause_on.go has the first), for
// the conformance suite's migration checks (StoreHooks.Locked, Holds and
// CountIs), in builds with the tag admittest only. Nothing else calls them.

// Locked reports whether the mutex of some shard of lim, a table, is held,
// trying each in turn.
func Locked(lim admit.KeyedLimiter) bool {
	t := of(lim)
	for i := range t.shards {
		if !t.shards[i].mu.TryLock() {
			return true
		}
		t.shards[i].mu.Unlock()
	}
	return false
}

// Holds returns how many records the held slots of lim, a table, have: a
// reservation's hold, or a token bucket's state past its word's horizon.
func Holds(lim admit.KeyedLimiter) int {
	t := of(lim)
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.holds.Len()
		sh.mu.Unlock()
	}
	return n
}

// CountIs reports whether lim, a table, counts exactly n keys against
// WithMaxKeys (keyed.Counter.CountIs). It must not race other calls of the
// table.
func CountIs(lim admit.KeyedLimiter, n int) bool { return of(lim).keys.CountIs(n) }
