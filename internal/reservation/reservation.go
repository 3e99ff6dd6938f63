// Package reservation makes and reads admit.Reservation values for the
// variant packages, through the hooks package admit lends internal/plumb:
// a Reservation is opaque to everyone else.
package reservation

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/plumb"
)

var (
	// New returns a reservation of n tokens due after delay, cancellable
	// with ticket (0 for one that cannot be cancelled).
	New = plumb.NewReservation.(func(delay time.Duration, n int, ticket uint64) admit.Reservation)

	// Ticket returns the ticket a reservation was made with.
	Ticket = plumb.Ticket.(func(admit.Reservation) uint64)
)

// Now is the ReserveN of a keyed store whose rules are not all token
// buckets, which reserves nothing ahead: d is the store's AllowN(key, n).
// An admission is a reservation due at once (Delay 0, true) that took its
// n then; a denial took nothing and reports the wait of d, its RetryAfter,
// as the Delay, with false, so that admit.WaitKeyN sleeps that long and
// asks again, as it polls. The reservation carries no ticket: its
// cancellation (NowCancelled) gives nothing back.
func Now(d admit.Decision, n int) (admit.Reservation, bool) {
	if d.Allowed {
		return New(0, n, 0), true
	}
	return New(d.RetryAfter, n, 0), false
}

// NowCancelled is the CancelReservation of a store whose ReserveN is Now:
// the n of an admission were taken for good, there is nothing to give
// back, and it reports false.
func NowCancelled(admit.Reservation) bool { return false }
