package table

import (
	"sync/atomic"
	"time"

	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// The slow path, under the shard's mutex: a held slot, a stored key whose
// lock-free path declined, and a missing key, which is inserted (put) if its
// decision admitted something, rebuilding the shard's table when it is
// full (rebuild, with freeze's CAS on every word it moves).

// lookup finds the key's slot in the shard's current table under its
// mutex: the table, and the slot's index with ok true, or with ok false,
// if the table does not hold the key (nor a tombstone of it), the empty
// slot where a new slot for it would go.
func (t *Table) lookup(sh *shard, rk recKey, key string) (tb *tab, i uint64, ok bool) {
	tb = sh.tab.Load()
	if tb == nil {
		return nil, 0, false
	}
	i, ok = tb.find(rk.tag, rk.k0, rk.k1, key, t.hashed, t.sbits)
	return tb, i, ok
}

// slow decides a request for n on key under its shard's mutex: on a held
// slot (the record's state), on a stored key whose fast path declined, or on
// a missing key (absent, or a tombstone), which it stores if the decision
// admitted something. A missing key is where the hooks have their say
// (migrate.go): Adopt before the mutex, Keep under it; a key Keep refuses
// is neither decided nor stored, and slow returns moved true, on which the
// caller redirects the call, the mutex released.
func (t *Table) slow(sh *shard, rk recKey, key string, now time.Duration, n int) (v kernel.Verdict, moved bool) {
	h := t.hooks.Load() // one Hooks for Adopt and Keep: Keep is asked with its own Adopt's Epoch
	adopted := t.adopt(h, sh, rk, key)
	hook.Between(hook.BeforeLock)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tb, i, ok := t.lookup(sh, rk, key)
	if ok {
		p := &tb.slot(i)[1]
		for {
			old := p.Load()
			if old == t.tomb {
				break // evicted: a missing key
			}
			if old == t.held {
				v, _ := sh.holds.Decide(cell{p}, rk, now, n)
				return v, false
			}
			v, nw, change, fits := t.step(old, now, n)
			if !change {
				return v, false
			}
			if !fits {
				// Past the word's horizon: hold the slot with the state
				// in its record (Holds.Spill), if the word is still old.
				if sh.holds.Spill(cell{p}, rk, old, t.tbNext(old, now, n)) {
					return v, false
				}
				continue
			}
			hook.Between(hook.BeforeCAS)
			if p.CompareAndSwap(old, nw) {
				return v, false
			}
		}
	}
	if !h.Keeps(key, adopted) {
		return v, true
	}
	at := spot{tb, i, ok}
	now = max(now, sh.floor) // the key may have been evicted as fresh at floor
	v, nw, change, fits := t.step(0, now, n)
	if !change {
		return v, false // a denial or a probe: nothing to store
	}
	if wait, ok := t.add(sh, now); !ok {
		t.keys.Denied()
		return kernel.Verdict{RetryAfter: wait}, false
	}
	if !fits {
		// A new state past the word's horizon: store the key held, with
		// the state in its record.
		t.putHeld(sh, at, rk, key, keyed.Rec{State: t.tbNext(0, now, n)})
		return v, false
	}
	t.put(sh, at, rk, key, nw)
	return v, false
}

// putHeld stores a key the shard does not hold, held, with record rec. It
// requires sh.mu.
func (t *Table) putHeld(sh *shard, at spot, rk recKey, key string, rec keyed.Rec) {
	sh.holds.Put(rk, rec)
	t.put(sh, at, rk, key, kernel.TokenBucketHeld)
}

// add makes room for a new key of sh decided at now (already clamped to the
// floor), or returns, with ok false, the RetryAfter of the denial
// (keyed.Add). The callers that then deny count the denial (Stats). It
// requires sh.mu.
func (t *Table) add(sh *shard, now time.Duration) (wait time.Duration, ok bool) {
	return keyed.Add(t.layout(), &t.keys, sh, now, t.horizon)
}

// spot is where a lookup under the shard's mutex left a key: its table
// (nil for none), and the key's slot (found, a tombstone) or the empty slot
// where its probe ended.
type spot struct {
	tb    *tab
	i     uint64
	found bool
}

// put stores a key the shard does not hold, with state word w: in its
// tombstone's slot if the table has one (the same key's: a stale call that
// loaded the key's former word can then only CAS the key's own state), or
// in a new slot, rebuilding the table first when it is full. at is where the
// caller's lookup left the key; it is used unless the table was rebuilt
// since (by add's sweep) or is full. It requires sh.mu.
func (t *Table) put(sh *shard, at spot, rk recKey, key string, w uint64) {
	tb := sh.tab.Load()
	if tb == nil || tb != at.tb {
		at = spot{tb: tb}
		if tb != nil {
			at.i, at.found = tb.find(rk.tag, rk.k0, rk.k1, key, t.hashed, t.sbits)
		}
	}
	if at.found {
		tb.slot(at.i)[1].Store(w) // a tombstone: only the mutex's holder writes one
		tb.live++
		return
	}
	if tb != nil && tb.used < tb.max {
		tb.claimAt(at.i, rk.tag, rk.k0, rk.k1, key, false, w, t.hashed)
		return
	}
	live := 0
	if tb != nil {
		live = tb.live
	}
	tb = t.rebuild(sh, tb, size(live+1))
	tb.claim(rk.tag, rk.k0, rk.k1, key, false, w, t.hashed, t.sbits)
}

// rebuild moves the keys of old (nil for none) into a new table of slots
// slots and publishes it; tombstones are left behind. Each key's word is
// frozen first, by a CompareAndSwap from the value it copies to the
// tombstone, so that no call can publish into the old table after the copy:
// a call that loses the race to the freeze finds the tombstone and takes
// the slow path, where it waits for the mutex and finds the key in the new
// table. It requires sh.mu.
func (t *Table) rebuild(sh *shard, old *tab, slots uint64) *tab {
	nt := newTab(slots, t.stride)
	if old != nil {
		for i := range old.n {
			s := old.slot(i)
			tag := s[0].Load()
			if tag == 0 {
				continue
			}
			w := t.freeze(&s[1])
			if w == t.tomb {
				continue
			}
			var k0, k1 uint64
			var key string
			if !t.hashed {
				kw := old.key(i)
				k0, k1 = kw[0].Load(), kw[1].Load()
				if k1 == longMark {
					key = old.long(i)
				}
			}
			nt.claim(tag, k0, k1, key, true, w, t.hashed, t.sbits)
		}
	}
	sh.tab.Store(nt)
	return nt
}

// freeze swaps the word p for the tombstone and returns what it held. It
// requires the shard's mutex (so a held word does not change meanwhile).
func (t *Table) freeze(p *atomic.Uint64) uint64 {
	if unfrozen() {
		hook.Between(hook.BeforeCAS)
		return p.Load() // BUG, planted for the stress self-test: no freeze
	}
	for {
		w := p.Load()
		if w == t.tomb {
			return w
		}
		hook.Between(hook.BeforeCAS)
		if p.CompareAndSwap(w, t.tomb) {
			return w
		}
	}
}
