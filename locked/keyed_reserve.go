package locked

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// keyedTokenBucket is the keyed token bucket, which also hands out
// reservations (admit.KeyedReserver) so that admit.WaitKeyN can pace the
// waiters of each key. It is the striped store itself; only the methods
// below are its own.
//
// A reservation is an admission like any other as far as eviction is
// concerned: it runs under its stripe's lock, on the stored state if there is
// one, and a reservation on a missing key decides at max(reading, floor) and
// stores the key through the insert path (sweep, WithMaxKeys) only if it took
// tokens. A reserved key's bucket is in debt until its tokens are due, so it
// is not fresh and no sweep evicts it meanwhile.
type keyedTokenBucket struct {
	*keyed[kernel.TokenBucketState, *kernel.TokenBucket]
}

var _ admit.KeyedReserver = keyedTokenBucket{}

func tbReservation(d time.Duration, n int, s kernel.TokenBucketState) admit.Reservation {
	return admit.NewReservation(d, n, [2]uint64{s.TAT, uint64(s.Frac)})
}

// ReserveN implements [admit.KeyedReserver].
func (l keyedTokenBucket) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.paused()
	st := l.stripeOf(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if s := st.m[key]; s != nil {
		d, ok := l.k.Reserve(s, now, n, maxWait)
		return tbReservation(d, n, *s), ok
	}
	now = max(now, st.floor) // the key may have been evicted as fresh at floor
	s := new(kernel.TokenBucketState)
	d, ok := l.k.Reserve(s, now, n, maxWait)
	if !ok || n == 0 { // took nothing: nothing to store
		return tbReservation(d, n, *s), ok
	}
	if wait, ok := l.add(st, key, s, now); !ok {
		return admit.NewReservation(wait, n, [2]uint64{}), false // a full store
	}
	return tbReservation(d, n, *s), true
}

// CancelReservation implements [admit.KeyedReserver]. A key that is missing
// was evicted as fresh, so its reservation was due: nothing is given back.
// The reading is clamped to the stripe's floor, which can only make the
// kernel refuse (a cancellation is refused once the tokens are due), so a key
// evicted and stored again can never have a reservation of its former life
// cancelled.
func (l keyedTokenBucket) CancelReservation(key string, r admit.Reservation) bool {
	now := l.clock.Now()
	st := l.stripeOf(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[key]
	if s == nil {
		return false
	}
	after := r.State()
	return l.k.Cancel(s, max(now, st.floor), kernel.TokenBucketState{TAT: after[0], Frac: int64(after[1])}, r.N())
}
