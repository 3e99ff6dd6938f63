package atomic

import (
	satomic "sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/evict"
	"github.com/admit-go/admit/internal/held"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// This file is the lock-free composite (admit.Limits): every part's state
// of one key in one cell, decided by kernel.Composite and published by one
// compare-and-swap, so that all the parts change together or none does.
// The cell is a snapshot (snapCell): the parts' states in an immutable
// array behind an atomic.Pointer, replaced by a CAS on the pointer, at one
// allocation of 32 bytes per part per admission (none for a denial or a
// probe).
//
// A composite of token buckets also hands out reservations, and keeps the
// hold of the latest one that may still be cancelled (kernel.CompositeHold)
// by the protocol of package internal/held, written here for a composite's
// state (composite_hold.go): the cell is held, its value a sentinel, and
// its state and hold live in a record under a striped mutex. A cell whose
// value cannot hold its state (compCell.fits) is held the same way, with a
// record that has no hold (a spill), until its state fits again.

// compKernel is what a composite cell decides with: the kernel, each part's
// Limit, and the records of the held cells.
type compKernel struct {
	*kernel.Composite
	n     int                  // the number of parts
	limit [admit.MaxLimits]int // each part's Limit
	holds compHolds            // the records of held cells
}

// newCompKernel returns the kernel of limits (valid, no sliding log) with a
// hold table of shards stripes (a power of two).
func newCompKernel(limits admit.Limits, shards int) *compKernel {
	c := kernel.NewComposite(limits)
	k := &compKernel{Composite: c, n: c.Len()}
	for i := range k.n {
		k.limit[i] = c.PartLimit(i)
	}
	k.holds.init(shards)
	return k
}

// horizon is the longest any part's state can take to become fresh.
func (k *compKernel) horizon() time.Duration {
	var h time.Duration
	for i := range k.n {
		h = max(h, evict.Horizon(k.Limits().At(i)))
	}
	return h
}

// decision returns v, bound by part which, as a Decision.
func (k *compKernel) decision(v kernel.Verdict, which int) (d admit.Decision) {
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, k.limit[which], v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// compCell is a composite cell whose value, of type V, is the parts'
// states, the held value or (keyed stores) the tombstone: snapCell and
// pairCell. Its release and bury run only under the mutex of its stripe,
// on a held cell.
type compCell[V comparable] interface {
	// load returns the cell's value, all of it read at one instant.
	load() V
	// kind reports whether v is the held value or the tombstone.
	kind(k *compKernel, v V) (held, tomb bool)
	// decode writes the states v stands for, which is neither sentinel,
	// into s.
	decode(k *compKernel, v V, s []kernel.PartState)
	// fits reports whether the cell's value can hold s (a pair's token
	// bucket has a horizon).
	fits(k *compKernel, s []kernel.PartState) bool
	// cas publishes s, which fits, if the value is still old. spare, kept
	// by the caller across retries, lets a snapshot allocate once per call.
	cas(k *compKernel, old V, s []kernel.PartState, spare *[]kernel.PartState) bool
	// casTo swaps old for v (a fresh value or the tombstone).
	casTo(old, v V) bool
	// casHeld swaps old for the held value.
	casHeld(k *compKernel, old V) bool
	// release stores s into the held cell and reports true, or reports
	// false if s does not fit, and the cell stays held.
	release(k *compKernel, s []kernel.PartState) bool
	// bury stores the tombstone into the held cell.
	bury(k *compKernel)
}

// compDecide is a composite cell's CAS loop: it decides a request for n at
// reading now on the cell c (whose address is ptr) and publishes the
// parts' new states, all of them at once. live is false if c is a
// tombstone: nothing was decided. pause, when not nil (tests only), is
// called after the first load of the value.
//
// The tempting wrong version decides each part on its own cell: a request
// that one part admits and charges and the next denies has then spent the
// first part's budget for nothing, and two requests racing on two parts
// can each be admitted by one part and counted by the other, so that
// neither sum is what any order of the calls would give. Deciding every
// part on one value and publishing them by one CAS from that value is what
// makes a composite all or nothing.
//
// Linearization point: the successful CompareAndSwap for an admission; the
// load of the value it decided on, for a denial or a probe (which publish
// nothing); the critical section of the stripe's mutex for a held cell.
func compDecide[V comparable, C compCell[V]](k *compKernel, c C, ptr unsafe.Pointer, now time.Duration, n int, pause func()) (v kernel.Verdict, which int, live bool) {
	var buf [admit.MaxLimits]kernel.PartState
	s := buf[:k.n]
	var spare []kernel.PartState
	for {
		old := c.load()
		if pause != nil {
			pause()
			pause = nil
		}
		isHeld, tomb := c.kind(k, old)
		if tomb {
			return v, 0, false
		}
		if isHeld {
			v, which, o := compDecideHeld(k, c, ptr, now, n)
			if o != held.Released {
				return v, which, o == held.Decided
			}
			continue
		}
		c.decode(k, old, s)
		v, which = k.Decide(s, now, n)
		if !v.Allowed || n <= 0 {
			return v, which, true // Decide wrote nothing: nothing to publish
		}
		if !c.fits(k, s) {
			if compSpill(k, c, ptr, old, s) {
				return v, which, true
			}
			continue
		}
		hook.Between(hook.BeforeCAS)
		if c.cas(k, old, s, &spare) {
			return v, which, true
		}
	}
}

// compEvict is step 2 of the eviction protocol (keyed.go) on a composite
// cell: the CAS to the tombstone from the exact value judged fresh at at
// (every part fresh) is the eviction's linearization point, and a held
// cell is settled under its stripe's mutex first. See tbCell.evict for the
// tempting wrong version.
func compEvict[V comparable, C compCell[V]](k *compKernel, c C, ptr unsafe.Pointer, tomb V, at time.Duration, floor *paddedInt64) bool {
	old := c.load()
	if isHeld, _ := c.kind(k, old); isHeld {
		if compSettle(k, c, ptr, at, floor) {
			return true
		}
		old = c.load()
	}
	if isHeld, tomb := c.kind(k, old); isHeld || tomb {
		return false
	}
	var buf [admit.MaxLimits]kernel.PartState
	s := buf[:k.n]
	c.decode(k, old, s)
	if !k.Fresh(s, at) {
		return false
	}
	floor.raise(int64(at))
	hook.Between(hook.BeforeCAS)
	return c.casTo(old, tomb)
}

// compReset is kcell.reset on a composite cell: a CAS loop from the value
// it loads to fresh, the zero value; a held cell is reset under its
// stripe's mutex, which drops its record and with it any hold. See
// tbCell.reset for the tempting wrong version and the linearization point.
func compReset[V comparable, C compCell[V]](k *compKernel, c C, ptr unsafe.Pointer) {
	var fresh V
	for {
		old := c.load()
		isHeld, tomb := c.kind(k, old)
		switch {
		case old == fresh || tomb:
			return
		case isHeld:
			if compResetHeld(k, c, ptr) {
				return
			}
			continue
		}
		hook.Between(hook.BeforeCAS)
		if c.casTo(old, fresh) {
			return
		}
	}
}

// snapCell is one key's composite as an immutable snapshot: a pointer to
// the first of k.n part states, allocated together and never modified
// after they are published, so a goroutine that loaded the pointer may read
// them without synchronisation, and pointer identity rules out ABA (an
// array's address is not reused while anyone holds it). nil is a fresh key;
// snapTomb and snapHeld, which no cell publishes as states, are the keyed
// store's tombstone and the held value.
type snapCell struct {
	p    satomic.Pointer[kernel.PartState]
	name string
}

var (
	snapTomb = new(kernel.PartState)
	snapHeld = new(kernel.PartState)
)

func (c *snapCell) load() *kernel.PartState { return c.p.Load() }

func (c *snapCell) kind(_ *compKernel, p *kernel.PartState) (held, tomb bool) {
	return p == snapHeld, p == snapTomb
}

func (c *snapCell) decode(k *compKernel, p *kernel.PartState, s []kernel.PartState) {
	if p == nil {
		clear(s)
		return
	}
	copy(s, unsafe.Slice(p, k.n))
}

func (c *snapCell) fits(*compKernel, []kernel.PartState) bool { return true }

func (c *snapCell) cas(k *compKernel, old *kernel.PartState, s []kernel.PartState, spare *[]kernel.PartState) bool {
	if *spare == nil {
		*spare = make([]kernel.PartState, k.n)
	}
	copy(*spare, s)
	return c.p.CompareAndSwap(old, &(*spare)[0])
}

func (c *snapCell) casTo(old, v *kernel.PartState) bool { return c.p.CompareAndSwap(old, v) }

func (c *snapCell) casHeld(_ *compKernel, old *kernel.PartState) bool {
	return c.p.CompareAndSwap(old, snapHeld)
}

// release stores a new snapshot of s, or nil when every part is fresh's
// zero state (a reset).
func (c *snapCell) release(k *compKernel, s []kernel.PartState) bool {
	for i := range s {
		if s[i] != (kernel.PartState{}) {
			p := make([]kernel.PartState, k.n)
			copy(p, s)
			c.p.Store(&p[0])
			return true
		}
	}
	c.p.Store(nil)
	return true
}

func (c *snapCell) bury(*compKernel) { c.p.Store(snapTomb) }

func (c *snapCell) key() string       { return c.name }
func (c *snapCell) setKey(key string) { c.name = key }

// The methods of kcell (keyed.go) and compKCell.

func (c *snapCell) decideWhich(k *compKernel, now time.Duration, n int, pause func()) (kernel.Verdict, int, bool) {
	return compDecide(k, c, unsafe.Pointer(c), now, n, pause)
}

func (c *snapCell) decideKeyed(k *compKernel, now time.Duration, n int, pause func()) (kernel.Verdict, bool) {
	v, _, live := compDecide(k, c, unsafe.Pointer(c), now, n, pause)
	return v, live
}

// allowOneWhich and allowOne decline: a snapshot allocates per admission,
// and its general path is the one it has.
func (c *snapCell) allowOneWhich(*compKernel, time.Duration, func()) (kernel.Verdict, int, bool) {
	return kernel.Verdict{}, 0, false
}

func (c *snapCell) allowOne(*compKernel, time.Duration, func()) (kernel.Verdict, bool) {
	return kernel.Verdict{}, false
}

func (c *snapCell) evict(k *compKernel, at time.Duration, floor *paddedInt64) bool {
	return compEvict(k, c, unsafe.Pointer(c), snapTomb, at, floor)
}

func (c *snapCell) reset(k *compKernel) { compReset(k, c, unsafe.Pointer(c)) }

func (c *snapCell) reserve(k *compKernel, now time.Duration, n int, maxWait time.Duration, pause func()) (time.Duration, bool, uint64, bool) {
	return compReserve(k, c, unsafe.Pointer(c), now, n, maxWait, pause)
}

func (c *snapCell) cancel(k *compKernel, ticket uint64, now time.Duration) bool {
	return compCancel(k, c, unsafe.Pointer(c), ticket, now)
}
