package mapstore

import (
	"hash/maphash"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// The keyed token buckets also hand out reservations (admit.KeyedReserver),
// so that admit.WaitKeyN can pace the waiters of each key. They are the
// stores of build, wrapped by buildTB in a type of their own, so that only
// the token bucket offers the methods.
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

// tbFullKeys is the token bucket of a store of full keys.
type tbFullKeys[S any] struct{ *fullKeys[S] }

// tbHashedKeys is the token bucket of a store of hashed keys.
type tbHashedKeys[S any] struct{ *hashedKeys[S] }

var (
	_ admit.KeyedReserver = tbFullKeys[uint64]{}
	_ admit.KeyedReserver = tbFullKeys[kernel.TokenBucketState]{}
	_ admit.KeyedReserver = tbHashedKeys[uint64]{}
	_ admit.KeyedReserver = tbHashedKeys[kernel.TokenBucketState]{}
	_ admit.Store         = tbFullKeys[uint64]{}
	_ admit.Store         = tbHashedKeys[uint64]{}
)

// pruneHolds is how many other holds a new hold examines for pruning.
const pruneHolds = 2

// buildTB is build for a token bucket: S is uint64 (kern a *packedTB) or
// kernel.TokenBucketState (kern a *kernel.TokenBucket).
func buildTB[S any](kern any, rule admit.Rule, set plumb.Settings) admit.Store {
	switch l := build[S](kern, rule, set).(type) {
	case *fullKeys[S]:
		return tbFullKeys[S]{l}
	default:
		return tbHashedKeys[S]{l.(*hashedKeys[S])}
	}
}

// ReserveN implements [admit.KeyedReserver].
func (l tbFullKeys[S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	return l.reserveN(key, key, maphash.String(l.seed, key), n, maxWait)
}

// CancelReservation implements [admit.KeyedReserver].
func (l tbFullKeys[S]) CancelReservation(key string, r admit.Reservation) bool {
	return l.cancelReservation(key, maphash.String(l.seed, key), r)
}

// ReserveN implements [admit.KeyedReserver].
func (l tbHashedKeys[S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	h := maphash.String(l.seed, key)
	return l.reserveN(key, h, h, n, maxWait)
}

// CancelReservation implements [admit.KeyedReserver].
func (l tbHashedKeys[S]) CancelReservation(key string, r admit.Reservation) bool {
	h := maphash.String(l.seed, key)
	return l.cancelReservation(h, h, r)
}

// showHold shows the hold of the key whose stored state is s, if it has
// one, a reading now of *s, and marks it dead if it is no longer live. It
// requires that sh.mu is held and that the store is a token bucket's (the
// only stores with holds).
func (l *store[KT, S]) showHold(sh *shard[KT, S], s *S, now time.Duration) {
	h, ok := sh.holds.M[s]
	if !ok || h.Ticket == 0 {
		return
	}
	if !l.tbKernel().Observe(&h, tbState(s), now) {
		h = kernel.Hold{}
	}
	sh.holds.Put(s, h)
}

// reserveN is allow for a reservation; see the top of this file. A key
// the shard does not hold consults the hooks as allow does (migrate.go).
func (l *store[KT, S]) reserveN(key string, mk KT, h uint64, n int, maxWait time.Duration) (admit.Reservation, bool) {
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
	k := l.tbKernel()
	if s == nil {
		now = max(now, sh.floor) // the key may have been evicted as fresh at floor
		var probe kernel.TokenBucketState
		if d, ok := k.Reserve(&probe, now, n, maxWait); !ok || n == 0 { // takes nothing: nothing to store
			return reservation.New(d, n, 0), ok
		}
		var fresh S
		var wait time.Duration
		if s, wait = l.add(sh, mk, fresh, now); s == nil {
			return reservation.New(wait, n, 0), false // a full store
		}
	}
	st := tbState(s)
	hold := sh.holds.M[s]
	d, ok, t := k.ReserveHold(&st, &hold, now, n, maxWait)
	setTBState(s, st) // in place; unchanged if the reservation took nothing
	// A dead hold keeps its entry (Ticket 0), so that the key's next waiter
	// updates its entry instead of adding one and pruning others; entries
	// are deleted only by the pruning of a new entry and by the eviction of
	// their key.
	switch _, had := sh.holds.M[s]; {
	case had:
		sh.holds.Put(s, hold)
	case hold.Ticket != 0:
		kernel.PruneHolds(k, sh.holds.M, now, pruneHolds, s, storedState[S])
		sh.holds.Put(s, hold)
	}
	return reservation.New(d, n, t), ok
}

// storedState is PruneHolds's view of the key whose stored state is s: every
// entry of a shard's holds is a stored key's, since an eviction deletes the
// entry of the state it deletes.
func storedState[S any](s *S) (kernel.TokenBucketState, bool) { return tbState(s), true }

// cancelReservation gives r's tokens back; see
// [admit.KeyedReserver.CancelReservation]. A key that is missing was evicted
// as fresh, so its reservation was due: nothing is given back. The reading
// is clamped to the shard's floor, which can only make the kernel refuse (a
// cancellation is refused once the tokens are due), so a key evicted and
// stored again can never have a reservation of its former life cancelled.
func (l *store[KT, S]) cancelReservation(mk KT, h uint64, r admit.Reservation) bool {
	now := l.clock.Now()
	sh := &l.shards[h>>l.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[mk]
	if s == nil {
		return false
	}
	hold, held := sh.holds.M[s]
	if !held {
		return false
	}
	st := tbState(s)
	ok, drop := l.tbKernel().CancelHold(&st, &hold, reservation.Ticket(r), max(now, sh.floor))
	if ok {
		setTBState(s, st)
	}
	if drop {
		hold = kernel.Hold{}
	}
	sh.holds.Put(s, hold)
	return ok
}
