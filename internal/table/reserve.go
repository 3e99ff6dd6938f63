package table

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/held"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
)

// A token bucket's table also hands out reservations (admit.KeyedReserver),
// so that admit.WaitKeyN can pace the waiters of each key. Reservations and
// cancellations run under the key's shard's mutex, with the held protocol
// of package held: a reservation that must wait holds its slot (the word
// becomes tbHeld, the state and the kernel.Hold a record in the shard's
// holds, by key), and every call that meets a held word decides under the
// mutex. A reservation on a missing key decides at max(reading, floor), and
// stores the key (with the state it decided, never a full bucket that a
// stale lock-free call could find first) only if it took tokens.

// reserver is the table of a token bucket.
type reserver struct{ *Store }

var (
	_ admit.KeyedReserver = reserver{}
	_ admit.Store         = reserver{}
)

// Allow is Store.Allow, written out so that no wrapper copies the Decision
// once more.
func (r reserver) Allow(key string) (d admit.Decision) {
	v := r.decideKey(key, 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, r.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// ReserveN implements [admit.KeyedReserver].
func (r reserver) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	t := r.Store
	now := t.clock.Now()
	h := maphash.String(t.seed, key)
	sh := &t.shards[h>>t.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rk := t.recKey(h, key)
	tb, i, found := t.lookup(sh, rk, key)
	if found {
		if p := &tb.slot(i)[1]; p.Load() != t.tomb {
			d, ok, ticket, _ := held.Reserve(t.tb, t.tb, cell{p}, &sh.holds, rk, now, n, maxWait)
			return reservation.New(d, n, ticket), ok
		}
	}
	at := spot{tb, i, found}
	now = max(now, sh.floor) // the key may have been evicted as fresh at floor
	var s kernel.TokenBucketState
	var hold kernel.Hold
	d, ok, ticket := t.tb.ReserveHold(&s, &hold, now, n, maxWait)
	if !ok || n == 0 {
		return reservation.New(d, n, 0), ok // takes nothing: nothing to store
	}
	if wait, ok := t.add(sh, now); !ok {
		return reservation.New(wait, n, 0), false // a full store
	}
	if w, fits := t.tb.Pack(s); fits && hold.Ticket == 0 {
		t.put(sh, at, rk, key, w)
	} else {
		t.putHeld(sh, at, rk, key, held.Rec{State: s, Hold: hold})
	}
	return reservation.New(d, n, ticket), ok
}

// CancelReservation implements [admit.KeyedReserver]. A key that is missing
// (or a tombstone) was evicted as fresh, so its reservation was due: nothing
// is given back. The reading is clamped to the floor, which can only make
// the kernel refuse.
func (r reserver) CancelReservation(key string, res admit.Reservation) bool {
	t := r.Store
	now := t.clock.Now()
	h := maphash.String(t.seed, key)
	sh := &t.shards[h>>t.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rk := t.recKey(h, key)
	tb, i, ok := t.lookup(sh, rk, key)
	if !ok {
		return false
	}
	return held.Cancel(t.tb, t.tb, cell{&tb.slot(i)[1]}, &sh.holds, rk, reservation.Ticket(res), max(now, sh.floor))
}

// cell is a slot's state word as package held sees a token-bucket cell.
type cell struct{ p *atomic.Uint64 }

func (c cell) Load() uint64 { return c.p.Load() }

func (c cell) State(k *kernel.TokenBucket, w uint64) (s kernel.TokenBucketState, held, tomb bool) {
	return k.Unpack(w), w == tbHeld, w == tbTomb
}

func (c cell) Fits(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	_, ok := k.Pack(s)
	return ok
}

func (c cell) CAS(k *kernel.TokenBucket, old uint64, s kernel.TokenBucketState) bool {
	w, _ := k.Pack(s) // the caller checked that s fits
	return c.p.CompareAndSwap(old, w)
}

func (c cell) CASHeld(old uint64) bool { return c.p.CompareAndSwap(old, tbHeld) }

func (c cell) Release(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	w, ok := k.Pack(s)
	if ok {
		c.p.Store(w)
	}
	return ok
}

func (c cell) Bury() { c.p.Store(tbTomb) }
