package table

import (
	"time"

	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/keyed"
)

// layout is the table as a keyed.Container: the operations on a shard's
// slots that the policy written in internal/keyed (Len, Stats, Sweep,
// Reset, Keys) runs over. It is a
// type of its own so that its methods stay out of the Table's method set.
// None is on the lock-free path of a stored key.
type layout Table

var _ keyed.Container[shard, recKey] = (*layout)(nil)

// layout returns the table as a keyed.Container.
func (t *Table) layout() *layout { return (*layout)(t) }

func (c *layout) Shards() []shard                           { return c.shards }
func (c *layout) Locate(key string) (*shard, recKey)        { return (*Table)(c).locate(key) }
func (c *layout) Lock(sh *shard)                            { sh.mu.Lock() }
func (c *layout) Unlock(sh *shard)                          { sh.mu.Unlock() }
func (c *layout) Now() time.Duration                        { return (*Table)(c).now() }
func (c *layout) Named() bool                               { return !c.hashed }
func (c *layout) AppendKeys(sh *shard, k []string) []string { return (*Table)(c).appendKeys(sh, k) }

// Count returns the keys of sh's table (tombstones are none).
func (c *layout) Count(sh *shard) int {
	if tb := sh.tab.Load(); tb != nil {
		return tb.live
	}
	return 0
}

// Scan is the table's sweep.
func (c *layout) Scan(sh *shard, now, at time.Duration, limit int, soonest *time.Duration) (int, int) {
	return (*Table)(c).sweep(sh, now, at, limit, soonest)
}

// Retire swaps the slot's word for the zero word, a fresh key's state in
// every packing, by CompareAndSwap from the word it loaded: Reset's
// linearization point. A lock-free call that loaded the word before fails
// its CAS and decides again on the fresh state; one that published first
// is ordered before the reset. A held slot (token bucket) is released with
// the zero state and its record, with any hold, deleted (keyed.Holds.Reset).
// The key stays in its slot, as a fresh key: left is always false. A key
// the table does not hold, or a tombstone, is already fresh.
func (c *layout) Retire(sh *shard, rk recKey, key string) bool {
	t := (*Table)(c)
	tb, i, ok := t.lookup(sh, rk, key)
	if !ok {
		return false
	}
	p := &tb.slot(i)[1]
	for {
		w := p.Load()
		switch w {
		case t.tomb, 0:
			return false
		case t.held:
			sh.holds.Reset(cell{p}, rk)
			return false
		}
		hook.Between(hook.BeforeCAS)
		if p.CompareAndSwap(w, 0) {
			return false
		}
	}
}
