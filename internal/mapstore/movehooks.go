package mapstore

import "github.com/admit-go/admit"

// More of the test-only side of a store (hooks.go has the first), for the
// conformance suite's migration checks (StoreHooks.Locked, Holds and
// CountIs), which the tests of locked and sharded wire to these functions.
// Nothing else calls them.

// inspected is what every store New and NewLimits return has, for Locked,
// Holds and CountIs.
type inspected interface {
	locked() bool
	holdCount() int
	countIs(n int) bool
}

// Locked reports whether the lock of some shard of lim, a store New or
// NewLimits returned, is held, trying each in turn.
func Locked(lim admit.KeyedLimiter) bool { return lim.(inspected).locked() }

// Holds returns how many entries the holds of lim's shards have: the
// reservations that may still be cancelled.
func Holds(lim admit.KeyedLimiter) int { return lim.(inspected).holdCount() }

// CountIs reports whether lim counts exactly n keys against WithMaxKeys. It
// must not race other calls of lim.
func CountIs(lim admit.KeyedLimiter, n int) bool { return lim.(inspected).countIs(n) }

func (l *store[KT, S]) locked() bool {
	for i := range l.shards {
		if !l.shards[i].mu.TryLock() {
			return true
		}
		l.shards[i].mu.Unlock()
	}
	return false
}

func (l *store[KT, S]) holdCount() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.holds.M) + len(sh.cheld.M)
		sh.mu.Unlock()
	}
	return n
}

func (l *store[KT, S]) countIs(n int) bool { return l.keys.CountIs(n) }
