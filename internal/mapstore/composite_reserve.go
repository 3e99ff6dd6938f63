package mapstore

import (
	"time"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// A composite of token buckets (kernel.Composite.Reservable) hands out
// reservations as a single token bucket's store does (reserve.go), in every
// rule at once: a reservation takes its tokens from every part of its key,
// under its shard's lock, and is due when the last part's tokens are
// (kernel.Composite.Reserve). Everything reserve.go says of eviction holds
// for it: a reservation on a missing key decides at max(reading, floor) and
// stores the key through the insert path only if it took tokens, and a
// reserved key is in debt, so not fresh, until its tokens are due.
//
// A reservation that must wait leaves a kernel.CompositeHold in its shard's
// cheld, under the address of the key's state, with the same protocol as a
// kernel.Hold, written once in reserve.go over compHolder: it can be
// cancelled at most once, only on its key, and never once it was due at a
// reading the key has seen; every call on a key of a shard with holds shows
// its reading to the key's hold (showCompositeHold), each new entry prunes a
// few dead ones (compHolder.prune), and the eviction or reset of a key
// deletes its entry (shard.drop).

// compHolder is the holder of a composite of token buckets, whose stored
// state S is an array of kernel.PartState (parts) and whose holds are
// shard.cheld. Its kernel works on the state in place.
type compHolder[KT comparable, S any] struct{ k *kernel.Composite }

func (compHolder[KT, S]) held(sh *shard[KT, S]) *keyed.Map[*S, kernel.CompositeHold] {
	return &sh.cheld
}

func (compHolder[KT, S]) ticket(h kernel.CompositeHold) uint64 { return h.Ticket }

func (c compHolder[KT, S]) probe(now time.Duration, n int, maxWait time.Duration) (time.Duration, bool) {
	var probe S
	return c.k.Reserve(parts(&probe), now, n, maxWait)
}

func (c compHolder[KT, S]) reserveHold(s *S, h kernel.CompositeHold, now time.Duration, n int, maxWait time.Duration) (kernel.CompositeHold, time.Duration, bool, uint64) {
	d, ok, t := c.k.ReserveHold(parts(s), &h, now, n, maxWait)
	return h, d, ok, t
}

func (c compHolder[KT, S]) observe(h kernel.CompositeHold, s *S, now time.Duration) (kernel.CompositeHold, bool) {
	live := c.k.Observe(&h, parts(s), now)
	return h, live
}

func (c compHolder[KT, S]) cancelHold(s *S, h kernel.CompositeHold, ticket uint64, now time.Duration) (kernel.CompositeHold, bool, bool) {
	ok, drop := c.k.CancelHold(parts(s), &h, ticket, now)
	return h, ok, drop
}

// prune is kernel.PruneHolds for a composite's holds: it deletes up to
// pruneHolds entries of sh.cheld other than skip's whose hold is no longer
// live, showing them the reading now, so that the entries of keys never
// touched again cannot pile up. Every entry is a stored key's (an eviction
// deletes the entry of the state it deletes), so its state is the one its
// map key points to. It requires that sh.mu is held.
func (c compHolder[KT, S]) prune(sh *shard[KT, S], now time.Duration, skip *S) {
	limit := pruneHolds
	for s, h := range sh.cheld.M {
		if limit == 0 {
			return
		}
		if s == skip {
			continue
		}
		limit--
		if c.k.Observe(&h, parts(s), now) {
			sh.cheld.Put(s, h)
		} else {
			delete(sh.cheld.M, s)
		}
	}
}

// showCompositeHold is showHold for a composite of token buckets (the only
// composites with holds).
func (l *store[KT, S]) showCompositeHold(sh *shard[KT, S], s *S, now time.Duration) {
	showHeld(sh, compHolder[KT, S]{l.composite()}, s, now)
}
