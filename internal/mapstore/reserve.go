package mapstore

import (
	"hash/maphash"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// The keyed token buckets hand out reservations ahead (admit.Store.ReserveN),
// so that admit.WaitKeyN can pace the waiters of each key. They are the
// stores of build, wrapped by buildTB in a type of their own, so that only
// the token bucket reserves ahead (the others' ReserveN, in
// capabilities.go, reserves nothing ahead).
//
// A reservation is an admission like any other as far as eviction is
// concerned: it runs under its shard's lock on the key's stored state, and a
// reservation on a missing key decides at max(reading, floor) and stores the
// key through the insert path (sweep, WithMaxKeys) only if it took tokens. A
// reserved key's bucket is in debt until its tokens are due, so it is not
// fresh and no sweep evicts it meanwhile.
//
// A reservation that must wait leaves a hold (kernel.Hold) in its shard's
// holds, under the address of the key's state (never under a caller's key:
// see the package doc): the record that lets it be cancelled at most once,
// only on its key, and never once it was due at a reading the key has seen.
// Every call on a key of a shard with holds shows its reading to the key's
// hold (showHold), each new entry prunes a few dead ones, and the eviction
// of a key deletes its entry (shard.drop).
//
// A composite of token buckets follows the same protocol with its own holds
// (composite_reserve.go): the functions of this file are written once over
// a holder, the view of a reservable kernel and of its shard's holds that
// tbHolder gives of a token bucket and compHolder of a composite.

// The wrappers of the stores that hand out reservations: a token bucket's
// (buildTB) and a composite of token buckets' (buildComposite), of full keys
// and of hashed keys.
type (
	tbFullKeys[S any] struct {
		*fullKeys[S]
		reserving[string, S]
	}
	tbHashedKeys[S any] struct {
		*hashedKeys[S]
		reserving[uint64, S]
	}
	tbCompFullKeys[S any] struct {
		*compFullKeys[S]
		reserving[string, S]
	}
	tbCompHashedKeys[S any] struct {
		*compHashedKeys[S]
		reserving[uint64, S]
	}
)

// pruneHolds is how many other holds a new hold examines for pruning.
const pruneHolds = 2

// buildTB is build for a token bucket: S is uint64 (kern a *packedTB) or
// kernel.TokenBucketState (kern a *kernel.TokenBucket).
func buildTB[S any](kern any, rule admit.Rule, set plumb.Settings) admit.Store {
	switch l := build[S](kern, rule, set).(type) {
	case *fullKeys[S]:
		return tbFullKeys[S]{l, reserving[string, S]{&l.store}}
	default:
		h := l.(*hashedKeys[S])
		return tbHashedKeys[S]{h, reserving[uint64, S]{&h.store}}
	}
}

// reserving gives the store l of a token bucket or of a composite of token
// buckets the ReserveN and CancelReservation of [admit.Store]; the
// wrappers of those stores (tbFullKeys, tbCompFullKeys, …) embed it.
type reserving[KT comparable, S any] struct{ l *store[KT, S] }

// ReserveN implements [admit.Store] and [admit.CompositeStore].
func (r reserving[KT, S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	l := r.l
	mk, h := l.mapKey(key)
	if c, ok := l.kern.(*kernel.Composite); ok {
		return reserveHeld(l, compHolder[KT, S]{c}, key, mk, h, n, maxWait)
	}
	return reserveHeld(l, tbHolder[KT, S]{l.tbKernel()}, key, mk, h, n, maxWait)
}

// CancelReservation implements [admit.Store] and [admit.CompositeStore].
func (r reserving[KT, S]) CancelReservation(key string, res admit.Reservation) bool {
	l := r.l
	mk, h := l.mapKey(key)
	if c, ok := l.kern.(*kernel.Composite); ok {
		return cancelHeld(l, compHolder[KT, S]{c}, mk, h, res)
	}
	return cancelHeld(l, tbHolder[KT, S]{l.tbKernel()}, mk, h, res)
}

// mapKey returns the map key and the hash of key: the key itself for a store
// of full keys, its hash for one of hashed keys.
func (l *store[KT, S]) mapKey(key string) (mk KT, h uint64) {
	h = maphash.String(l.seed, key)
	switch p := any(&mk).(type) {
	case *string:
		*p = key
	case *uint64:
		*p = h
	}
	return mk, h
}

// A holder is a reservable kernel as reserveHeld, cancelHeld and showHeld
// see it: its reservations on a stored state S and the holds H they leave in
// a shard's map of holds. tbHolder is a token bucket's, compHolder a
// composite's.
type holder[KT comparable, S, H any] interface {
	// held returns the shard's map of holds of this kind.
	held(sh *shard[KT, S]) *keyed.Map[*S, H]
	// ticket returns h's ticket, 0 for a dead hold.
	ticket(h H) uint64
	// probe is the kernel's Reserve on a new key's state, which it leaves
	// unstored.
	probe(now time.Duration, n int, maxWait time.Duration) (time.Duration, bool)
	// reserveHold, observe and cancelHold are the kernel's, on *s in place;
	// they take the hold and return it as the kernel left it. (Holds pass
	// by value: a pointer passed to a method of a type parameter escapes,
	// which would cost each reservation an allocation.)
	reserveHold(s *S, h H, now time.Duration, n int, maxWait time.Duration) (H, time.Duration, bool, uint64)
	observe(h H, s *S, now time.Duration) (H, bool)
	cancelHold(s *S, h H, ticket uint64, now time.Duration) (H, bool, bool)
	// prune is kernel.PruneHolds over the shard's holds, skipping skip's.
	prune(sh *shard[KT, S], now time.Duration, skip *S)
}

// tbHolder is the holder of a token bucket, whose stored state S is a
// packed word or a kernel.TokenBucketState (tbState) and whose holds are
// shard.holds.
type tbHolder[KT comparable, S any] struct{ k *kernel.TokenBucket }

func (tbHolder[KT, S]) held(sh *shard[KT, S]) *keyed.Map[*S, kernel.Hold] { return &sh.holds }

func (tbHolder[KT, S]) ticket(h kernel.Hold) uint64 { return h.Ticket }

func (t tbHolder[KT, S]) probe(now time.Duration, n int, maxWait time.Duration) (time.Duration, bool) {
	var probe kernel.TokenBucketState
	return t.k.Reserve(&probe, now, n, maxWait)
}

func (t tbHolder[KT, S]) reserveHold(s *S, h kernel.Hold, now time.Duration, n int, maxWait time.Duration) (kernel.Hold, time.Duration, bool, uint64) {
	st := tbState(s)
	d, ok, tk := t.k.ReserveHold(&st, &h, now, n, maxWait)
	setTBState(s, st) // unchanged if the reservation took nothing
	return h, d, ok, tk
}

func (t tbHolder[KT, S]) observe(h kernel.Hold, s *S, now time.Duration) (kernel.Hold, bool) {
	live := t.k.Observe(&h, tbState(s), now)
	return h, live
}

func (t tbHolder[KT, S]) cancelHold(s *S, h kernel.Hold, ticket uint64, now time.Duration) (kernel.Hold, bool, bool) {
	st := tbState(s)
	ok, drop := t.k.CancelHold(&st, &h, ticket, now)
	if ok {
		setTBState(s, st)
	}
	return h, ok, drop
}

func (t tbHolder[KT, S]) prune(sh *shard[KT, S], now time.Duration, skip *S) {
	kernel.PruneHolds(t.k, sh.holds.M, now, pruneHolds, skip, storedState[S])
}

// storedState is PruneHolds's view of the key whose stored state is s: every
// entry of a shard's holds is a stored key's, since an eviction deletes the
// entry of the state it deletes.
func storedState[S any](s *S) (kernel.TokenBucketState, bool) { return tbState(s), true }

// showHold shows the hold of the key whose stored state is s, if it has
// one, a reading now of *s, and marks it dead if it is no longer live. It
// requires that sh.mu is held and that the store is a token bucket's (the
// only stores with holds in sh.holds).
func (l *store[KT, S]) showHold(sh *shard[KT, S], s *S, now time.Duration) {
	showHeld(sh, tbHolder[KT, S]{l.tbKernel()}, s, now)
}

// showHeld is showHold for the holds of k.
func showHeld[KT comparable, S, H any, K holder[KT, S, H]](sh *shard[KT, S], k K, s *S, now time.Duration) {
	hs := k.held(sh)
	h, ok := hs.M[s]
	if !ok || k.ticket(h) == 0 {
		return
	}
	if h, ok = k.observe(h, s, now); !ok {
		var dead H
		h = dead
	}
	hs.Put(s, h)
}

// reserveHeld is allow for a reservation by k; see the top of this file. A
// key the shard does not hold consults the hooks as allow does (migrate.go).
func reserveHeld[KT comparable, S, H any, K holder[KT, S, H]](l *store[KT, S], k K, key string, mk KT, h uint64, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.paused()
	sh := &l.shards[h>>l.shift]
	sh.mu.Lock()
	s := sh.m[mk]
	if s == nil {
		if hk := l.hooks.Load(); hk != nil {
			var redirect bool
			if s, redirect = l.consult(sh, hk, key, mk); redirect {
				return reserveElsewhere(hk, key, n) // sh.mu released
			}
		}
	}
	defer sh.mu.Unlock()
	if s == nil {
		now = max(now, sh.floor)                              // the key may have been evicted as fresh at floor
		if d, ok := k.probe(now, n, maxWait); !ok || n == 0 { // takes nothing: nothing to store
			return reservation.New(d, n, 0), ok
		}
		var fresh S
		var wait time.Duration
		if s, wait = l.add(sh, mk, fresh, now); s == nil {
			return reservation.New(wait, n, 0), false // a full store
		}
	}
	hs := k.held(sh)
	hold, d, ok, t := k.reserveHold(s, hs.M[s], now, n, maxWait) // in place
	// A dead hold keeps its entry (Ticket 0), so that the key's next waiter
	// updates its entry instead of adding one and pruning others; entries
	// are deleted only by the pruning of a new entry and by the eviction of
	// their key.
	switch _, had := hs.M[s]; {
	case had:
		hs.Put(s, hold)
	case k.ticket(hold) != 0:
		k.prune(sh, now, s)
		hs.Put(s, hold)
	}
	return reservation.New(d, n, t), ok
}

// cancelHeld gives r's tokens back if r is the live hold of its key; see
// [admit.Store.CancelReservation]. A key that is missing was evicted
// as fresh, so its reservation was due: nothing is given back. The reading
// is clamped to the shard's floor, which can only make the kernel refuse (a
// cancellation is refused once the tokens are due), so a key evicted and
// stored again can never have a reservation of its former life cancelled.
func cancelHeld[KT comparable, S, H any, K holder[KT, S, H]](l *store[KT, S], k K, mk KT, h uint64, r admit.Reservation) bool {
	now := l.clock.Now()
	sh := &l.shards[h>>l.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[mk]
	if s == nil {
		return false
	}
	hs := k.held(sh)
	hold, held := hs.M[s]
	if !held {
		return false
	}
	hold, ok, drop := k.cancelHold(s, hold, reservation.Ticket(r), max(now, sh.floor))
	if drop {
		var dead H
		hold = dead
	}
	hs.Put(s, hold)
	return ok
}
