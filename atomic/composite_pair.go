package atomic

import (
	satomic "sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/reservation"
)

// pairCell is a composite of two parts in the pair form, the single-key
// pairLimiter's state: each part's state packed in one word, the two words
// side by side and updated together by one 16-byte compare-and-swap
// (cas128), so that no call allocates.
//
//	pair[0]  part 0's state in its kernel's one-word packing
//	pair[1]  part 1's state, likewise (kernel.CompositePair)
//
// The pair is w[a:a+2], a = pairAt: CMPXCHG16B needs 16 bytes aligned to
// 16, Go aligns a [3]uint64 only to 8, and of two consecutive 8-byte words
// one starts on a 16-byte boundary (TestPairCellAligned). The zero pair is
// a fresh key.
//
// Horizon: each part's packing's. A fixed window's and a packing sliding
// counter's words have none; a token bucket's word holds a TAT within
// ±(MaxInt64/L' − 1) ns of the clock's origin (tbCell has the bounds). A
// state past it does not fit: it is spilled (compSpill), the cell held
// with the state in a record under its stripe's mutex, decided there by the
// same kernel with no allocation after the first, until a state fits
// again, exactly as tbCell spills.
//
// Sentinel: (k.held, 0), the held value: a kernel.CompositePair.Spare
// word, which part 0's word never takes, whatever part 1's.
type pairCell struct {
	w [3]satomic.Uint64
}

// pairAt returns the index in c.w of the pair's first word: the one of
// c.w[0] and c.w[1] that is 16-byte aligned.
func (c *pairCell) pairAt() uintptr { return uintptr(unsafe.Pointer(&c.w[0])) >> 3 & 1 }

// The methods of compCell (composite.go): the pair is the value's a and b.

func (c *pairCell) load() compVal {
	a, b := load128(&c.w[c.pairAt()])
	return compVal{a: a, b: b}
}

func (c *pairCell) cas(old, v compVal) bool {
	_, _, ok := cas128(&c.w[c.pairAt()], old.a, old.b, v.a, v.b)
	return ok
}

// pairLimiter is the single-key composite in the pair form, whose Allow
// is written out for the hottest path.
type pairLimiter struct {
	limitsLimiter[pairCell, *pairCell]
}

// pairReserver is pairLimiter for two token buckets, which also hand out
// reservations.
type pairReserver struct {
	pairLimiter
}

var (
	_ admit.CompositeLimiter = (*pairLimiter)(nil)
	_ admit.Reserver         = (*pairReserver)(nil)
)

// Allow is AllowN(1).
//
// It is kernel.CompositePair.AllowOne on the two words and one cas128,
// retried on a failed CAS with the words the CAS found, then compDecide for
// whatever AllowOne declines and the held value (checked before AllowOne: a
// window's spare word unpacks as a fresh window, which AllowOne would
// admit), in one frame with the clock's read, as TokenBucket.Allow is
// written.
//
// The words are loaded one at a time, by two 8-byte atomic loads, so the
// pair AllowOne sees may be torn: each word from a different instant, a
// pair the cell never held. That is harmless here, and cheaper than the
// 16-byte load: an admission is published only by a CAS that finds both
// words exactly as loaded, at one instant, so every admission is decided on
// a pair the cell held when it took effect; and a pair AllowOne declines
// decides nothing, compDecide deciding again on a pair read by load128.
// The tempting wrong version also denies on the torn pair: a denial must
// report a state that existed, and a torn pair gives a RetryAfter, a
// Remaining and a binding rule that no state of the key ever had.
//
// Linearization point: the successful cas128 (see compDecide for the
// tempting wrong version that updates each part on its own).
func (l *pairLimiter) Allow() (d admit.Decision) {
	var now time.Duration
	if l.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else if l.clock.Coarse == nil {
		now = l.clock.C.Now()
	} else {
		now = l.clock.CoarseNow()
	}
	k, c := l.k, &l.c
	i := c.pairAt()
	w0, w1 := c.w[i].Load(), c.w[i+1].Load()
	for w0 != k.held {
		n0, n1, v, which, ok := k.pair.AllowOne(w0, w1, now)
		if !ok {
			break
		}
		hook.Between(hook.BeforeCAS)
		var swapped bool
		if w0, w1, swapped = cas128(&c.w[i], w0, w1, n0, n1); swapped {
			d.Allowed, d.Limit, d.Remaining, d.ResetAfter = true, k.limit[which], v.Remaining, v.ResetAfter
			return d
		}
	}
	v, which := compDecide(k, c, unsafe.Pointer(c), now, 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, k.limit[which], v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// ReserveN implements [admit.Reserver]: it reserves n in both rules.
func (l *pairReserver) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, t := compReserve(l.k, &l.c, unsafe.Pointer(&l.c), l.clock.Now(), n, maxWait)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver]: it gives the reservation
// back in both rules.
func (l *pairReserver) CancelReservation(r admit.Reservation) bool {
	return compCancel(l.k, &l.c, unsafe.Pointer(&l.c), reservation.Ticket(r), l.clock.Now())
}
