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
