package atomic

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/reservation"
)

// The token buckets implement admit.Reserver, which admit.WaitN uses to pace
// waiters by reservation. A reservation and a cancellation run under the
// mutex of the cell's holds, and a reservation that must wait holds
// its cell (hold.go): that is what lets a reservation be cancelled at most
// once, and never at a stale reading.

var (
	_ admit.Reserver = (*TokenBucket)(nil)
	_ admit.Reserver = (*TokenBucketSnapshot)(nil)
)

// ReserveN implements [admit.Reserver].
func (l *TokenBucket) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, t := l.k.reserve(&l.c, l.clock.Now(), n, maxWait)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver].
func (l *TokenBucket) CancelReservation(r admit.Reservation) bool {
	return l.k.cancel(&l.c, reservation.Ticket(r), l.clock.Now())
}

// ReserveN implements [admit.Reserver].
func (l *TokenBucketSnapshot) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, t := l.k.reserve(&l.c, l.clock.Now(), n, maxWait)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver].
func (l *TokenBucketSnapshot) CancelReservation(r admit.Reservation) bool {
	return l.k.cancel(&l.c, reservation.Ticket(r), l.clock.Now())
}
