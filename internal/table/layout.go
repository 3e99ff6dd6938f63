package table

import (
	"time"

	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// layout is the table as a keyed.Container: the operations on a shard's
// slots that the policy written in internal/keyed (Len, Stats, Sweep,
// Reset, Keys, Take, Put, and the room a new key needs) runs over. It is a
// type of its own so that its methods stay out of the Table's method set.
// None is on the lock-free path of a stored key.
type layout Table

var _ keyed.Container[shard, recKey] = (*layout)(nil)

// layout returns the table as a keyed.Container.
func (t *Table) layout() *layout { return (*layout)(t) }

func (c *layout) Shards() []shard                           { return c.shards }
func (c *layout) Locate(key string) (*shard, recKey)        { return (*Table)(c).locate(key) }
func (c *layout) Lock(sh *shard)                            { sh.mu.Lock() }
func (c *layout) TryLock(sh *shard) bool                    { return sh.mu.TryLock() }
func (c *layout) Unlock(sh *shard)                          { sh.mu.Unlock() }
func (c *layout) Now() time.Duration                        { return (*Table)(c).now() }
func (c *layout) Named() bool                               { return !c.hashed }
func (c *layout) Floor(sh *shard) time.Duration             { return sh.floor }
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

// Holds reports whether sh's table holds key (a tombstone is a missing key).
func (c *layout) Holds(sh *shard, rk recKey, key string) bool {
	tb, i, ok := (*Table)(c).lookup(sh, rk, key)
	return ok && tb.slot(i)[1].Load() != c.tomb
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

// Export freezes the slot's word to the tombstone (for a held slot, whose
// word only the mutex's holder changes, it reads the record's state and
// deletes the record, with any hold), as a rebuild's freeze: a lock-free
// call that loaded the word before fails its CAS, finds the tombstone and
// takes the slow path, where the key is missing; a call that published
// first is in the state taken. It writes the state to into[0].
func (c *layout) Export(sh *shard, rk recKey, key string, into []kernel.PartState) bool {
	t := (*Table)(c)
	tb, i, ok := t.lookup(sh, rk, key)
	if !ok {
		return false
	}
	p := &tb.slot(i)[1]
	var w uint64
	var heldState kernel.TokenBucketState
	for {
		w = p.Load()
		if w == t.tomb {
			return false
		}
		if w == t.held {
			heldState, _ = sh.holds.Take(cell{p}, rk) // the record's state; the slot buried
			break
		}
		hook.Between(hook.BeforeCAS)
		if p.CompareAndSwap(w, t.tomb) {
			break
		}
	}
	tb.live--
	t.shrink(sh)
	into[0] = kernel.PartState{}
	switch {
	case w == t.held:
		into[0].SetTB(heldState)
	case t.alg == algTB:
		into[0].SetTB(t.tb.Unpack(w))
	case t.alg == algFW:
		into[0].SetFW(t.fwp.Unpack(w))
	default:
		into[0].SetSC(t.scp.Unpack(w))
	}
	return true
}

// Import stores key with the state from[0] (a count may be past the Limit:
// the word keeps it up to its room, see kernel.FixedWindowWord). A token
// bucket's state past the packed word's horizon is stored held, as the
// slow path stores it.
func (c *layout) Import(sh *shard, rk recKey, key string, from []kernel.PartState) {
	t := (*Table)(c)
	w, fits := t.pack(&from[0])
	if !fits {
		t.putHeld(sh, spot{}, rk, key, keyed.Rec{State: from[0].TB()})
		return
	}
	t.put(sh, spot{}, rk, key, w)
}
