package keyed

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
)

// Tuning of eviction.
const (
	// Slack is how much older than the clock the reading is at which a sweep
	// decides that a key is idle. A request whose own reading is at most
	// this stale sees an evicted key exactly as it would have seen the state
	// (which was already fresh at its reading); a staler one that finds its
	// key gone is judged at its shard's floor.
	Slack = 100 * time.Millisecond

	// SweepBatch is how many keys an insertion examines for eviction. In a
	// store under churn with a fraction f of its keys idle, an insertion
	// evicts SweepBatch×f keys on average, so insertions and evictions
	// balance when at most 1/SweepBatch of the keys are idle.
	SweepBatch = 4

	// SweepMinLen is the size below which insertions do not sweep a shard:
	// fewer idle keys than this cost less than looking for them.
	SweepMinLen = 64

	// FullScan is how many keys a new key examines when the store is full
	// (admit.WithMaxKeys), evicting the idle ones: from its own shard first,
	// then from up to FullShards other shards.
	FullScan = 32

	// FullShards is how many other shards a new key in a full store visits
	// when its own has no idle key: an idle key in any shard must be able to
	// make room, or a key whose shard is empty would be denied for as long
	// as no other key arrives there.
	FullShards = 8

	// RebuildMin and the factor 4: a shard's map is rebuilt when it holds a
	// quarter of the keys it held at its peak, if that peak was at least
	// RebuildMin. Rebuilding copies at most a quarter of the peak, paid for
	// by the three quarters deleted, so it costs O(1) per eviction; a Go map
	// keeps the buckets of deleted keys until it is rebuilt.
	RebuildMin = 32
)

// Map is a map whose memory comes back when it shrinks. A Go map never
// gives back the buckets of deleted entries, so a map that once held many
// would keep their memory for its owner's life. Every store keeps the holds
// of its reservations (the records of a Holds, in package atomic and the
// table; the holds themselves in the map store) in a Map per shard or
// limiter, and a deletion rebuilds it as a
// shard's map of keys is rebuilt: once it holds a quarter of the entries it
// held at its peak, if that peak was at least RebuildMin, what is left is
// copied into a map of its own size (none if nothing is left). So a burst
// of holds gives its memory back as the holds end, down to a map of fewer
// than RebuildMin entries; and a shard that holds a few keys at a time
// keeps its small map, and makes no new one for each hold.
//
// The zero Map is empty, with no map: Put makes it. Its owner guards it.
type Map[K comparable, V any] struct {
	// M is the map: nil, or made by Put. Read it (and range over it) freely;
	// add to it only through Put. A plain delete is allowed (a pruning while
	// ranging), but only Delete gives memory back.
	M    map[K]V
	peak int // the most entries M has held since it was made
}

// Put sets the entry of k to v, making the map if there is none.
func (m *Map[K, V]) Put(k K, v V) {
	if m.M == nil {
		m.M = make(map[K]V)
	}
	m.M[k] = v
	m.peak = max(m.peak, len(m.M))
}

// Delete deletes the entry of k, and rebuilds the map if it has shrunk to
// a quarter of a peak of RebuildMin or more; it costs O(1) amortized (the
// copy of a quarter of the peak is paid for by the three quarters deleted).
func (m *Map[K, V]) Delete(k K) {
	delete(m.M, k)
	if m.peak < RebuildMin || len(m.M) > m.peak/4 {
		return
	}
	if len(m.M) == 0 {
		m.M = nil
	} else {
		r := make(map[K]V, len(m.M))
		for k, v := range m.M {
			r[k] = v
		}
		m.M = r
	}
	m.peak = len(m.M)
}

// Horizon is the longest a key's state can take to become fresh (equivalent
// to a new key's) after its last admission: one Window, two for the sliding
// counter, whose previous window must roll out too.
func Horizon(rule admit.Rule) time.Duration {
	if rule.Algorithm == admit.SlidingCounter {
		return AddSat(rule.Window, rule.Window)
	}
	return rule.Window
}

// Reading is the reading at which a sweep that read now decides which keys
// are idle: now minus the slack, saturated.
func Reading(now time.Duration) time.Duration {
	if now < math.MinInt64+Slack {
		return math.MinInt64
	}
	return now - Slack
}

// AddSat returns a+b for b >= 0, saturated at the largest Duration.
func AddSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// counterFields mirrors the fields of Counter; TestCounterLayout pins the
// two.
type counterFields struct {
	n         atomic.Int64
	evictions atomic.Uint64
	denials   atomic.Uint64
	cursor    atomic.Uint32
}

// Counter holds the words only insertions and evictions write, on a
// 128-byte stretch of their own, so that they do not slow down the reads of
// a store's other fields: the key count behind admit.WithMaxKeys, the
// counts a store's Stats reports (admit.StoreStats), and MakeRoom's cursor.
// A call on a stored key writes none of them. Its zero value counts no key.
type Counter struct {
	_         [CacheLinePad]byte
	n         atomic.Int64  // keys stored, kept only when the store is bounded
	evictions atomic.Uint64 // keys evicted since the store was built (Evicted)
	denials   atomic.Uint64 // new keys denied for want of room (Denied)
	cursor    atomic.Uint32 // where MakeRoom starts visiting other shards
	_         [CacheLinePad - unsafe.Sizeof(counterFields{})]byte
}

