package mapstore

import (
	"time"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// layout is the store as a keyed.Container: the operations on a shard's map
// that the policy written in internal/keyed (Len, Stats, Sweep, Reset,
// Keys) runs over, a key found by
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

func (c *layout[KT, S]) Lock(sh *shard[KT, S])      { sh.mu.Lock() }
func (c *layout[KT, S]) Unlock(sh *shard[KT, S])    { sh.mu.Unlock() }
func (c *layout[KT, S]) Now() time.Duration         { return c.clock.Now() }
func (c *layout[KT, S]) Named() bool                { return c.clone != nil }
func (c *layout[KT, S]) Count(sh *shard[KT, S]) int { return len(sh.m) }

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
