package sharded

import (
	"hash/maphash"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// The keyed token buckets also hand out reservations (admit.KeyedReserver),
// so that admit.WaitKeyN can pace the waiters of each key. They are the
// stores of build, wrapped by buildTB in a type of their own, so that only
// the token bucket offers the methods.
//
// A reservation is an admission like any other as far as eviction is
// concerned: it runs under its shard's lock on the key's inline state, and a
// reservation on a missing key decides at max(reading, floor) and stores the
// key through the insert path (sweep, WithMaxKeys) only if it took tokens. A
// reserved key's bucket is in debt until its tokens are due, so it is not
// fresh and no sweep evicts it meanwhile.

// tbFullKeys is the token bucket of a store of full keys.
type tbFullKeys[S any] struct{ *fullKeys[S] }

// tbHashedKeys is the token bucket of a store of hashed keys.
type tbHashedKeys[S any] struct{ *hashedKeys[S] }

var (
	_ admit.KeyedReserver = tbFullKeys[uint64]{}
	_ admit.KeyedReserver = tbFullKeys[kernel.TokenBucketState]{}
	_ admit.KeyedReserver = tbHashedKeys[uint64]{}
	_ admit.KeyedReserver = tbHashedKeys[kernel.TokenBucketState]{}
	_ Store               = tbFullKeys[uint64]{}
	_ Store               = tbHashedKeys[uint64]{}
)

// buildTB is build for a token bucket: S is uint64 (kern a *packedTB) or
// kernel.TokenBucketState (kern a *kernel.TokenBucket).
func buildTB[S any](kern any, rule admit.Rule, set admit.Settings) Store {
	switch l := build[S](kern, rule, set).(type) {
	case *fullKeys[S]:
		return tbFullKeys[S]{l}
	default:
		return tbHashedKeys[S]{l.(*hashedKeys[S])}
	}
}

// ReserveN implements [admit.KeyedReserver].
func (l tbFullKeys[S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	return l.reserveN(key, maphash.String(l.seed, key), n, maxWait)
}

// CancelReservation implements [admit.KeyedReserver].
func (l tbFullKeys[S]) CancelReservation(key string, r admit.Reservation) bool {
	return l.cancelReservation(key, maphash.String(l.seed, key), r)
}

// ReserveN implements [admit.KeyedReserver].
func (l tbHashedKeys[S]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	h := maphash.String(l.seed, key)
	return l.reserveN(h, h, n, maxWait)
}

// CancelReservation implements [admit.KeyedReserver].
func (l tbHashedKeys[S]) CancelReservation(key string, r admit.Reservation) bool {
	h := maphash.String(l.seed, key)
	return l.cancelReservation(h, h, r)
}

// reserveN is allow for a reservation; see the top of this file.
func (l *store[KT, S]) reserveN(mk KT, h uint64, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.paused()
	sh := &l.shards[h>>l.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, stored := sh.m[mk]
	if stored {
		d, ok := l.reserveTB(&s, now, n, maxWait)
		if ok && n > 0 { // a map holds values: write s back
			sh.m[mk] = s
		}
		return l.reservation(d, n, &s), ok
	}
	now = max(now, sh.floor) // the key may have been evicted as fresh at floor
	d, ok := l.reserveTB(&s, now, n, maxWait)
	if !ok || n == 0 { // took nothing: nothing to store
		return l.reservation(d, n, &s), ok
	}
	if wait, ok := l.add(sh, mk, s, now); !ok {
		return admit.NewReservation(wait, n, [2]uint64{}), false // a full store
	}
	return l.reservation(d, n, &s), true
}

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
	s, stored := sh.m[mk]
	if !stored {
		return false
	}
	if !l.cancelTB(&s, max(now, sh.floor), r) {
		return false
	}
	sh.m[mk] = s
	return true
}
