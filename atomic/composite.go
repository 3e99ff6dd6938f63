package atomic

import (
	satomic "sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// This file is the lock-free composite (admit.Limits): every part's state
// of one key in one cell, decided by kernel.Composite and published by one
// compare-and-swap, so that all the parts change together or none does.
// A cell takes one of two forms, chosen at construction for every key:
//
//   - The snapshot (snapCell): the parts' states in an immutable array
//     behind an atomic.Pointer, replaced by a CAS on the pointer. It takes
//     every composite NewLimitsLimiter accepts, at one allocation of 32
//     bytes per part per admission (none for a denial or a probe).
//   - The pair (pairCell, composite_pair.go): exactly two parts whose
//     states each pack in one word (kernel.CompositePair), the two words
//     side by side, updated together by one 16-byte CAS, with no
//     allocation. Only amd64 has the instruction here (cas128_amd64.s);
//     elsewhere every composite takes the snapshot.
//
// A composite of token buckets also hands out reservations, and keeps the
// hold of the latest one that may still be cancelled (kernel.CompositeHold)
// by the held protocol of package internal/keyed, written here for a composite's
// state (composite_hold.go): the cell is held, its value a sentinel, and
// its state and hold live in a record under a striped mutex. A pair whose
// token bucket's state leaves its word's horizon is held the same way,
// with a record that has no hold (a spill), until its state fits again.

// compKernel is what a composite cell decides with: the kernel, each part's
// Limit, the cell's form (the pair's packing, or the snapshot) with its
// held value, and the records of the held cells.
type compKernel struct {
	*kernel.Composite
	n       int                  // the number of parts
	limit   [admit.MaxLimits]int // each part's Limit
	least   int                  // the first part of the smallest Limit
	isPair  bool                 // the pair form, else the snapshot
	pair    kernel.CompositePair // the pair form's packing
	held    uint64               // the pair form's held value's first word
	heldVal compVal              // the held value
	holds   compHolds            // the records of held cells
}

// newCompKernel returns the kernel of limits (valid, no sliding log) with a
// hold table of shards stripes (a power of two), in the pair form if pair
// is true, the processor has the two-word CAS and the parts pack in two
// words, else in the snapshot form.
func newCompKernel(limits admit.Limits, shards int, pair bool) *compKernel {
	c := kernel.NewComposite(limits)
	k := &compKernel{Composite: c, n: c.Len(), heldVal: compVal{p: snapHeld}}
	for i := range k.n {
		k.limit[i] = c.PartLimit(i)
		if k.limit[i] < k.limit[k.least] {
			k.least = i
		}
	}
	k.holds.init(shards)
	if !pair || !cas128OK {
		return k
	}
	p, ok := c.Pair()
	if !ok {
		return k
	}
	k.isPair, k.pair, k.held = true, p, p.Spare(1)
	k.heldVal = compVal{a: k.held}
	return k
}

// decision returns v, bound by part which, as a Decision.
func (k *compKernel) decision(v kernel.Verdict, which int) (d admit.Decision) {
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, k.limit[which], v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// compVal is a composite cell's value, in either form: a pair's two words
// (a, b; p nil), or a snapshot's pointer (p; a and b 0). The zero compVal
// is a fresh key in both; heldVal is the sentinel.
//
// It is one type, and the protocol's functions plain functions of a
// compCell interface, so that the parts' states a call decides on stay in
// its frame: a buffer passed through an interface (or a generic
// instantiation's dictionary) escapes to the heap, and a denial would
// allocate.
type compVal struct {
	p    *kernel.PartState
	a, b uint64
}

// compCell is a composite cell: snapCell or pairCell.
type compCell interface {
	// load returns the cell's value, all of it read at one instant.
	load() compVal
	// cas swaps old for v if the value is still old. On a held cell only
	// the holder of its stripe's mutex calls it, from the held value.
	cas(old, v compVal) bool
}

// decode writes the parts' states the value v stands for (not the held
// value) into s.
func (k *compKernel) decode(v compVal, s []kernel.PartState) {
	switch {
	case k.isPair:
		k.pair.Unpack(v.a, v.b, s)
	case v.p == nil:
		clear(s)
	default:
		copy(s, unsafe.Slice(v.p, k.n))
	}
}

// fits reports whether a cell's value can hold s: a pair's token bucket has
// a horizon; a snapshot holds every state.
func (k *compKernel) fits(s []kernel.PartState) bool {
	if !k.isPair {
		return true
	}
	_, _, ok := k.pair.Pack(s)
	return ok
}

// encode returns the value that holds s, which fits: the pair's words, or
// a new snapshot (in *spare, reused when the caller retries), nil when
// every part is fresh.
func (k *compKernel) encode(s []kernel.PartState, spare *[]kernel.PartState) compVal {
	if k.isPair {
		a, b, _ := k.pair.Pack(s)
		return compVal{a: a, b: b}
	}
	for i := range s {
		if s[i] != (kernel.PartState{}) {
			if *spare == nil {
				*spare = make([]kernel.PartState, k.n)
			}
			copy(*spare, s)
			return compVal{p: &(*spare)[0]}
		}
	}
	return compVal{}
}

// compDecide is a composite cell's CAS loop: it decides a request for n at
// reading now on the cell c (whose address is ptr) and publishes the
// parts' new states, all of them at once.
//
// The tempting wrong version decides each part on its own cell: a request
// that one part admits and charges and the next denies has then spent the
// first part's budget for nothing, and two requests racing on two parts
// can each be admitted by one part and counted by the other, so that
// neither sum is what any order of the calls would give. Deciding every
// part on one value and publishing them by one CAS from that value is what
// makes a composite all or nothing.
//
// Linearization point: the successful CAS for an admission; the load of
// the value it decided on, for a denial or a probe (which publish nothing);
// the critical section of the stripe's mutex for a held cell.
func compDecide(k *compKernel, c compCell, ptr unsafe.Pointer, now time.Duration, n int) (v kernel.Verdict, which int) {
	var buf [admit.MaxLimits]kernel.PartState
	s := buf[:k.n]
	var spare []kernel.PartState
	for {
		old := c.load()
		if old == k.heldVal {
			v, which, o := compDecideHeld(k, c, ptr, now, n)
			if o == keyed.Decided {
				return v, which
			}
			continue // released meanwhile: load it again
		}
		k.decode(old, s)
		v, which = k.Decide(s, now, n)
		if !v.Allowed || n <= 0 {
			return v, which // Decide wrote nothing: nothing to publish
		}
		if !k.fits(s) {
			if compSpill(k, c, ptr, old, s) {
				return v, which
			}
			continue
		}
		nv := k.encode(s, &spare)
		hook.Between(hook.BeforeCAS)
		if c.cas(old, nv) {
			return v, which
		}
	}
}

// snapCell is one key's composite as an immutable snapshot: a pointer to
// the first of k.n part states, allocated together and never modified
// after they are published, so a goroutine that loaded the pointer may read
// them without synchronisation, and pointer identity rules out ABA (an
// array's address is not reused while anyone holds it). nil is a fresh key;
// snapHeld, which no cell publishes as states, is the held value.
type snapCell struct {
	p satomic.Pointer[kernel.PartState]
}

var snapHeld = new(kernel.PartState)

func (c *snapCell) load() compVal { return compVal{p: c.p.Load()} }

func (c *snapCell) cas(old, v compVal) bool { return c.p.CompareAndSwap(old.p, v.p) }
