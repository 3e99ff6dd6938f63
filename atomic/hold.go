package atomic

import (
	"sync"
	"time"
	"unsafe"

	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
)

// This file is how a lock-free token bucket keeps the hold (kernel.Hold) of
// a reservation that may still be cancelled: the record that lets a
// cancellation happen at most once, only on the key it was made on, and
// never once the tokens were due at any reading the key has seen.
//
// A hold needs more than a state word can carry (a ticket, the newest
// reading seen), and every call on the key, denials and probes included,
// must show it its reading, atomically with the decision. So while a cell
// has a hold, it is held: its word (or snapshot pointer) is a sentinel, the
// held value, which no state ever takes, and its state lives in a record
// under a mutex, with the hold:
//
//   - A call that loads the held value decides under the record's mutex,
//     on the record's state, and shows the hold its reading (decideHeld).
//   - A reservation takes the mutex first, whatever the value. If it leaves
//     a hold on a cell that was not held, it writes the record and then
//     swaps the value it decided on for the held value by CompareAndSwap,
//     still under the mutex: a lock-free admission published meanwhile
//     makes the CAS fail, and the reservation starts over.
//   - A cancellation takes the mutex and succeeds only on a held cell whose
//     record's ticket is the reservation's.
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
// shows its hold the sweep's reading first (settleHeld), so that a key held
// by a reservation nobody came back for is released and evicted in time.
//
// The same mechanism keeps a packed bucket's state that does not fit its
// word (a TAT past the horizon of the scaled units, kernel.TokenBucket.Pack):
// the admission that makes it spills it (spill), holding the cell with a
// record that has no hold, and the cell stays held, decided under the mutex
// by the same kernel, until a state fits again (put). A spilled cell that is
// fresh is evicted under the mutex (settleHeld).

// tbKernel is what a token-bucket cell decides with: the kernel, and the
// records of the holds of the cells that use it.
type tbKernel struct {
	kernel.TokenBucket
	holds holdTable
}

// holdTable holds the records of held cells, in stripes chosen by the cell's
// address.
type holdTable struct {
	stripes []holdStripe
	mask    uintptr
}

// holdStripe is a mutex and the records of the held cells that map to it.
type holdStripe struct {
	mu sync.Mutex
	m  map[unsafe.Pointer]heldRec // guarded by mu
	_  [layout.CacheLinePad - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof(map[int]int(nil))]byte
}

// heldRec is a held cell's state and hold.
type heldRec struct {
	state kernel.TokenBucketState
	hold  kernel.Hold
}

// newTBKernel returns the kernel k with a hold table of n stripes (a power
// of two).
func newTBKernel(k *kernel.TokenBucket, n int) *tbKernel {
	t := &tbKernel{TokenBucket: *k}
	t.holds.init(n)
	return t
}

func (t *holdTable) init(n int) {
	t.stripes = make([]holdStripe, n)
	t.mask = uintptr(n - 1)
}

// of returns the stripe of the cell at address c.
func (t *holdTable) of(c unsafe.Pointer) *holdStripe {
	a := uintptr(c)
	return &t.stripes[(a>>6^a>>12)&t.mask]
}

// holdCell is a token-bucket cell whose value, of type V, is a state, the
// held value or (keyed stores) the tombstone: tbCell and tbSnapCell.
type holdCell[V comparable] interface {
	load() V
	// state decodes v: the state it is, or whether it is the held value or
	// the tombstone.
	state(k *tbKernel, v V) (s kernel.TokenBucketState, held, tomb bool)
	// fits reports whether the cell's value can hold s (a packed word has a
	// horizon: kernel.TokenBucket.Pack).
	fits(k *tbKernel, s kernel.TokenBucketState) bool
	// cas publishes s, which fits, if the value is still old.
	cas(k *tbKernel, old V, s kernel.TokenBucketState) bool
	// casHeld swaps old for the held value.
	casHeld(old V) bool
	// release stores s into a held cell and reports true, or reports false
	// if s does not fit, and the cell stays held; only the holder of its
	// stripe's mutex may call it.
	release(k *tbKernel, s kernel.TokenBucketState) bool
	// bury stores the tombstone into a held cell; only the holder of its
	// stripe's mutex may call it.
	bury()
}

// heldOutcome says what a call on a held cell found.
type heldOutcome uint8

const (
	decided  heldOutcome = iota // the call was decided
	released                    // the cell was released meanwhile: load it again
	tomb                        // the cell is a tombstone: nothing was decided
)

// decideHeld decides a request for n at reading now on the held cell c,
// under its stripe's mutex, on the record's state, and shows the hold the
// reading; it releases the cell if the hold is no longer live. Its
// linearization point is the mutex's critical section.
func decideHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, now time.Duration, n int) (kernel.Verdict, heldOutcome) {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, held, tombstone := c.state(k, c.load()); !held {
		if tombstone {
			return kernel.Verdict{}, tomb
		}
		return kernel.Verdict{}, released
	}
	rec := st.m[ptr]
	v := k.Decide(&rec.state, now, n)
	st.keep(k, c, ptr, rec, now)
	return v, decided
}

