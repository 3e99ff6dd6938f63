package locked

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// tokenBucket is the single-key token bucket, which also hands out
// reservations (admit.Reserver) so that admit.WaitN can pace its waiters.
type tokenBucket struct {
	single[kernel.TokenBucketState, *kernel.TokenBucket]
}

var _ admit.Reserver = (*tokenBucket)(nil)

// ReserveN implements [admit.Reserver].
func (l *tokenBucket) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.k.Reserve(&l.state, now, n, maxWait)
	return admit.NewReservation(d, n, [2]uint64{l.state.TAT, uint64(l.state.Frac)}), ok
}

// CancelReservation implements [admit.Reserver].
func (l *tokenBucket) CancelReservation(r admit.Reservation) bool {
	now := l.clock.Now()
	st := r.State()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.k.Cancel(&l.state, now, kernel.TokenBucketState{TAT: st[0], Frac: int64(st[1])}, r.N())
}
