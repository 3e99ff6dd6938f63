package keyed

import (
	"time"

	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// This file is how a lock-free token bucket keeps the hold (kernel.Hold)
// of a reservation that may still be cancelled: the record that lets a
// cancellation happen at most once, only on the key it was made on, and
// never once the tokens were due at any reading the key has seen. Package
// atomic's cells use it, and so can any store whose cells are words (or
// pointers) swapped by CompareAndSwap.
//
// A hold needs more than a state word can carry (a ticket, the newest
// reading seen), and every call on the key, denials and probes included,
// must show it its reading, atomically with the decision. So while a cell
// has a hold, it is held: its word (or snapshot pointer) is a sentinel, the
// held value, which no state ever takes, and its state lives in a record
// (Rec) under a mutex, with the hold:
//
//   - A call that loads the held value decides under the record's mutex,
//     on the record's state, and shows the hold its reading ([Holds.Decide]).
//   - A reservation takes the mutex first, whatever the value ([Holds.Reserve]).
//     If it leaves a hold on a cell that was not held, it writes the record
//     and then swaps the value it decided on for the held value by
//     CompareAndSwap, still under the mutex: a lock-free admission published
//     meanwhile makes the CAS fail, and the reservation starts over.
//   - A cancellation takes the mutex and succeeds only on a held cell whose
//     record's ticket is the reservation's ([Holds.Cancel]).
//   - When the hold is no longer live (the tokens were due at a reading
//     shown to it, or a cancellation used it), whoever finds it so stores
//     the record's state back into the cell and deletes the record, under
//     the mutex. Only the mutex's holder ever writes a held cell.
//
// So a cell is held exactly while its record exists. The tempting wrong
// version keeps the word as it is and a hold beside it: a denial that loads
// the word and decides at a reading past the due time, then a cancellation
// at a stale reading that runs before the denial can record its reading,
// gives back tokens that a waiter may have used (the denial linearizes
// before the cancellation). Holding the cell puts every call on a held key
// under one mutex; there are few such calls, since a key is held only while
// a waiter sleeps on it and a bucket that owes a waiter denies everything
// else (or while its state is past the packed word's horizon, below).
// Calls on cells that are not held pay one comparison.
//
// A held cell is not fresh, so no sweep evicts it; a sweep that meets one
// shows its hold the sweep's reading first ([Holds.Settle]), so that a key held
// by a reservation nobody came back for is released and evicted in time.
//
// The same mechanism keeps a packed bucket's state that does not fit its
// word (a TAT past the horizon of the scaled units, kernel.TokenBucket.Pack):
// the admission that makes it spills it ([Holds.Spill]), holding the cell with a
// record that has no hold, and the cell stays held, decided under the mutex
// by the same kernel, until a state fits again. A spilled cell that is fresh
// is evicted under the mutex ([Holds.Settle]).
//
// # The caller's part
//
// A [Holds] is the protocol on the cells of one token-bucket kernel: it owns
// the kernel and the records of its held cells, in a [Map] by ID, and takes
// no lock of its own. Its owner guards it with a mutex and holds that mutex
// around every call of its methods: the mutex is the one the protocol speaks
// of. ID is whatever names a cell's record for as long as the cell lives:
// nothing for a limiter of one cell (package atomic), or its key for cells
// that move (a table that resizes). The map is written only through Put and
// Delete, so that a map that held many records gives their memory back once
// the cells are released ([Map]).
//
// [Holds.Decide], [Holds.Reserve] and [Holds.Cancel] are the calls on a
// key; [Holds.Spill] is the lock-free admission's way into the protocol;
// [Holds.Settle] is the sweep's; [Holds.Reset] and [Holds.Take] forget a
// held cell's record, for Reset and for a Reload's Take.

// Rec is a held cell's record: its state and its hold. A record with no
// hold (Hold.Ticket 0) is a spilled state.
type Rec struct {
	State kernel.TokenBucketState
	Hold  kernel.Hold
}

// Cell is a token-bucket cell whose value, of type V, is a state, the held
// value or (keyed stores) the tombstone. Its methods take the kernel whose
// Pack and Unpack encode and decode a packed word's states.
type Cell[V comparable] interface {
	// Load returns the cell's value.
	Load() V
	// State decodes v: the state it is, or whether it is the held value or
	// the tombstone.
	State(k *kernel.TokenBucket, v V) (s kernel.TokenBucketState, held, tomb bool)
	// Fits reports whether the cell's value can hold s (a packed word has a
	// horizon: kernel.TokenBucket.Pack).
	Fits(k *kernel.TokenBucket, s kernel.TokenBucketState) bool
	// CAS publishes s, which fits, if the value is still old.
	CAS(k *kernel.TokenBucket, old V, s kernel.TokenBucketState) bool
	// CASHeld swaps old for the held value.
	CASHeld(old V) bool
	// Release stores s into a held cell and reports true, or reports false
	// if s does not fit, and the cell stays held; only the holder of the
	// mutex guarding its Holds may call it.
	Release(k *kernel.TokenBucket, s kernel.TokenBucketState) bool
	// Bury stores the tombstone into a held cell; only the holder of the
	// mutex guarding its Holds may call it.
	Bury()
}

// HoldResult says what a call on a held cell found.
type HoldResult uint8

const (
	Decided  HoldResult = iota // the call was decided
	Released                   // the cell was released meanwhile: load it again
	Tomb                       // the cell is a tombstone: nothing was decided
)

// Holds is the held protocol on cells C (of values V) of one token-bucket
// kernel: the kernel, and the records of the held cells, by ID. Its owner
// guards it with a mutex, held around every method call (the mutex the
// protocol speaks of), and calls Init before any other method. The zero
// Holds after Init holds no record.
type Holds[V, ID comparable, C Cell[V]] struct {
	recs Map[ID, Rec]
	tb   *kernel.TokenBucket
}

// Init makes tb the kernel of h's cells.
func (h *Holds[V, ID, C]) Init(tb *kernel.TokenBucket) { h.tb = tb }

// Record returns the record of the held cell named id, and whether there
// is one (exactly while the cell is held).
func (h *Holds[V, ID, C]) Record(id ID) (Rec, bool) {
	rec, ok := h.recs.M[id]
	return rec, ok
}

// Put makes rec the record of a cell named id that the caller is about to
// store held, as a new key (a store's insertion of a state that does not
// fit its word, or that carries a hold).
func (h *Holds[V, ID, C]) Put(id ID, rec Rec) { h.recs.Put(id, rec) }

// Len returns how many records the holds keep (held cells: a reservation's
// hold, or a state past its word's horizon).
func (h *Holds[V, ID, C]) Len() int { return len(h.recs.M) }

// Decide decides a request for n at reading now on the held cell c, named
// id, on its record's state, and shows the hold the reading; it releases
// the cell if the hold is no longer live. Its linearization point is the
// critical section of the mutex guarding h. If c is no longer held (it was
// released or buried before the caller took the mutex), nothing is decided
// and the HoldResult says which.
func (h *Holds[V, ID, C]) Decide(c C, id ID, now time.Duration, n int) (kernel.Verdict, HoldResult) {
	if _, held, tombstone := c.State(h.tb, c.Load()); !held {
		if tombstone {
			return kernel.Verdict{}, Tomb
		}
		return kernel.Verdict{}, Released
	}
	rec := h.recs.M[id]
	v := h.tb.Decide(&rec.State, now, n)
	h.keep(c, id, rec, now)
	return v, Decided
}

// keep shows rec's hold the reading now and stores rec back, or, if the
// hold is no longer live, drops it (put). c must be held.
func (h *Holds[V, ID, C]) keep(c C, id ID, rec Rec, now time.Duration) {
	if !h.tb.Observe(&rec.Hold, rec.State, now) {
		rec.Hold = kernel.Hold{}
	}
	h.put(c, id, rec)
}

// put stores rec as the record of the held cell c, or releases c with rec's
// state when rec has no hold and the state fits the cell. A record without
// a hold is a spilled state: one past the packed word's horizon (see
// kernel.TokenBucket.Pack), which the cell keeps under the mutex, held,
// with the same arithmetic, for as long as it does not fit. c must be held
// (so its record is in h).
func (h *Holds[V, ID, C]) put(c C, id ID, rec Rec) {
	if rec.Hold.Ticket == 0 && c.Release(h.tb, rec.State) {
		h.recs.Delete(id)
		return
	}
	h.recs.Put(id, rec)
}

// hold writes rec as the record of the cell c, which is not held, and swaps
// c's value old for the held value; it reports false, leaving no record, if
// the value is no longer old. While c's value is a state, c is not held,
// and only the holder of the mutex guarding h can hold it, so no record of
// c exists, and the one written here may be deleted again if a lock-free
// admission moves the value before the CAS.
func (h *Holds[V, ID, C]) hold(c C, id ID, old V, rec Rec) bool {
	h.recs.Put(id, rec)
	hook.Between(hook.BeforeCAS)
	if !c.CASHeld(old) {
		h.recs.Delete(id)
		return false
	}
	return true
}

// Spill publishes s, a state decided on the value old of the cell c that
// does not fit c (past the packed word's horizon), by holding c with a
// record of s and no hold, as a reservation that must wait holds it. It
// reports false if the value moved meanwhile: the caller decides again. Its
// linearization point is the CompareAndSwap to the held value (the
// tempting wrong version, a plain Store of the held value, would erase an
// admission published since old was loaded).
func (h *Holds[V, ID, C]) Spill(c C, id ID, old V, s kernel.TokenBucketState) bool {
	// old was loaded before the mutex: another spill (or a reservation)
	// may have held the cell since, and its record must not be touched.
	// While the value is still old, a state, the cell is not held, and only
	// the mutex's holder can hold it: no record exists, and one written
	// here may be deleted again if a lock-free admission moves the value
	// before the CAS. (The tempting shortcut writes the record without this
	// check: a second spiller racing on the same old value then overwrites
	// the first one's record and, its CAS failing, deletes it, leaving a
	// held cell without a state, which the next call reads as a full
	// bucket.)
	if c.Load() != old {
		return false
	}
	return h.hold(c, id, old, Rec{State: s})
}

// Reserve is kernel.TokenBucket.ReserveHold on the cell c, whether held or
// not: the mutex guarding h is taken whatever c's value (see the top of
// this file). live is false if c is a tombstone: nothing was reserved.
func (h *Holds[V, ID, C]) Reserve(c C, id ID, now time.Duration, n int, maxWait time.Duration) (d time.Duration, ok bool, ticket uint64, live bool) {
	for {
		old := c.Load()
		s, held, tombstone := c.State(h.tb, old)
		if tombstone {
			return 0, false, 0, false
		}
		var rec Rec
		if held {
			rec = h.recs.M[id]
		} else {
			rec.State = s
		}
		before := rec.State
		d, ok, ticket = h.tb.ReserveHold(&rec.State, &rec.Hold, now, n, maxWait)
		switch {
		case held:
			h.put(c, id, rec)
		case rec.Hold.Ticket != 0 || !c.Fits(h.tb, rec.State):
			// A new hold, or a state past the word's horizon (spill), on a
			// cell that was not held.
			if !h.hold(c, id, old, rec) {
				continue // a lock-free admission came first: start over
			}
		case rec.State != before:
			hook.Between(hook.BeforeCAS)
			if !c.CAS(h.tb, old, rec.State) {
				continue
			}
		}
		return d, ok, ticket, true
	}
}

// Cancel is kernel.TokenBucket.CancelHold on the cell c: it succeeds only on
// a held cell whose hold has the ticket, and releases the cell when the hold
// is used or no longer live.
func (h *Holds[V, ID, C]) Cancel(c C, id ID, ticket uint64, now time.Duration) bool {
	if _, held, _ := c.State(h.tb, c.Load()); !held {
		return false
	}
	rec := h.recs.M[id]
	ok, drop := h.tb.CancelHold(&rec.State, &rec.Hold, ticket, now)
	if drop {
		rec.Hold = kernel.Hold{}
	}
	h.put(c, id, rec)
	return ok
}

// Settle shows the hold of c, if c is held, the reading at, and releases c
// if the hold is no longer live and its state fits. A sweep calls it before
// judging c fresh. If c stays held with no hold (a spilled state) that is
// fresh at at, it evicts c as a sweep evicts a value: it calls raise(at) to
// raise the store's floor, then buries c, where no other call can change c
// (every call on a held cell takes the mutex); it reports whether it did.
// raise runs under the mutex guarding h.
func (h *Holds[V, ID, C]) Settle(c C, id ID, at time.Duration, raise func(at time.Duration)) bool {
	if _, held, _ := c.State(h.tb, c.Load()); !held {
		return false
	}
	h.keep(c, id, h.recs.M[id], at)
	rec, held := h.recs.M[id]
	if !held || rec.Hold.Ticket != 0 || !h.tb.Fresh(&rec.State, at) {
		return false
	}
	raise(at)
	c.Bury()
	h.recs.Delete(id)
	return true
}

// Reset forgets the state of the held cell c: it deletes its record (and
// with it any hold, so that no reservation made before can be cancelled
// after) and releases c with the zero state, a fresh key's. It reports
// false, doing nothing, if c is not held. Its linearization point is the
// critical section of the mutex guarding h.
func (h *Holds[V, ID, C]) Reset(c C, id ID) bool {
	if _, held, _ := c.State(h.tb, c.Load()); !held {
		return false
	}
	h.recs.Delete(id)
	c.Release(h.tb, kernel.TokenBucketState{}) // the zero state fits every cell
	return true
}

// Take removes the held cell c from the protocol for a Reload's move: it
// deletes its record (with any hold: a reservation made before can no
// longer be cancelled; its tokens stay taken in the state returned),
// buries c, and returns the record's state. It reports false, doing
// nothing, if c is not held.
func (h *Holds[V, ID, C]) Take(c C, id ID) (kernel.TokenBucketState, bool) {
	if _, held, _ := c.State(h.tb, c.Load()); !held {
		return kernel.TokenBucketState{}, false
	}
	rec := h.recs.M[id]
	h.recs.Delete(id)
	c.Bury()
	return rec.State, true
}