// keep shows rec's hold the reading now and stores rec back, or, if the
// hold is no longer live, drops it (put). It requires that st.mu is held
// and that c is held.
func (st *holdStripe) keep(k *tbKernel, c interface {
	release(*tbKernel, kernel.TokenBucketState) bool
}, ptr unsafe.Pointer, rec heldRec, now time.Duration) {
	if !k.Observe(&rec.hold, rec.state, now) {
		rec.hold = kernel.Hold{}
	}
	st.put(k, c, ptr, rec)
}

// put stores rec as the record of the held cell c, or releases c with rec's
// state when rec has no hold and the state fits the cell. A record without
// a hold is a spilled state: one past the packed word's horizon (see
// kernel.TokenBucket.Pack), which the cell keeps under the mutex, held,
// with the same arithmetic, for as long as it does not fit. It requires that
// st.mu is held and that c is held.
func (st *holdStripe) put(k *tbKernel, c interface {
	release(*tbKernel, kernel.TokenBucketState) bool
}, ptr unsafe.Pointer, rec heldRec) {
	if rec.hold.Ticket == 0 && c.release(k, rec.state) {
		delete(st.m, ptr)
		return
	}
	st.m[ptr] = rec
}

// spill publishes s, a state decided on the value old of the cell c that
// does not fit c (past the packed word's horizon), by holding c with a
// record of s and no hold, under c's stripe's mutex, as a reservation that
// must wait holds it. It reports false if the value moved meanwhile: the
// caller decides again. Its linearization point is the CompareAndSwap to
// the held value (the tempting wrong version, a plain Store of the held
// value, would erase an admission published since old was loaded).
func spill[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, old V, s kernel.TokenBucketState) bool {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
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
	if c.load() != old {
		return false
	}
	if st.m == nil {
		st.m = make(map[unsafe.Pointer]heldRec)
	}
	st.m[ptr] = heldRec{state: s}
	hook.Between(hook.BeforeCAS)
	if !c.casHeld(old) {
		delete(st.m, ptr)
		return false
	}
	return true
}

// reserveHeld is kernel.TokenBucket.ReserveHold on the cell c, whether held
// or not, under its stripe's mutex (see the top of this file). live is false
// if c is a tombstone: nothing was reserved. pause, when not nil (tests
// only), is called once, after a first load of the value and before the mutex.
func reserveHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, now time.Duration, n int, maxWait time.Duration, pause func()) (d time.Duration, ok bool, ticket uint64, live bool) {
	if pause != nil {
		c.load()
		pause() // before the mutex, so that calls the test runs meanwhile can take it
	}
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		old := c.load()
		s, held, tombstone := c.state(k, old)
		if tombstone {
			return 0, false, 0, false
		}
		var rec heldRec
		if held {
			rec = st.m[ptr]
		} else {
			rec.state = s
		}
		before := rec.state
		d, ok, ticket = k.ReserveHold(&rec.state, &rec.hold, now, n, maxWait)
		switch {
		case held:
			st.put(k, c, ptr, rec)
		case rec.hold.Ticket != 0 || !c.fits(k, rec.state):
			// A new hold, or a state past the word's horizon (spill), on a
			// cell that was not held.
			if st.m == nil {
				st.m = make(map[unsafe.Pointer]heldRec)
			}
			st.m[ptr] = rec
			hook.Between(hook.BeforeCAS)
			if !c.casHeld(old) {
				delete(st.m, ptr)
				continue // a lock-free admission came first: start over
			}
		case rec.state != before:
			hook.Between(hook.BeforeCAS)
			if !c.cas(k, old, rec.state) {
				continue
			}
		}
		return d, ok, ticket, true
	}
}

// cancelHeld is kernel.TokenBucket.CancelHold on the cell c: it succeeds
// only on a held cell whose hold has the ticket, and releases the cell when
// the hold is used or no longer live.
func cancelHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, ticket uint64, now time.Duration) bool {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, held, _ := c.state(k, c.load()); !held {
		return false
	}
	rec := st.m[ptr]
	ok, drop := k.CancelHold(&rec.state, &rec.hold, ticket, now)
	if drop {
		rec.hold = kernel.Hold{}
	}
	st.put(k, c, ptr, rec)
	return ok
}

// settleHeld shows the hold of c, if c is held, the reading at, and releases
// c if the hold is no longer live and its state fits. A sweep calls it
// before judging c fresh. If c stays held with no hold (a spilled state)
// that is fresh at at, it evicts c as evict does a value: it raises floor to
// at, then buries c, under the mutex, where no other call can change c
// (every call on a held cell takes the mutex); it reports whether it did.
func settleHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, at time.Duration, floor *paddedInt64) bool {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, held, _ := c.state(k, c.load()); !held {
		return false
	}
	st.keep(k, c, ptr, st.m[ptr], at)
	rec, held := st.m[ptr]
	if !held || rec.hold.Ticket != 0 || !k.Fresh(&rec.state, at) {
		return false
	}
	floor.raise(int64(at))
	c.bury()
	delete(st.m, ptr)
	return true
}
