package mapstore

import (
	"hash/maphash"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
)

// A composite of token buckets (kernel.Composite.Reservable) hands out
// reservations as a single token bucket's store does (reserve.go), in every
// rule at once: a reservation takes its tokens from every part of its key,
// under its shard's lock, and is due when the last part's tokens are
// (kernel.Composite.Reserve). Everything reserve.go says of eviction holds
// for it: a reservation on a missing key decides at max(reading, floor) and
// stores the key through the insert path only if it took tokens, and a
// reserved key is in debt, so not fresh, until its tokens are due.
//
// A reservation that must wait leaves a kernel.CompositeHold in its shard's
// cheld, under the address of the key's state, with the same protocol as a
// kernel.Hold: it can be cancelled at most once, only on its key, and never
// once it was due at a reading the key has seen; every call on a key of a
// shard with holds shows its reading to the key's hold (showCompositeHold),
// each new entry prunes a few dead ones (pruneCompositeHolds), and the
// eviction or reset of a key deletes its entry (shard.drop).

// tbCompFullKeys is the composite of token buckets of a store of full keys.
type tbCompFullKeys[S any] struct{ *compFullKeys[S] }

// tbCompHashedKeys is the composite of token buckets of a store of hashed
// keys.
type tbCompHashedKeys[S any] struct{ *compHashedKeys[S] }

var (
	_ admit.KeyedReserver  = tbCompFullKeys[[2]kernel.PartState]{}
	_ admit.KeyedReserver  = tbCompHashedKeys[[8]kernel.PartState]{}
	_ admit.CompositeStore = tbCompFullKeys[[2]kernel.PartState]{}
	_ admit.CompositeStore = tbCompHashedKeys[[8]kernel.PartState]{}
)

// ReserveN implements [admit.KeyedReserver].
func (l tbCompFullKeys[S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	return l.reserveComposite(key, key, maphash.String(l.seed, key), n, maxWait)
}

// CancelReservation implements [admit.KeyedReserver].
func (l tbCompFullKeys[S]) CancelReservation(key string, r admit.Reservation) bool {
	return l.cancelComposite(key, maphash.String(l.seed, key), r)
}

// ReserveN implements [admit.KeyedReserver].
func (l tbCompHashedKeys[S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	h := maphash.String(l.seed, key)
	return l.reserveComposite(key, h, h, n, maxWait)
}

// CancelReservation implements [admit.KeyedReserver].
func (l tbCompHashedKeys[S]) CancelReservation(key string, r admit.Reservation) bool {
	h := maphash.String(l.seed, key)
	return l.cancelComposite(h, h, r)
}

// showCompositeHold is showHold for a composite: it shows the hold of the
// key whose stored state is s, if it has one, a reading now of *s, and marks
// it dead if it is no longer live. It requires that sh.mu is held and that
// the store is a composite of token buckets (the only composites with holds).
func (l *store[KT, S]) showCompositeHold(sh *shard[KT, S], s *S, now time.Duration) {
	h, ok := sh.cheld.M[s]
	if !ok || h.Ticket == 0 {
		return
	}
	if !l.composite().Observe(&h, parts(s), now) {
		h = kernel.CompositeHold{}
	}
	sh.cheld.Put(s, h)
}

// reserveComposite is reserveN for a composite; see the top of this file.
// A key the shard does not hold consults the hooks as allow does
// (migrate.go).
func (l *store[KT, S]) reserveComposite(key string, mk KT, h uint64, n int, maxWait time.Duration) (admit.Reservation, bool) {
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
	k := l.composite()
	if s == nil {
		now = max(now, sh.floor) // the key may have been evicted as fresh at floor
		var probe S
		if d, ok := k.Reserve(parts(&probe), now, n, maxWait); !ok || n == 0 { // takes nothing: nothing to store
			return reservation.New(d, n, 0), ok
		}
		var fresh S
		var wait time.Duration
		if s, wait = l.add(sh, mk, fresh, now); s == nil {
			return reservation.New(wait, n, 0), false // a full store
		}
	}
	hold := sh.cheld.M[s]
	d, ok, t := k.ReserveHold(parts(s), &hold, now, n, maxWait) // in place
	// As in reserveN, a dead hold keeps its entry (Ticket 0) until the
	// pruning of a new entry or the eviction of its key deletes it.
	switch _, had := sh.cheld.M[s]; {
	case had:
		sh.cheld.Put(s, hold)
	case hold.Ticket != 0:
		l.pruneCompositeHolds(sh, now, s)
		sh.cheld.Put(s, hold)
	}
	return reservation.New(d, n, t), ok
}

// pruneCompositeHolds is kernel.PruneHolds for a composite's holds: it
// deletes up to pruneHolds entries of sh.cheld other than skip's whose hold
// is no longer live, showing them the reading now, so that the entries of
// keys never touched again cannot pile up. Every entry is a stored key's (an
// eviction deletes the entry of the state it deletes), so its state is the
// one its map key points to. It requires that sh.mu is held.
func (l *store[KT, S]) pruneCompositeHolds(sh *shard[KT, S], now time.Duration, skip *S) {
	k := l.composite()
	limit := pruneHolds
	for s, h := range sh.cheld.M {
		if limit == 0 {
			return
		}
		if s == skip {
			continue
		}
		limit--
		if k.Observe(&h, parts(s), now) {
			sh.cheld.Put(s, h)
		} else {
			delete(sh.cheld.M, s)
		}
	}
}

// cancelComposite is cancelReservation for a composite: it gives r's tokens
// back in every part if r is the live hold of its key. A missing key was
// evicted as fresh, so its reservation was due; the reading is clamped to the
// shard's floor, as cancelReservation's is.
func (l *store[KT, S]) cancelComposite(mk KT, h uint64, r admit.Reservation) bool {
	now := l.clock.Now()
	sh := &l.shards[h>>l.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[mk]
	if s == nil {
		return false
	}
	hold, held := sh.cheld.M[s]
	if !held {
		return false
	}
	ok, drop := l.composite().CancelHold(parts(s), &hold, reservation.Ticket(r), max(now, sh.floor))
	if drop {
		hold = kernel.CompositeHold{}
	}
	sh.cheld.Put(s, hold)
	return ok
}
