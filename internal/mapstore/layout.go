package mapstore

import (
	"time"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// layout is the store as a keyed.Container: the operations on a shard's map
// that the policy written in internal/keyed (Len, Stats, Sweep, Reset,
// Keys, Take, Put, and the room a new key needs) runs over, a key found by
// its map key. It is a type of its own so that its methods stay out of the
// stores' method sets. None is on the path of a stored key.
type layout[KT comparable, S any] store[KT, S]

var (
	_ keyed.Container[shard[string, uint64], string]     = (*layout[string, uint64])(nil)
	_ keyed.Container[shard[uint64, kernel.Log], uint64] = (*layout[uint64, kernel.Log])(nil)
)

// layout returns the store as a keyed.Container.
func (l *store[KT, S]) layout() *layout[KT, S] { return (*layout[KT, S])(l) }

func (c *layout[KT, S]) Shards() []shard[KT, S] { return c.shards }

func (c *layout[KT, S]) Locate(key string) (*shard[KT, S], KT) {
	mk, h := (*store[KT, S])(c).mapKey(key)
	return &c.shards[h>>c.shift], mk
}

func (c *layout[KT, S]) Lock(sh *shard[KT, S])                        { sh.mu.Lock() }
func (c *layout[KT, S]) TryLock(sh *shard[KT, S]) bool                { return sh.mu.TryLock() }
func (c *layout[KT, S]) Unlock(sh *shard[KT, S])                      { sh.mu.Unlock() }
func (c *layout[KT, S]) Now() time.Duration                           { return c.clock.Now() }
func (c *layout[KT, S]) Named() bool                                  { return c.clone != nil }
func (c *layout[KT, S]) Floor(sh *shard[KT, S]) time.Duration         { return sh.floor }
func (c *layout[KT, S]) Count(sh *shard[KT, S]) int                   { return len(sh.m) }
func (c *layout[KT, S]) Holds(sh *shard[KT, S], mk KT, _ string) bool { return sh.m[mk] != nil }

// AppendKeys appends the shard's keys: the store's copies, never rewritten.
func (c *layout[KT, S]) AppendKeys(sh *shard[KT, S], keys []string) []string {
	for mk := range sh.m {
		keys = append(keys, any(mk).(string))
	}
	return keys
}

// Scan is the store's scan.
func (c *layout[KT, S]) Scan(sh *shard[KT, S], now, at time.Duration, limit int, soonest *time.Duration) (int, int) {
	return (*store[KT, S])(c).scan(sh, now, at, limit, soonest)
}

// Retire deletes the key and the hold of its reservation, if it has one.
// The deletion is under the shard's lock, with every call on the key: its
// linearization point.
func (c *layout[KT, S]) Retire(sh *shard[KT, S], mk KT, _ string) bool {
	s := sh.m[mk]
	if s == nil {
		return false
	}
	sh.drop(mk, s) // deletes by the caller's key: a deletion stores no key
	return true
}

// Export writes the key's state to into and deletes the key and its hold
// (a reservation made before can no longer be cancelled; its tokens stay
// taken in the state carried). A sliding log's *kernel.Log is handed over
// as it is, not copied: the deletion removed the store's only reference to
// it, and the calls that could still reach it run under the lock held.
func (c *layout[KT, S]) Export(sh *shard[KT, S], mk KT, _ string, into []kernel.PartState) bool {
	s := sh.m[mk]
	if s == nil {
		return false
	}
	(*store[KT, S])(c).export(s, into)
	sh.drop(mk, s)
	return true
}

// Import stores the key under the store's own copy with the state from,
// keeping from's sliding logs rather than copying them.
func (c *layout[KT, S]) Import(sh *shard[KT, S], mk KT, _ string, from []kernel.PartState) {
	if c.clone != nil {
		mk = c.clone(mk) // our own copy: the caller may reuse the key's memory
	}
	sh.m[mk] = (*store[KT, S])(c).imported(from)
	sh.peak = max(sh.peak, len(sh.m))
}
