package atomic

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// The token buckets implement admit.Reserver, which admit.WaitN uses to pace
// waiters by reservation. The CAS loops are those of Allow (see
// tbCell.decide): a reservation takes effect at its successful CAS, and a
// cancellation only at a CAS from the exact state the reservation left.

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
	now := l.clock.Now()
	for {
		old := l.c.w.Load()
		s := kernel.TokenBucketState{TAT: old}
		d, ok := l.k.Reserve(&s, now, n, maxWait)
		if !ok || s.TAT == old {
			return reservation(d, n, s), ok
		}
		hook.Between(hook.BeforeCAS)
		if l.c.w.CompareAndSwap(old, s.TAT) {
			return reservation(d, n, s), ok
		}
	}
}

// CancelReservation implements [admit.Reserver].
func (l *TokenBucket) CancelReservation(r admit.Reservation) bool {
	now := l.clock.Now()
	after := reserved(r)
	for {
		old := l.c.w.Load()
		s := kernel.TokenBucketState{TAT: old}
		if !l.k.Cancel(&s, now, after, r.N()) {
			return false
		}
		hook.Between(hook.BeforeCAS)
		if l.c.w.CompareAndSwap(old, s.TAT) {
			return true
		}
	}
}

// ReserveN implements [admit.Reserver].
func (l *TokenBucketSnapshot) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	for {
		cur := l.c.p.Load()
		var s kernel.TokenBucketState
		if cur != nil {
			s = *cur
		}
		d, ok := l.k.Reserve(&s, now, n, maxWait)
		if !ok || n == 0 {
			return reservation(d, n, s), ok
		}
		next := new(kernel.TokenBucketState)
		*next = s
		hook.Between(hook.BeforeCAS)
		if l.c.p.CompareAndSwap(cur, next) {
			return reservation(d, n, s), true
		}
	}
}

// CancelReservation implements [admit.Reserver].
func (l *TokenBucketSnapshot) CancelReservation(r admit.Reservation) bool {
	now := l.clock.Now()
	after := reserved(r)
	for {
		cur := l.c.p.Load()
		var s kernel.TokenBucketState
		if cur != nil {
			s = *cur
		}
		if !l.k.Cancel(&s, now, after, r.N()) {
			return false
		}
		next := new(kernel.TokenBucketState)
		*next = s
		hook.Between(hook.BeforeCAS)
		if l.c.p.CompareAndSwap(cur, next) {
			return true
		}
	}
}