// Reserve counts one more key if fewer than max are counted.
func (c *Counter) Reserve(max int64) bool {
	for {
		n := c.n.Load()
		if n >= max {
			return false
		}
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release uncounts n keys.
func (c *Counter) Release(n int) { c.n.Add(-int64(n)) }

// Evicted counts n keys evicted as idle: by an insertion's sweep, a Sweep,
// or the full-store policy's scans (each a Container's Scan, counted by
// this package's scan), never a key that Reset forgets or that a Take
// moves out. It writes nothing when n is 0.
func (c *Counter) Evicted(n int) {
	if n > 0 {
		c.evictions.Add(uint64(n))
	}
}

// Denied counts one request for a new key denied because the store was full
// and no room could be made (Add returned false). A store calls it
// where it answers such a request, not where a migration stores a key
// beyond the bound.
func (c *Counter) Denied() { c.denials.Add(1) }

// Stats returns the statistics of a store that holds keys keys now (its
// Len) and is bounded to max keys (0: no bound). The counts are read one
// after the other, each atomically: under concurrent insertions they may
// not all be of one instant.
func (c *Counter) Stats(keys int, max int64) admit.StoreStats {
	return admit.StoreStats{
		Keys:        keys,
		MaxKeys:     int(max),
		Evictions:   c.evictions.Load(),
		FullDenials: c.denials.Load(),
	}
}

// Bound is admit.WithMaxKeys' rule for one store, written once for every
// container: the bound (0: none) and the Counter of the store's keys, which
// counts keys only when there is a bound; its evictions and full-store
// denials it counts always (Stats). The policy of container.go keeps it:
// Add calls Room before a new key is stored and MakeRoom when Room fails,
// Reset, Take and the scans call Left when keys leave the store, Put calls
// Beyond when it stores a key whatever the bound; a container counts only
// its denials (Denied). The zero Bound has no bound.
type Bound struct {
	Counter
	max int64 // written once, before the store is shared
}

// Init sets the bound: max keys, 0 for none.
func (b *Bound) Init(max int) { b.max = int64(max) }

// Room counts one more key and reports true if the store has room for it:
// always without a bound.
func (b *Bound) Room() bool { return b.max <= 0 || b.Reserve(b.max) }

// Left uncounts n keys that left the store: evicted (after Evicted counts
// them), reset, or taken by a Reload.
func (b *Bound) Left(n int) {
	if b.max > 0 {
		b.Release(n)
	}
}

// Beyond counts one key that a Reload's Put stored whatever the bound (a
// carried state is never dropped for want of room): later insertions find
// the store full until evictions bring the count down.
func (b *Bound) Beyond() {
	if b.max > 0 {
		b.Release(-1)
	}
}

// Stats returns the statistics of the store, which holds keys keys now (its
// Len), as Counter.Stats does.
func (b *Bound) Stats(keys int) admit.StoreStats { return b.Counter.Stats(keys, b.max) }

// MakeRoom is the full-store policy, for a new key that would pass in a
// store holding its maximum of keys. It evicts the idle keys among up to
// FullScan keys, those of own first, then those of up to FullShards other
// shards (from a cursor that moves on at each call, so that calls in turn
// visit every shard), and tries again to reserve room for one key. If it
// cannot, it returns the RetryAfter of the denial:
//
//   - if it examined every key of the store (so every shard: the store has
//     at most FullShards shards and holds at most FullScan keys), the time
//     until the soonest of them becomes evictable, plus the slack;
//   - otherwise horizon (the rule's longest reset, the longest a key takes
//     to become evictable after its last admission), plus the slack;
//   - the slack alone if it evicted keys and concurrent insertions took the
//     room.
//
// The RetryAfter thus depends on the rule, the options and the calls, never
// on which shard each key landed in: that depends on each store's random
// hash seed, and a time from the keys it happened to examine would differ
// between stores, and between runs, for the same calls.
//
// scan examines up to limit keys of one shard at reading at, evicts the
// fresh ones and, if soonest is not nil, lowers *soonest to the time until
// each of the others becomes fresh (MakeRoom passes nil when it will not use
// the time); own tells it whether the shard is the caller's (whose lock, if
// the store has shard locks, the caller holds). It returns how many keys it
// examined and evicted; a store that cannot take another shard's lock
// without waiting skips it (0, 0), as waiting for a second lock while
// holding one could deadlock.
func MakeRoom[T any](c *Counter, max int64, shards []T, own *T, now, horizon time.Duration,
	scan func(sh *T, own bool, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int)) (time.Duration, bool) {
	at := Reading(now)
	soonest := horizon
	times := &soonest // nil when no scan can examine every key: no probes
	if len(shards) > FullShards || c.n.Load() > FullScan {
		times = nil
	}
	examined, evicted := scan(own, true, at, FullScan, times)
	if evicted > 0 && c.Reserve(max) {
		return 0, true
	}
	start := c.cursor.Add(FullShards)
	for i := range min(FullShards, len(shards)) {
		if examined >= FullScan {
			break
		}
		sh := &shards[(start+uint32(i))&uint32(len(shards)-1)]
		if sh == own {
			continue
		}
		e, v := scan(sh, false, at, FullScan-examined, times)
		examined, evicted = examined+e, evicted+v
		if v > 0 && c.Reserve(max) {
			return 0, true
		}
	}
	if c.Reserve(max) { // another call may have made room meanwhile
		return 0, true
	}
	switch {
	case evicted > 0:
		soonest = 0 // room was made, and a concurrent insertion took it
	case times == nil || int64(examined) < c.n.Load():
		soonest = horizon // some key went unexamined (or a busy shard was skipped)
	}
	return AddSat(soonest, Slack), false
}
