package atomic_test

import (
	"time"

	"github.com/admit-go/admit"
)

// keyedReserver and resetter are the capabilities the tests of the keyed
// stores of this package assert: the methods of admit.Store's, which their
// limiters have in part.
type (
	keyedReserver interface {
		admit.KeyedLimiter
		ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool)
		CancelReservation(key string, r admit.Reservation) bool
	}
	resetter interface{ Reset(key string) }
)
