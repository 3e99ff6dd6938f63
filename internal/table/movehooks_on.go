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
// WithMaxKeys, probing its count with Reserve (which counts one more only
// below the bound it is given) and giving back what the probe counted. It
// must not race other calls of the table.
func CountIs(lim admit.KeyedLimiter, n int) bool {
	t := of(lim)
	if t.keys.Reserve(int64(n)) { // fewer than n
		t.keys.Release(1)
		return false
	}
	if !t.keys.Reserve(int64(n) + 1) { // more than n
		return false
	}
	t.keys.Release(1)
	return true
}
