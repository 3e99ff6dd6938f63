package sharded

import (
	"math"
	"time"
)

// evictionReading is the reading at which a sweep that read now decides
// which keys are idle: now minus the slack, saturated.
func evictionReading(now time.Duration) time.Duration {
	if now < math.MinInt64+evictionSlack {
		return math.MinInt64
	}
	return now - evictionSlack
}

// sweep examines up to limit keys of sh, from a random place (a Go map's range
// starts at one), and evicts those whose state is fresh at the eviction
// reading for now. It requires that sh.mu is held.
func (l *store[KT, S]) sweep(sh *shard[KT, S], now time.Duration, limit int) {
	at := evictionReading(now)
	examined, evicted := 0, 0
	for mk, s := range sh.m {
		if examined == limit {
			break
		}
		examined++
		if l.fresh(&s, at) {
			delete(sh.m, mk)
			evicted++
		}
	}
	l.evicted(sh, at, evicted)
}

// evicted records that n keys of sh were evicted as fresh at reading at:
// it raises the shard's floor, uncounts the keys and rebuilds the map if it
// has shrunk enough. It requires that sh.mu is held.
func (l *store[KT, S]) evicted(sh *shard[KT, S], at time.Duration, n int) {
	if n == 0 {
		return
	}
	sh.floor = max(sh.floor, at)
	if l.maxKeys > 0 {
		l.keys.n.Add(int64(-n))
	}
	if sh.peak >= rebuildMin && len(sh.m) <= sh.peak/4 {
		// A Go map never gives back the buckets of deleted keys: copy the
		// survivors into a map of their own size.
		m := make(map[KT]S, len(sh.m))
		for mk, s := range sh.m {
			m[mk] = s
		}
		sh.m = m
		sh.peak = len(m)
	}
}

// makeRoom is called when the store is full and a new key of own would
// pass; own.mu is held. It evicts the idle keys among up to fullScan keys,
// those of own first, then those of up to fullShards other shards (from a
// cursor that moves on at each call, so that calls in turn visit every
// shard), and tries again to reserve room for one key. It only TryLocks the
// other shards, skipping busy ones: waiting for a second shard's lock while
// holding one could deadlock with a call doing the same the other way round.
// If it cannot reserve room, it returns the RetryAfter of the denial: the
// time until the soonest of the keys it examined becomes evictable (plus the
// slack), or the rule's longest reset time if it examined none.
func (l *store[KT, S]) makeRoom(own *shard[KT, S], now time.Duration) (time.Duration, bool) {
	at := evictionReading(now)
	soonest := l.horizon
	examined, evicted := l.scan(own, now, at, fullScan, &soonest)
	if evicted > 0 && l.reserve() {
		return 0, true
	}
	start := l.keys.cursor.Add(fullShards)
	for i := range min(fullShards, len(l.shards)) {
		if examined >= fullScan {
			break
		}
		sh := &l.shards[(start+uint32(i))&uint32(len(l.shards)-1)]
		if sh == own || !sh.mu.TryLock() {
			continue
		}
		e, v := l.scan(sh, now, at, fullScan-examined, &soonest)
		sh.mu.Unlock()
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

// scan examines up to limit keys of sh, from a random place, and evicts those
// fresh at reading at; for the others it lowers *soonest to the time from now
// until they become fresh. It returns how many keys it examined and evicted.
// It requires that sh.mu is held.
func (l *store[KT, S]) scan(sh *shard[KT, S], now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int) {
	for mk, s := range sh.m {
		if examined == limit {
			break
		}
		examined++
		if l.fresh(&s, at) {
			delete(sh.m, mk)
			evicted++
			continue
		}
		// A probe (n == 0) changes nothing and reports how long the state
		// takes to become fresh if nothing else arrives.
		*soonest = min(*soonest, l.decide(&s, now, 0).ResetAfter)
	}
	l.evicted(sh, at, evicted)
	return examined, evicted
}

// Sweep implements [Store].
func (l *store[KT, S]) Sweep() int {
	return l.sweepAt(evictionReading(l.clock.Now()))
}

// sweepAt evicts every key that is fresh at reading at, shard by shard, and
// returns how many it evicted. Reading the clock once for all shards is
// conservative: a state fresh at an older reading is fresh at every later one.
func (l *store[KT, S]) sweepAt(at time.Duration) int {
	total := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n := 0
		for mk, s := range sh.m {
			if l.fresh(&s, at) {
				delete(sh.m, mk)
				n++
			}
		}
		l.evicted(sh, at, n)
		sh.mu.Unlock()
		total += n
	}
	return total
}

// addSat returns a+b for b >= 0, saturated at the largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
