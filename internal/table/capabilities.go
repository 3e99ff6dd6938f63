package table

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/reservation"
)

// The rest of admit.Store for every table: what a caller reaches without
// asserting a capability.

var (
	_ admit.Store = reserver{}
	_ admit.Store = (*Table)(nil)
)

// AllowNWhich implements [admit.Store]: the table's one rule, index 0,
// binds every decision, a full store's denial of a new key included.
func (t *Table) AllowNWhich(key string, n int) (admit.Decision, int) {
	return t.AllowN(key, n), 0
}

// ReserveN implements [admit.Store] for the windows, which reserve nothing
// ahead (reservation.Now). A token bucket's table is a reserver, whose
// ReserveN takes the tokens ahead.
func (t *Table) ReserveN(key string, n int, _ time.Duration) (admit.Reservation, bool) {
	d := t.AllowN(key, n)
	return reservation.Now(d.Allowed, d.RetryAfter, n)
}

// CancelReservation implements [admit.Store] for the windows: a
// reservation of ReserveN took nothing ahead, so nothing goes back.
func (t *Table) CancelReservation(_ string, r admit.Reservation) bool {
	return reservation.NowCancelled(r)
}
