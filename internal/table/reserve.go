package table

import (
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/reservation"
)

// A token bucket's table hands out reservations ahead (admit.Store's ReserveN),
// so that admit.WaitKeyN can pace the waiters of each key. Reservations and
// cancellations run under the key's shard's mutex, with the held protocol
// of package keyed: a reservation that must wait holds its slot (the word
// becomes kernel.TokenBucketHeld, the state and the kernel.Hold a record in
// the shard's holds, by key), and every call that meets a held word decides
// under the mutex. A reservation on a missing key decides at max(reading, floor), and
// stores the key (with the state it decided, never a full bucket that a
// stale lock-free call could find first) only if it took tokens.

// reserver is the table of a token bucket.
type reserver struct{ *Table }

// ReserveN implements [admit.Store]. On a key the table does not
// hold it honours the hooks as a call does (Adopt before the shard's mutex,
// Keep under it); a key Keep refuses is decided by Redirect, the mutex
// released (reserveElsewhere).
func (r reserver) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	t := r.Table
	sh, rk := t.locate(key)
	h := t.hooks.Load() // one Hooks for Adopt and Keep, as in slow
	adopted := t.adopt(h, sh, rk, key)
	res, ok, kept := r.reserve(sh, rk, key, h, adopted, n, maxWait)
	if !kept {
		return t.reserveElsewhere(key, n)
	}
	return res, ok
}

// reserve is ReserveN under the shard's mutex; adopted is what its adopt
// returned. kept is false, with nothing reserved, when the key is missing
// and the hooks' Keep refuses it.
func (r reserver) reserve(sh *shard, rk recKey, key string, h *keyed.Hooks, adopted keyed.Epoch, n int, maxWait time.Duration) (res admit.Reservation, ok, kept bool) {
	t := r.Table
	now := t.clock.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tb, i, found := t.lookup(sh, rk, key)
	if found {
		if p := &tb.slot(i)[1]; p.Load() != t.tomb {
			d, ok, ticket, _ := sh.holds.Reserve(cell{p}, rk, now, n, maxWait)
			return reservation.New(d, n, ticket), ok, true
		}
	}
	if !h.Keeps(key, adopted) {
		return res, false, false
	}
	at := spot{tb, i, found}
	now = max(now, sh.floor) // the key may have been evicted as fresh at floor
	var s kernel.TokenBucketState
	var hold kernel.Hold
	d, ok, ticket := t.tb.ReserveHold(&s, &hold, now, n, maxWait)
	if !ok || n == 0 {
		return reservation.New(d, n, 0), ok, true // takes nothing: nothing to store
	}
	if wait, ok := t.add(sh, now); !ok {
		t.keys.Denied()
		return reservation.New(wait, n, 0), false, true // a full store
	}
	if w, fits := t.tb.Pack(s); fits && hold.Ticket == 0 {
		t.put(sh, at, rk, key, w)
	} else {
		t.putHeld(sh, at, rk, key, keyed.Rec{State: s, Hold: hold})
	}
	return reservation.New(d, n, ticket), ok, true
}

// CancelReservation implements [admit.Store]. A key that is missing
// (or a tombstone) was evicted as fresh, so its reservation was due: nothing
// is given back. The reading is clamped to the floor, which can only make
// the kernel refuse.
func (r reserver) CancelReservation(key string, res admit.Reservation) bool {
	t := r.Table
	now := t.clock.Now()
	sh, rk := t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tb, i, ok := t.lookup(sh, rk, key)
	if !ok {
		return false
	}
	return sh.holds.Cancel(cell{&tb.slot(i)[1]}, rk, reservation.Ticket(res), max(now, sh.floor))
}

// cell is a slot's state word as package keyed's held protocol sees a token-bucket cell.
type cell struct{ p *atomic.Uint64 }

func (c cell) Load() uint64 { return c.p.Load() }

func (c cell) State(k *kernel.TokenBucket, w uint64) (s kernel.TokenBucketState, held, tomb bool) {
	return k.Unpack(w), w == kernel.TokenBucketHeld, w == kernel.TokenBucketTomb
}

func (c cell) Fits(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	_, ok := k.Pack(s)
	return ok
}

func (c cell) CAS(k *kernel.TokenBucket, old uint64, s kernel.TokenBucketState) bool {
	w, _ := k.Pack(s) // the caller checked that s fits
	return c.p.CompareAndSwap(old, w)
}

func (c cell) CASHeld(old uint64) bool { return c.p.CompareAndSwap(old, kernel.TokenBucketHeld) }

func (c cell) Release(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	w, ok := k.Pack(s)
	if ok {
		c.p.Store(w)
	}
	return ok
}

func (c cell) Bury() { c.p.Store(kernel.TokenBucketTomb) }
