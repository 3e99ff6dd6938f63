// Package reservation defines admit.Reservation, which the root package
// names by an alias of [Reservation], so that the variant packages make and
// read reservations while a user sees only Delay and N.
package reservation

import "time"

// Reservation is admit.Reservation; its documentation is there.
type Reservation struct {
	// Delay is how long the waiter must wait before proceeding: 0 if the
	// tokens were there already. For a reservation that was refused, it is the
	// wait that would have been needed (admit.Never if n can never be
	// admitted).
	Delay time.Duration

	n      int
	ticket uint64
}

// N returns the number of tokens reserved.
func (r Reservation) N() int { return r.n }

// New returns a reservation of n tokens due after delay, cancellable with
// ticket (0 for one that cannot be cancelled).
func New(delay time.Duration, n int, ticket uint64) Reservation {
	return Reservation{Delay: delay, n: n, ticket: ticket}
}

// Ticket returns the ticket a reservation was made with.
func Ticket(r Reservation) uint64 { return r.ticket }

// Now is the ReserveN of a keyed store whose rules are not all token
// buckets, which reserves nothing ahead: allowed and retryAfter are the
// store's AllowN(key, n). An admission is a reservation due at once (Delay
// 0, true) that took its n then; a denial took nothing and reports its
// RetryAfter as the Delay, with false, so that admit.WaitKeyN sleeps that
// long and asks again, as it polls. The reservation carries no ticket: its
// cancellation (NowCancelled) gives nothing back.
func Now(allowed bool, retryAfter time.Duration, n int) (Reservation, bool) {
	if allowed {
		return New(0, n, 0), true
	}
	return New(retryAfter, n, 0), false
}

// NowCancelled is the CancelReservation of a store whose ReserveN is Now:
// the n of an admission were taken for good, there is nothing to give
// back, and it reports false.
func NowCancelled(Reservation) bool { return false }
