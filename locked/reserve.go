package locked

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
)

// tokenBucket is the single-key token bucket, which also hands out
// reservations (admit.Reserver) so that admit.WaitN can pace its waiters.
// Its hold (kernel.Hold) records the latest reservation that can still be
// cancelled; every call shows it its reading.
type tokenBucket struct {
	single[kernel.TokenBucketState, *kernel.TokenBucket]
	hold kernel.Hold // guarded by mu
}

var _ admit.Reserver = (*tokenBucket)(nil)

func (l *tokenBucket) Allow() admit.Decision { return l.AllowN(1) }

func (l *tokenBucket) AllowN(n int) admit.Decision {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.k.Allow(&l.state, now, n)
	l.k.Show(&l.hold, l.state, now)
	return d
}

// ReserveN implements [admit.Reserver].
func (l *tokenBucket) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok, t := l.k.ReserveHold(&l.state, &l.hold, now, n, maxWait)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver].
func (l *tokenBucket) CancelReservation(r admit.Reservation) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ok, drop := l.k.CancelHold(&l.state, &l.hold, reservation.Ticket(r), now)
	if drop {
		l.hold = kernel.Hold{}
	}
	return ok
}
