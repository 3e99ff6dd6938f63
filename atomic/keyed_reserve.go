package atomic

import (
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
)

// The keyed token buckets also hand out reservations (admit.KeyedReserver),
// so that admit.WaitKeyN can pace the waiters of each key. They are the
// keyed store itself, wrapped in a type of their own so that only the token
// bucket offers the methods.
//
// A reservation follows the eviction protocol of keyed.go exactly as an
// admission does. It publishes by CAS from the value it was computed from
// (reserveHeld, hold.go), so an eviction's CAS from a fresh value and a
// reservation's CAS cannot both succeed; a reservation that loads a
// tombstone has published nothing, helps unlink the cell and starts over
// from the map; and one that finds its key missing decides at max(reading,
// floor) and creates the cell (through the WithMaxKeys path) only if it will
// take tokens. A reserved bucket is in debt until its tokens are due, so it
// is not fresh and no sweep evicts it meanwhile; a reservation that must
// wait holds its cell, and a held cell is never fresh.
//
// A cancellation succeeds only on the held cell whose hold has the
// reservation's ticket (cancelHeld). A cell evicted and created again is a
// new cell, never held by a reservation of its former life, and a cell of
// another key holds another ticket, so a reservation can only be cancelled
// on the key and the cell it was made on. It releases the cell with the
// state before the reservation, which the eviction protocol tolerates:
// eviction's check is on the value it swaps out, whatever the value's
// history.

// keyedTokenBucket is the keyed token bucket, its cells tbCell (every
// token-bucket rule packs; the snapshot cell serves only the single-key
// TokenBucketSnapshot). It is not generic, so that its Allow is not either
// (see keyedFixedWindow).
type keyedTokenBucket struct {
	*keyed[tbCell, *tbCell, *tbKernel]
}

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1).
func (l keyedTokenBucket) Allow(key string) (d admit.Decision) {
	v := l.decide(key, 1)
	if v.Remaining < 0 {
		return l.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// ReserveN implements [admit.KeyedReserver]. Its loop is AllowN's (decide),
// and a missing key takes its path (keyed.missing): the hooks have their
// say there, and a reservation their Keep refuses is Redirect's decision
// (reserveElsewhere).
func (l keyedTokenBucket) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	pause := l.takePause()
	for {
		c, ok := l.m.Load(key)
		hook.Between(hook.AfterLookup)
		if !ok {
			now = max(now, time.Duration(l.floor.n.Load())) // the key may have been evicted as fresh at floor
			// Decide on a fresh state first: a reservation that would take
			// nothing (n == 0, n out of range, or too long a wait) needs no
			// cell and leaves nothing behind.
			var s kernel.TokenBucketState
			d, ok := l.k.Reserve(&s, now, n, maxWait)
			var wait time.Duration
			var m missed
			switch c, wait, m = l.missing(key, now, ok && n != 0); m {
			case missFresh:
				return reservation.New(d, n, 0), ok
			case missFull:
				return reservation.New(wait, n, 0), false
			case missMoved:
				if r, ok, moved := l.reserveElsewhere(key, n); moved {
					return r, ok
				}
				continue // the hooks went meanwhile: a key like any other
			}
		}
		if d, ok, t, live := reserveHeld(l.k, c, unsafe.Pointer(c), now, n, maxWait, pause); live {
			return reservation.New(d, n, t), ok
		}
		// A tombstone: help unlink it, then look the key up again.
		pause = nil
		l.unlink(c)
	}
}

// CancelReservation implements [admit.KeyedReserver].
func (l keyedTokenBucket) CancelReservation(key string, r admit.Reservation) bool {
	now := l.clock.Now()
	c, ok := l.m.Load(key)
	if !ok {
		return false // evicted as fresh: the reservation was due
	}
	now = max(now, time.Duration(l.floor.n.Load()))
	return cancelHeld(l.k, c, unsafe.Pointer(c), reservation.Ticket(r), now)
}
