package locked

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
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
//
// A reservation that must wait leaves a hold (kernel.Hold) in its stripe's
// holds, keyed like the states: the record that lets it be cancelled at most
// once, only on its key, and never once it was due at a reading the key has
// seen; holds are keyed by the address of the key's state. Every call on a
// key of a stripe with holds shows its reading to the key's hold (showHold),
// and each new entry prunes a few dead ones.
type keyedTokenBucket struct {
	*keyed[kernel.TokenBucketState, *kernel.TokenBucket]
}

var _ admit.KeyedReserver = keyedTokenBucket{}

// pruneHolds is how many other holds a new hold examines for pruning.
const pruneHolds = 2

// showHold shows the hold of the key whose state is *s, if it has one, a
// reading now of that state, and drops it if it is no longer live. It
// requires that st.mu is held. It is generic only so that the generic AllowN
// can call it; it is reached only for token buckets, the only stores with
// holds.
func showHold[S any, K any](st *stripe[S], k K, s *S, now time.Duration) {
	h, ok := st.holds[s]
	if !ok {
		return
	}
	if any(k).(*kernel.TokenBucket).Observe(&h, *any(s).(*kernel.TokenBucketState), now) {
		st.holds[s] = h
		return
	}
	delete(st.holds, s)
}

// ReserveN implements [admit.KeyedReserver].
func (l keyedTokenBucket) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.paused()
	st := l.stripeOf(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if s := st.m[key]; s != nil {
		return l.reserve(st, s, now, n, maxWait)
	}
	now = max(now, st.floor) // the key may have been evicted as fresh at floor
	s := new(kernel.TokenBucketState)
	probe := *s
	if d, ok := l.k.Reserve(&probe, now, n, maxWait); !ok || n == 0 { // takes nothing: nothing to store
		return reservation.New(d, n, 0), ok
	}
	if wait, ok := l.add(st, key, s, now); !ok {
		return reservation.New(wait, n, 0), false // a full store
	}
	return l.reserve(st, s, now, n, maxWait)
}

// reserve reserves n on the stored state *s and records its hold. It
// requires that st.mu is held.
func (l keyedTokenBucket) reserve(st *stripe[kernel.TokenBucketState], s *kernel.TokenBucketState, now time.Duration, n int, maxWait time.Duration) (admit.Reservation, bool) {
	h := st.holds[s]
	d, ok, t := l.k.ReserveHold(s, &h, now, n, maxWait)
	switch _, had := st.holds[s]; {
	case h.Ticket != 0:
		if st.holds == nil {
			st.holds = make(map[*kernel.TokenBucketState]kernel.Hold)
		}
		if !had {
			kernel.PruneHolds(l.k, st.holds, now, pruneHolds, s, stateAt)
		}
		st.holds[s] = h
	case had:
		delete(st.holds, s)
	}
	return reservation.New(d, n, t), ok
}

// stateAt is PruneHolds's view of a hold's key: its state, which outlives
// the key's eviction (Observe then finds its hold dead).
func stateAt(s *kernel.TokenBucketState) (kernel.TokenBucketState, bool) { return *s, true }

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
	h, held := st.holds[s]
	if s == nil || !held {
		return false
	}
	ok, drop := l.k.CancelHold(s, &h, reservation.Ticket(r), max(now, st.floor))
	if drop {
		delete(st.holds, s)
	} else {
		st.holds[s] = h
	}
	return ok
}
