package table

import (
	"time"

	"github.com/admit-go/admit/internal/keyed"
)

// sweep examines up to limit keys of sh's table, from the shard's cursor
// on, and evicts those fresh at reading at; for the others, if soonest is
// not nil, it lowers *soonest to the time from now until they become fresh.
// It visits at most 4·limit slots (empty ones and tombstones included), or
// the whole table when soonest is not nil (the full-store policy then needs
// every key examined) or 4·limit is more than its slots (a Sweep's limit,
// math.MaxInt, examines every key). It returns how many keys it examined
// and evicted. It requires sh.mu.
//
// Eviction is the CompareAndSwap from the exact word judged fresh to the
// tombstone (its linearization point), after the shard's floor is raised to
// at: a call that published a newer word meanwhile makes it fail, so no
// admission is lost, and a call that then finds the tombstone takes the slow
// path, which reads the floor under the mutex. A held slot shows its hold
// the reading first (keyed.Settle), which releases it or, for a fresh
// spilled state, buries it.
func (t *Table) sweep(sh *shard, now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int) {
	tb := sh.tab.Load()
	if tb == nil {
		return 0, 0
	}
	visits := tb.n // every slot: for soonest, or a limit beyond a quarter of them
	if soonest == nil && uint64(limit) <= tb.n/4 {
		visits = uint64(4 * limit)
	}
	for ; visits > 0 && examined < limit; visits-- {
		i := sh.cursor % tb.n
		sh.cursor = i + 1
		s := tb.slot(i)
		tag := s[0].Load()
		if tag == 0 {
			continue
		}
		p := &s[1]
		w := p.Load()
		if w == t.tomb {
			continue
		}
		examined++
		if w == t.held {
			if sh.holds.Settle(cell{p}, t.slotKey(tb, i, tag), at, func(at time.Duration) { sh.floor = max(sh.floor, at) }) {
				tb.live--
				evicted++
				continue
			}
			w = p.Load() // released, or still held
		}
		if w != t.held && t.fresh(w, at) {
			sh.floor = max(sh.floor, at)
			if p.CompareAndSwap(w, t.tomb) {
				tb.live--
				evicted++
				continue
			}
			w = p.Load()
		}
		if soonest != nil {
			*soonest = min(*soonest, t.untilFresh(sh, tb, i, tag, w, now))
		}
	}
	if evicted > 0 {
		t.shrink(sh)
	}
	return examined, evicted
}

// untilFresh returns the time from now until the state of slot i (word w)
// becomes fresh: a probe's ResetAfter, on the record's state for a held
// slot. It requires sh.mu.
func (t *Table) untilFresh(sh *shard, tb *tab, i, tag, w uint64, now time.Duration) time.Duration {
	if w == t.tomb {
		return 0
	}
	if w == t.held {
		rec, _ := sh.holds.Record(t.slotKey(tb, i, tag))
		return t.tb.Decide(&rec.State, now, 0).ResetAfter
	}
	v, _, _, _ := t.step(w, now, 0)
	return v.ResetAfter
}

// slotKey returns the recKey of slot i, whose tag is tag.
func (t *Table) slotKey(tb *tab, i, tag uint64) recKey {
	if t.hashed {
		return recKey{tag: tag}
	}
	kw := tb.key(i)
	rk := recKey{tag: tag, k0: kw[0].Load(), k1: kw[1].Load()}
	if rk.k1 == longMark {
		rk.long = tb.long(i)
	}
	return rk
}

// shrink rebuilds sh's table smaller once it holds fewer keys than an
// eighth of its slots, after keys left it (evicted or taken): the copy, at
// most an eighth of the slots, is paid for by the removals since the table
// was built. It requires sh.mu.
func (t *Table) shrink(sh *shard) {
	if tb := sh.tab.Load(); tb.n > minSlots && uint64(tb.live) < tb.n/8 {
		t.rebuild(sh, tb, size(tb.live))
	}
}

// Sweep implements [admit.Store] (keyed.Sweep): it evicts every key fresh
// at the eviction reading, shard by shard, and returns how many it evicted.
func (t *Table) Sweep() int { return keyed.Sweep(t.layout(), &t.keys) }

// sweepAt evicts every key fresh at reading at, shard by shard, and returns
// how many it evicted.
func (t *Table) sweepAt(at time.Duration) int { return keyed.SweepAt(t.layout(), &t.keys, at) }

// Reset forgets key's state (keyed.Reset, layout.Retire): its next call
// decides on a fresh state at its own reading, and a reservation made
// before can no longer be cancelled. It runs under the key's shard's mutex
// (a rebuild cannot move the slot meanwhile) and swaps the slot's word for
// the zero word by CompareAndSwap: its linearization point.
func (t *Table) Reset(key string) {
	if lockFreeReset() {
		t.resetLockFree(key) // BUG, planted for the stress self-test
		return
	}
	keyed.Reset(t.layout(), &t.keys, key)
}
