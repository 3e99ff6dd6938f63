package kernel

import "time"

// Hold is a limiter's record of the latest reservation on a key that can
// still be cancelled: one that is not yet due. It is what makes a
// cancellation safe when a reservation is a value that callers may copy,
// keep and present anywhere:
//
//   - At most once, and only where it was made. A reservation carries the
//     ticket of its hold, a number drawn from [nextTicket] that no other
//     reservation of any limiter ever carries. Comparing the state alone
//     would not do: after a cancellation, a new reservation can leave
//     exactly the state a cancelled one left, and a reservation of another
//     key can leave the same state as this key's.
//   - Never at a stale reading. A reservation's tokens are spent once they
//     are due at any reading the key has seen, even by a denial or a probe
//     that wrote nothing: the waiter may have gone ahead then. Seen keeps
//     the newest such reading since the reservation, and a cancellation is
//     judged at the newer of its own reading and Seen.
//
// A limiter keeps at most one Hold per key, replaces it with each new
// reservation that must wait (so only the latest reservation can be
// cancelled: the tokens of an earlier one are promised to the later one's
// slot), shows it every reading on the key ([TokenBucket.Observe]), and
// drops it when it is no longer live. The zero Hold holds nothing.
type Hold struct {
	Ticket uint64           // the reservation's identity; 0 for no hold
	Before TokenBucketState // the state the reservation found
	After  TokenBucketState // the state the reservation left
	Seen   time.Duration    // the newest reading of the key since it was made
}

// Observe shows h a reading now of a key whose state is s, after whatever
// the reading decided, and reports whether h is still live: s is the state
// its reservation left (nothing was admitted or reserved since) and its
// tokens are not due at the newest reading seen. A limiter drops a hold that
// is not live; it can never become live again.
func (k *TokenBucket) Observe(h *Hold, s TokenBucketState, now time.Duration) bool {
	h.Seen = max(h.Seen, clampTime(now))
	return h.Ticket != 0 && s == h.After && k.Due(h.After) > h.Seen
}

// CancelHold gives back the tokens of the reservation whose ticket is
// ticket, on a key whose state is *s and whose hold is *h, if h is that
// reservation's and still live at reading now; it reports whether it did.
// The cancellation is judged at the newer of now and h.Seen, and the state
// after it is Cancel's. drop reports whether the caller must drop h: after a
// cancellation (a reservation is cancelled at most once) and when h is no
// longer live; not when the ticket is another reservation's, whose holder
// may still cancel its own.
func (k *TokenBucket) CancelHold(s *TokenBucketState, h *Hold, ticket uint64, now time.Duration) (ok, drop bool) {
	if ticket == 0 || h.Ticket != ticket {
		return false, false
	}
	if !k.Observe(h, *s, now) {
		return false, true
	}
	return k.Cancel(s, h.Seen, h.Before, h.After), true
}

// ReserveHold is Reserve for a key whose state is *s and whose hold is *h:
// it shows h the reading, reserves, and then replaces *h with the new
// reservation's hold if the reservation must wait, or drops *h if it is no
// longer live. It returns Reserve's wait and verdict and the ticket a
// [admit.Reservation] must carry to be cancelled (0 when it cannot be: it
// was refused, took nothing, or is due at once).
func (k *TokenBucket) ReserveHold(s *TokenBucketState, h *Hold, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool, uint64) {
	seen := clampTime(now)
	if h.Ticket != 0 {
		k.Observe(h, *s, now)
		seen = h.Seen
	}
	before := *s
	d, ok := k.Reserve(s, now, n, maxWait)
	if ok && n > 0 && d > 0 && k.Due(*s) > seen {
		t := nextTicket()
		*h = Hold{Ticket: t, Before: before, After: *s, Seen: seen}
		return d, ok, t
	}
	if h.Ticket != 0 && !k.Observe(h, *s, now) {
		*h = Hold{}
	}
	return d, ok, 0
}

// Show is Observe for a limiter that drops a hold that is no longer live:
// it shows *h the reading now of a key whose state is s, and clears *h if
// it is not live.
func (k *TokenBucket) Show(h *Hold, s TokenBucketState, now time.Duration) {
	if h.Ticket != 0 && !k.Observe(h, s, now) {
		*h = Hold{}
	}
}

// PruneHolds drops up to limit entries of a keyed store's map hs, other
// than skip's, whose hold is no longer live, showing them the reading now;
// state returns a key's state, with ok false if the store no longer holds
// the key (it was evicted, so its reservation was due). A store calls it each
// time it adds an entry, so that entries of keys never touched again cannot
// pile up: hs never holds many more entries than live holds.
func PruneHolds[K comparable](k *TokenBucket, hs map[K]Hold, now time.Duration, limit int, skip K, state func(K) (TokenBucketState, bool)) {
	for key, h := range hs {
		if limit == 0 {
			return
		}
		if key == skip {
			continue
		}
		limit--
		if s, ok := state(key); !ok || !k.Observe(&h, s, now) {
			delete(hs, key)
		} else {
			hs[key] = h
		}
	}
}
