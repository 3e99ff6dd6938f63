package atomic

import (
	"sync"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// This file is package internal/keyed's held protocol for a composite's cells:
// how a composite of token buckets keeps the hold (kernel.CompositeHold) of
// a reservation that may still be cancelled, and how a pair keeps a state
// that does not fit its words (a token bucket's past its word's horizon).
// While it has either, a cell is held: its value is the held value, and its
// parts' states and its hold live in a record (compRec) in the map of the
// cell's stripe, under the stripe's mutex. The held protocol of internal/keyed
// gives the protocol's invariants and why a hold cannot live beside the
// value; each function below is the one of held with the same name, for a
// composite's states, and is called on a cell of stripe st with st.mu held.
// In short:
//
//   - A call that loads the held value decides under the mutex, on the
//     record, and shows the hold its reading (compDecideHeld).
//   - A reservation takes the mutex whatever the value (compReserve); one
//     that leaves a hold on a cell that was not held writes the record and
//     then swaps the value it decided on for the held value by CAS, still
//     under the mutex, and starts over if a lock-free admission came first.
//   - A cancellation takes the mutex and succeeds only on a held cell whose
//     record's ticket is the reservation's (compCancel).
//   - When the hold is no longer live and the state fits, whoever finds it
//     so releases the cell with the record's state and deletes the record.
//     Only the mutex's holder writes a held cell.
//
// So a cell is held exactly while its record exists.

// compRec is a held composite cell's record: its parts' states and its
// hold. A record with no hold (hold.Ticket 0) is a spilled state.
type compRec struct {
	parts [admit.MaxLimits]kernel.PartState
	hold  kernel.CompositeHold
}

// compHolds holds the records of held composite cells, in stripes chosen by
// the cell's address (a cell never moves while anyone can reach it), as
// holdTable does for token buckets.
type compHolds struct {
	stripes []compStripe
	mask    uintptr
}

// compStripe is a mutex and the records of the held cells that map to it.
type compStripe struct {
	mu sync.Mutex
	m  keyed.Map[unsafe.Pointer, *compRec] // guarded by mu
	_  [keyed.CacheLinePad - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof(keyed.Map[int, int]{})]byte
}

func (t *compHolds) init(n int) {
	t.stripes = make([]compStripe, n)
	t.mask = uintptr(n - 1)
}

// lock locks and returns the stripe of the cell at address c.
func (t *compHolds) lock(c unsafe.Pointer) *compStripe {
	a := uintptr(c)
	st := &t.stripes[(a>>6^a>>12)&t.mask]
	st.mu.Lock()
	return st
}

// compDecideHeld is keyed.Decide: it decides a request for n at reading now
// on the record of the held cell c, shows the hold the reading and releases
// c if the hold is no longer live and the state fits. If c is no longer
// held, nothing is decided and the HoldResult is keyed.Released. Linearization
// point: the critical section.
func compDecideHeld(k *compKernel, c compCell, ptr unsafe.Pointer, now time.Duration, n int) (v kernel.Verdict, which int, o keyed.HoldResult) {
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	if c.load() != k.heldVal {
		return v, 0, keyed.Released
	}
	rec := st.m.M[ptr]
	v, which = k.Decide(rec.parts[:k.n], now, n)
	compKeep(k, c, st, ptr, rec, now)
	return v, which, keyed.Decided
}

// compKeep is held's keep: it shows rec's hold the reading now, drops the
// hold if it is no longer live, and releases c (deleting rec) if rec then
// has no hold and its state fits.
func compKeep(k *compKernel, c compCell, st *compStripe, ptr unsafe.Pointer, rec *compRec, now time.Duration) {
	if !k.Observe(&rec.hold, rec.parts[:k.n], now) {
		rec.hold = kernel.CompositeHold{}
	}
	compPut(k, c, st, ptr, rec)
}

// compPut is held's put: it releases c with rec's state, deleting rec, when
// rec has no hold and the state fits; otherwise rec stays c's record. The
// release's CAS from the held value cannot fail: only the holder of the
// stripe's mutex writes a held cell.
func compPut(k *compKernel, c compCell, st *compStripe, ptr unsafe.Pointer, rec *compRec) {
	if s := rec.parts[:k.n]; rec.hold.Ticket == 0 && k.fits(s) {
		var spare []kernel.PartState
		c.cas(k.heldVal, k.encode(s, &spare))
		st.m.Delete(ptr)
	}
}

// compHold is held's hold: it makes rec the record of the cell c, which is
// not held, and swaps c's value old for the held value; it reports false,
// leaving no record, if the value is no longer old. While c's value is a
// state, c is not held and only the mutex's holder can hold it, so no
// record of c exists.
func compHold(k *compKernel, c compCell, st *compStripe, ptr unsafe.Pointer, old compVal, rec *compRec) bool {
	st.m.Put(ptr, rec)
	hook.Between(hook.BeforeCAS)
	if !c.cas(old, k.heldVal) {
		st.m.Delete(ptr)
		return false
	}
	return true
}

// compSpill is keyed.Spill: it publishes s, decided on the value old and
// past what c's value can hold, by holding c with a record of s and no
// hold; it reports false if the value moved meanwhile (the caller decides
// again). Its linearization point is the CAS to the held value; see
// keyed.Spill for why the value is checked again under the mutex first.
func compSpill(k *compKernel, c compCell, ptr unsafe.Pointer, old compVal, s []kernel.PartState) bool {
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	if c.load() != old {
		return false
	}
	rec := new(compRec)
	copy(rec.parts[:], s)
	return compHold(k, c, st, ptr, old, rec)
}

// compReserve is keyed.Reserve: kernel.Composite.ReserveHold on the cell c,
// held or not, under its stripe's mutex.
func compReserve(k *compKernel, c compCell, ptr unsafe.Pointer, now time.Duration, n int, maxWait time.Duration) (d time.Duration, ok bool, ticket uint64) {
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	var local compRec
	var spare []kernel.PartState
	for {
		old := c.load()
		isHeld := old == k.heldVal
		rec := &local
		if isHeld {
			rec = st.m.M[ptr]
		} else {
			local = compRec{}
			k.decode(old, local.parts[:k.n])
		}
		before := rec.parts
		d, ok, ticket = k.ReserveHold(rec.parts[:k.n], &rec.hold, now, n, maxWait)
		switch {
		case isHeld:
			compPut(k, c, st, ptr, rec)
		case rec.hold.Ticket != 0 || !k.fits(rec.parts[:k.n]):
			// A new hold, or a state past a word's horizon, on a cell that
			// was not held.
			r := new(compRec)
			*r = local
			if !compHold(k, c, st, ptr, old, r) {
				continue // a lock-free admission came first: start over
			}
		case rec.parts != before:
			nv := k.encode(rec.parts[:k.n], &spare)
			hook.Between(hook.BeforeCAS)
			if !c.cas(old, nv) {
				continue
			}
		}
		return d, ok, ticket
	}
}

// compCancel is keyed.Cancel: kernel.Composite.CancelHold on the held cell
// c, under its stripe's mutex. It succeeds only on a held cell whose hold
// has the ticket, and releases the cell when the hold is used or no longer
// live.
func compCancel(k *compKernel, c compCell, ptr unsafe.Pointer, ticket uint64, now time.Duration) bool {
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	if c.load() != k.heldVal {
		return false
	}
	rec := st.m.M[ptr]
	ok, drop := k.CancelHold(rec.parts[:k.n], &rec.hold, ticket, now)
	if drop {
		rec.hold = kernel.CompositeHold{}
	}
	compPut(k, c, st, ptr, rec)
	return ok
}
