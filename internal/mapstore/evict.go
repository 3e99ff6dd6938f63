package mapstore

import (
	"time"

	"github.com/admit-go/admit/internal/keyed"
)

// evicted records that n keys of sh were evicted as fresh at reading at:
// it raises the shard's floor and rebuilds the map if it has shrunk enough
// (keyed counts the evictions and uncounts the keys). It requires that
// sh.mu is held. Reset and Take, which are no evictions, do not call it.
func (l *store[KT, S]) evicted(sh *shard[KT, S], at time.Duration, n int) {
	if n == 0 {
		return
	}
	sh.floor = max(sh.floor, at)
	if sh.peak >= keyed.RebuildMin && len(sh.m) <= sh.peak/4 {
		// A Go map never gives back the buckets of deleted keys: copy the
		// survivors into a map of their own size.
		m := make(map[KT]*S, len(sh.m))
		for mk, s := range sh.m {
			m[mk] = s
		}
		sh.m = m
		sh.peak = len(m)
	}
}

// scan examines up to limit keys of sh, from a random place (a Go map's
// range starts at one), and evicts those fresh at reading at; for the
// others, if soonest is not nil, it lowers *soonest to the time from now
// until they become fresh. It returns how many keys it examined and
// evicted. It is the layout's Scan, which keyed.Add (an insertion's sweep
// and the full-store policy) and keyed.Sweep run. The check and the
// deletion are under sh.mu, which every call holds for its whole work: no
// call can be using a state it deletes. It requires that sh.mu is held.
func (l *store[KT, S]) scan(sh *shard[KT, S], now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int) {
	for mk, s := range sh.m {
		if examined == limit {
			break
		}
		examined++
		if l.fresh(s, at) {
			sh.drop(mk, s)
			evicted++
			continue
		}
		// A probe (n == 0) changes nothing and reports how long the state
		// takes to become fresh if nothing else arrives.
		if soonest != nil {
			*soonest = min(*soonest, l.decide(s, now, 0).ResetAfter)
		}
	}
	l.evicted(sh, at, evicted)
	return examined, evicted
}

// drop deletes the key whose map key is mk and whose state is s, and the
// hold of its reservation if it has one (a hold's reservation was due by the
// time its key is fresh). The map key is the map's own, from ranging over it.
// It requires that sh.mu is held.
func (sh *shard[KT, S]) drop(mk KT, s *S) {
	delete(sh.m, mk)
	if len(sh.holds.M) != 0 {
		sh.holds.Delete(s)
	}
	if len(sh.cheld.M) != 0 {
		sh.cheld.Delete(s)
	}
}

// Sweep implements [admit.Store] (keyed.Sweep).
func (l *store[KT, S]) Sweep() int { return keyed.Sweep(l.layout(), &l.keys) }

// sweepAt evicts every key that is fresh at reading at, shard by shard, and
// returns how many it evicted (keyed.SweepAt).
func (l *store[KT, S]) sweepAt(at time.Duration) int { return keyed.SweepAt(l.layout(), &l.keys, at) }
