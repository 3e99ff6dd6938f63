package locked

import (
	"math"
	"time"
)

// Tuning of eviction, the same as package sharded's; docs/keyed-stores.md
// documents the values.
const (
	// evictionSlack is how much older than the clock the reading is at which
	// a sweep decides that a key is idle: a call whose own reading is at most
	// this stale sees an evicted key exactly as it would have seen its state.
	evictionSlack = 100 * time.Millisecond

	// sweepBatch is how many keys an insertion examines for eviction, from a
	// random place in its stripe: at most about 1/sweepBatch of the keys of
	// a store under churn are idle.
	sweepBatch = 4

	// sweepMinLen is the size below which insertions do not sweep a stripe.
	sweepMinLen = 64

	// fullScan is how many keys a new key examines when the store is full
	// ([admit.WithMaxKeys]), evicting the idle ones: from its own stripe
	// first, then from up to fullShards other stripes.
	fullScan = 32

	// fullShards is how many other stripes a new key in a full store visits
	// when its own stripe has no idle key, so that an idle key anywhere can
	// make room.
	fullShards = 8

	// rebuildMin: a stripe's map is rebuilt when it holds a quarter of the
	// keys it held at its peak, if that peak was at least rebuildMin, since
	// a Go map keeps the buckets of deleted keys.
	rebuildMin = 32
)

// evictionReading is the reading at which a sweep that read now decides
// which keys are idle: now minus the slack, saturated.
func evictionReading(now time.Duration) time.Duration {
	if now < math.MinInt64+evictionSlack {
		return math.MinInt64
	}
	return now - evictionSlack
}

// addSat returns a+b for b >= 0, saturated at the largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// sweep examines up to limit keys of st, from a random place (a Go map's
// range starts at one), and evicts those whose state is fresh at the eviction
// reading for now. The check and the deletion are under st.mu, which every
// call holds for its whole work: no call can be using a state it deletes.
// It requires that st.mu is held.
func (l *keyed[S, K]) sweep(st *stripe[S], now time.Duration, limit int) {
	at := evictionReading(now)
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
		l.keys.n.Add(int64(-n))
	}
	if st.peak >= rebuildMin && len(st.m) <= st.peak/4 {
		m := make(map[string]*S, len(st.m))
		for key, s := range st.m {
			m[key] = s
		}
		st.m = m
		st.peak = len(m)
	}
}

// makeRoom is called when the store is full and a new key of own would
// pass; own.mu is held. It evicts the idle keys among up to fullScan keys,
// those of own first, then those of up to fullShards other stripes (from a
// cursor that moves on at each call, so that calls in turn visit every
// stripe), and tries again to reserve room for one key. It only TryLocks the
// other stripes, skipping busy ones: waiting for a second stripe's lock while
// holding one could deadlock with a call doing the same the other way round.
// If it cannot reserve room, it returns the RetryAfter of the denial: the
// time until the soonest of the keys it examined becomes evictable (plus the
// slack), or the rule's longest reset time if it examined none.
func (l *keyed[S, K]) makeRoom(own *stripe[S], now time.Duration) (time.Duration, bool) {
	at := evictionReading(now)
	soonest := l.horizon
	examined, evicted := l.scan(own, now, at, fullScan, &soonest)
	if evicted > 0 && l.reserve() {
		return 0, true
	}
	start := l.keys.cursor.Add(fullShards)
	for i := range min(fullShards, len(l.stripes)) {
		if examined >= fullScan {
			break
		}
		st := &l.stripes[(start+uint32(i))&uint32(len(l.stripes)-1)]
		if st == own || !st.mu.TryLock() {
			continue
		}
		e, v := l.scan(st, now, at, fullScan-examined, &soonest)
		st.mu.Unlock()
		examined, evicted = examined+e, evicted+v
		if v > 0 && l.reserve() {
			return 0, true
		}
	}
	if l.reserve() { // another call may have made room meanwhile
		return 0, true
	}
	if evicted > 0 {
		soonest = 0 // room was made, and a concurrent insertion took it
	}
	return addSat(soonest, evictionSlack), false
}

// scan examines up to limit keys of st, from a random place, and evicts those
// fresh at reading at; for the others it lowers *soonest to the time from now
// until they become fresh. It returns how many keys it examined and evicted.
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
		*soonest = min(*soonest, l.k.Allow(s, now, 0).ResetAfter)
	}
	l.evicted(st, at, evicted)
	return examined, evicted
}

// Sweep implements [Store].
func (l *keyed[S, K]) Sweep() int {
	return l.sweepAt(evictionReading(l.clock.Now()))
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
