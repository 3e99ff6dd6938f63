package mapstore

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
)

// The rest of admit.Store and admit.CompositeStore for every store New and
// NewLimits return: what a caller reaches without asserting a capability.

var (
	_ admit.Store          = (*fullKeys[kernel.FixedWindowState])(nil)
	_ admit.Store          = (*hashedKeys[kernel.Log])(nil)
	_ admit.Store          = tbFullKeys[uint64]{}
	_ admit.Store          = tbFullKeys[kernel.TokenBucketState]{}
	_ admit.Store          = tbHashedKeys[uint64]{}
	_ admit.Store          = tbHashedKeys[kernel.TokenBucketState]{}
	_ admit.CompositeStore = (*compFullKeys[[2]kernel.PartState])(nil)
	_ admit.CompositeStore = (*compHashedKeys[[8]kernel.PartState])(nil)
	_ admit.CompositeStore = tbCompFullKeys[[3]kernel.PartState]{}
	_ admit.CompositeStore = tbCompHashedKeys[[2]kernel.PartState]{}
)

// AllowNWhich implements [admit.Store]: the store's one rule, index 0,
// binds every decision, a full store's denial of a new key included (the
// composites' convention: the first rule of the smallest Limit).
func (l *fullKeys[S]) AllowNWhich(key string, n int) (admit.Decision, int) {
	return l.AllowN(key, n), 0
}

// AllowNWhich implements [admit.Store], as fullKeys's does.
func (l *hashedKeys[S]) AllowNWhich(key string, n int) (admit.Decision, int) {
	return l.AllowN(key, n), 0
}

// ReserveN implements [admit.Store] and [admit.CompositeStore] for a store
// whose rules are not all token buckets, which reserves nothing ahead
// (reservation.Now). It is store's, two embeddings below the wrappers of
// the stores that do reserve ahead (tbFullKeys, tbCompFullKeys, …), so
// their reserving's ReserveN, one embedding below, is the one they have.
func (l *store[KT, S]) ReserveN(key string, n int, _ time.Duration) (admit.Reservation, bool) {
	mk, h := l.mapKey(key)
	d, _ := l.allow(key, mk, h, n, nil)
	return reservation.Now(d.Allowed, d.RetryAfter, n)
}

// CancelReservation implements [admit.Store] and [admit.CompositeStore]
// for a store whose ReserveN is store's: it took nothing ahead, so nothing
// goes back. The reserving wrappers have their own, as for ReserveN.
func (l *store[KT, S]) CancelReservation(_ string, r admit.Reservation) bool {
	return reservation.NowCancelled(r)
}
