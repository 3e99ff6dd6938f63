package atomic

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// The keyed token buckets also hand out reservations (admit.KeyedReserver),
// so that admit.WaitKeyN can pace the waiters of each key. They are the
// keyed store itself, wrapped in a type of their own so that only the token
// bucket offers the methods.
//
// A reservation follows the eviction protocol of keyed.go exactly as an
// admission does. It publishes by CAS from the value it was computed from, so
// an eviction's CAS from a fresh value and a reservation's CAS cannot both
// succeed; a reservation that loads a tombstone has published nothing, helps
// unlink the cell and starts over from the map; and one that finds its key
// missing decides at max(reading, floor) and creates the cell (through the
// WithMaxKeys path) only if it will take tokens. A reserved bucket is in debt
// until its tokens are due, so it is not fresh and no sweep evicts it
// meanwhile.
//
// A cancellation also publishes by CAS, from the exact value the reservation
// left, and only if the kernel agrees (nothing admitted since, not yet due).
// It moves the word back, which the eviction protocol tolerates: eviction's
// check is on the value it swaps out, whatever the value's history. A
// cancellation that meets a tombstone or a missing key gives nothing back:
// the key was evicted as fresh, so the reservation was due. Its reading is
// clamped to the floor, which can only make the kernel refuse, so a key
// evicted and created again can never have a reservation of its former life
// cancelled.

// reserverCell is a token-bucket cell that also reserves (reserve.go).
type reserverCell[C any] interface {
	*C
	kcell[*kernel.TokenBucket]
	// reserveN is kernel.TokenBucket.Reserve on the cell, published by CAS.
	// live is false if the cell is a tombstone: nothing was reserved. pause
	// is as for decide.
	reserveN(k *kernel.TokenBucket, now time.Duration, n int, maxWait time.Duration, pause func()) (d time.Duration, ok bool, s kernel.TokenBucketState, live bool)
	// cancel is kernel.TokenBucket.Cancel on the cell, published by CAS;
	// false for a tombstone.
	cancel(k *kernel.TokenBucket, now time.Duration, after kernel.TokenBucketState, n int) bool
}

// keyedTokenBucket is the keyed token bucket; C is tbCell or tbSnapCell.
type keyedTokenBucket[C any, PC reserverCell[C]] struct {
	*keyed[C, PC, *kernel.TokenBucket]
}

var (
	_ admit.KeyedReserver = keyedTokenBucket[tbCell, *tbCell]{}
	_ admit.KeyedReserver = keyedTokenBucket[tbSnapCell, *tbSnapCell]{}
	_ Store               = keyedTokenBucket[tbCell, *tbCell]{}
)

// ReserveN implements [admit.KeyedReserver]. Its loop is AllowN's.
func (l keyedTokenBucket[C, PC]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
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
			if d, ok := l.k.Reserve(&s, now, n, maxWait); !ok || n == 0 {
				return reservation(d, n, s), ok
			}
			var wait time.Duration
			if c, wait, ok = l.obtain(key, now); !ok {
				return admit.NewReservation(wait, n, [2]uint64{}), false // a full store
			}
		}
		if d, ok, s, live := PC(c).reserveN(l.k, now, n, maxWait, pause); live {
			return reservation(d, n, s), ok
		}
		// A tombstone: help unlink it, then look the key up again.
		pause = nil
		l.unlink(c)
	}
}

// CancelReservation implements [admit.KeyedReserver].
func (l keyedTokenBucket[C, PC]) CancelReservation(key string, r admit.Reservation) bool {
	now := l.clock.Now()
	c, ok := l.m.Load(key)
	if !ok {
		return false // evicted as fresh: the reservation was due
	}
	now = max(now, time.Duration(l.floor.n.Load()))
	return PC(c).cancel(l.k, now, reserved(r), r.N())
}
