package atomic

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// The token buckets implement admit.Reserver, which admit.WaitN uses to pace
// waiters by reservation; their cells' reserveN and cancel below serve the
// keyed token buckets too (keyed_reserve.go). The CAS loops are those of
// Allow (see tbCell.decide): a reservation takes effect at its successful
// CAS, and a cancellation only at a CAS from the exact state the reservation
// left.

var (
	_ admit.Reserver = (*TokenBucket)(nil)
	_ admit.Reserver = (*TokenBucketSnapshot)(nil)
)

func reservation(d time.Duration, n int, s kernel.TokenBucketState) admit.Reservation {
	return admit.NewReservation(d, n, [2]uint64{s.TAT, uint64(s.Frac)})
}

func reserved(r admit.Reservation) kernel.TokenBucketState {
	st := r.State()
	return kernel.TokenBucketState{TAT: st[0], Frac: int64(st[1])}
}

// ReserveN implements [admit.Reserver].
func (l *TokenBucket) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, s, _ := l.c.reserveN(&l.k, l.clock.Now(), n, maxWait, nil)
	return reservation(d, n, s), ok
}

// CancelReservation implements [admit.Reserver].
func (l *TokenBucket) CancelReservation(r admit.Reservation) bool {
	return l.c.cancel(&l.k, l.clock.Now(), reserved(r), r.N())
}

// ReserveN implements [admit.Reserver].
func (l *TokenBucketSnapshot) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, s, _ := l.c.reserveN(&l.k, l.clock.Now(), n, maxWait, nil)
	return reservation(d, n, s), ok
}

// CancelReservation implements [admit.Reserver].
func (l *TokenBucketSnapshot) CancelReservation(r admit.Reservation) bool {
	return l.c.cancel(&l.k, l.clock.Now(), reserved(r), r.N())
}

// reserveN is kernel.TokenBucket.Reserve on the cell, published by CAS from
// the word it was computed from, as tbCell.decide publishes an admission.
// live is false if the cell is a tombstone (keyed stores only): nothing was
// reserved. pause is as for decide.
func (c *tbCell) reserveN(k *kernel.TokenBucket, now time.Duration, n int, maxWait time.Duration, pause func()) (time.Duration, bool, kernel.TokenBucketState, bool) {
	for {
		old := c.w.Load()
		if pause != nil {
			pause()
			pause = nil
		}
		if old == tbTombstone {
			return 0, false, kernel.TokenBucketState{}, false
		}
		s := kernel.TokenBucketState{TAT: old}
		d, ok := k.Reserve(&s, now, n, maxWait)
		if !ok || s.TAT == old {
			return d, ok, s, true
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, s.TAT) {
			return d, ok, s, true
		}
	}
}

// cancel is kernel.TokenBucket.Cancel on the cell, published by CAS from
// the word it was computed from; false for a tombstone.
func (c *tbCell) cancel(k *kernel.TokenBucket, now time.Duration, after kernel.TokenBucketState, n int) bool {
	for {
		old := c.w.Load()
		if old == tbTombstone {
			return false
		}
		s := kernel.TokenBucketState{TAT: old}
		if !k.Cancel(&s, now, after, n) {
			return false
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, s.TAT) {
			return true
		}
	}
}

// reserveN is tbCell.reserveN for a snapshot.
func (c *tbSnapCell) reserveN(k *kernel.TokenBucket, now time.Duration, n int, maxWait time.Duration, pause func()) (time.Duration, bool, kernel.TokenBucketState, bool) {
	var next *kernel.TokenBucketState
	for {
		cur := c.p.Load()
		if pause != nil {
			pause()
			pause = nil
		}
		if cur == tbSnapTombstone {
			return 0, false, kernel.TokenBucketState{}, false
		}
		var s kernel.TokenBucketState
		if cur != nil {
			s = *cur
		}
		d, ok := k.Reserve(&s, now, n, maxWait)
		if !ok || n == 0 || (cur != nil && s == *cur) {
			return d, ok, s, true
		}
		if next == nil {
			next = new(kernel.TokenBucketState)
		}
		*next = s
		hook.Between(hook.BeforeCAS)
		if c.p.CompareAndSwap(cur, next) {
			return d, ok, s, true
		}
	}
}

// cancel is tbCell.cancel for a snapshot.
func (c *tbSnapCell) cancel(k *kernel.TokenBucket, now time.Duration, after kernel.TokenBucketState, n int) bool {
	var next *kernel.TokenBucketState
	for {
		cur := c.p.Load()
		if cur == tbSnapTombstone {
			return false
		}
		var s kernel.TokenBucketState
		if cur != nil {
			s = *cur
		}
		if !k.Cancel(&s, now, after, n) {
			return false
		}
		if next == nil {
			next = new(kernel.TokenBucketState)
		}
		*next = s
		hook.Between(hook.BeforeCAS)
		if c.p.CompareAndSwap(cur, next) {
			return true
		}
	}
}
