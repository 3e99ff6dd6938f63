package locked

import (
	"time"

	"github.com/admit-go/admit/internal/evict"
)

// sweep examines up to limit keys of st, from a random place (a Go map's
// range starts at one), and evicts those whose state is fresh at the eviction
// reading for now. The check and the deletion are under st.mu, which every
// call holds for its whole work: no call can be using a state it deletes.
// It requires that st.mu is held.
func (l *keyed[S, K]) sweep(st *stripe[S], now time.Duration, limit int) {
	at := evict.Reading(now)
	examined, evicted := 0, 0
	for key, s := range st.m {
		if examined == limit {
			break
		}
		examined++
		if l.k.Fresh(s, at) {
			delete(st.m, key)
			evicted++
		}
	}
	l.evicted(st, at, evicted)
}

// evicted records that n keys of st were evicted as fresh at reading at: it
// raises the stripe's floor, uncounts the keys and rebuilds the map if it has
// shrunk enough. It requires that st.mu is held.
func (l *keyed[S, K]) evicted(st *stripe[S], at time.Duration, n int) {
	if n == 0 {
		return
	}
	st.floor = max(st.floor, at)
	if l.maxKeys > 0 {
		l.keys.Release(n)
	}
	if st.peak >= evict.RebuildMin && len(st.m) <= st.peak/4 {
		m := make(map[string]*S, len(st.m))
		for key, s := range st.m {
			m[key] = s
		}
		st.m = m
		st.peak = len(m)
	}
}

// makeRoom applies the full-store policy (evict.MakeRoom) for a new key of
// own, whose lock the caller holds; it only TryLocks the other stripes.
func (l *keyed[S, K]) makeRoom(own *stripe[S], now time.Duration) (time.Duration, bool) {
	return evict.MakeRoom(&l.keys, l.maxKeys, l.stripes, own, now, l.horizon,
		func(st *stripe[S], isOwn bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
			if !isOwn {
				if !st.mu.TryLock() {
					return 0, 0
				}
				defer st.mu.Unlock()
			}
			return l.scan(st, now, at, limit, soonest)
		})
}

// scan examines up to limit keys of st, from a random place, and evicts those
// fresh at reading at; for the others, if soonest is not nil, it lowers
// *soonest to the time from now until they become fresh. It returns how
// many keys it examined and evicted.
// It requires that st.mu is held.
func (l *keyed[S, K]) scan(st *stripe[S], now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int) {
	for key, s := range st.m {
		if examined == limit {
			break
		}
		examined++
		if l.k.Fresh(s, at) {
			delete(st.m, key)
			evicted++
			continue
		}
		// A probe (n == 0) changes nothing and reports how long the state
		// takes to become fresh if nothing else arrives.
		if soonest != nil {
			*soonest = min(*soonest, l.k.Allow(s, now, 0).ResetAfter)
		}
	}
	l.evicted(st, at, evicted)
	return examined, evicted
}

// Sweep implements [Store].
func (l *keyed[S, K]) Sweep() int {
	return l.sweepAt(evict.Reading(l.clock.Now()))
}

// sweepAt evicts every key that is fresh at reading at, stripe by stripe, and
// returns how many it evicted.
func (l *keyed[S, K]) sweepAt(at time.Duration) int {
	total := 0
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		n := 0
		for key, s := range st.m {
			if l.k.Fresh(s, at) {
				delete(st.m, key)
				n++
			}
		}
		l.evicted(st, at, n)
		st.mu.Unlock()
		total += n
	}
	return total
}
