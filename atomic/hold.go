package atomic

import (
	"sync"
	"time"
	"unsafe"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// This file is how a lock-free token bucket keeps the hold (kernel.Hold) of
// a reservation that may still be cancelled, and a packed state past its
// word's horizon (spilled): while it has either, a cell is held, its value
// the held value, and its state and hold live in a record under a mutex.
// Package internal/keyed (held.go) has the protocol, its invariants and its
// linearization points; this file keeps the records and their mutexes.
//
// The records live in stripes chosen by the cell's address (a cell never
// moves while anyone can reach it): each stripe is a mutex and the map of
// the records of the held cells that map to it, keyed by the cell's
// address. Each function below is held's, called under the stripe's mutex
// on the stripe's map. A call on a cell that is not held takes no stripe's
// mutex unless it reserves or cancels.

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
	m  keyed.Map[unsafe.Pointer, keyed.Rec] // guarded by mu
	_  [keyed.CacheLinePad - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof(keyed.Map[int, int]{})]byte
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

// holdCell is a token-bucket cell whose value, of type V, is a state or the
// held value: tbCell and tbSnapCell. Their Release runs only under the
// mutex of their stripe.
type holdCell[V comparable] interface {
	keyed.Cell[V, *tbKernel]
}

// decideHeld is keyed.Decide on the held cell c, under its stripe's mutex.
func decideHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, now time.Duration, n int) (kernel.Verdict, keyed.Outcome) {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	return keyed.Decide(&k.TokenBucket, k, c, &st.m, ptr, now, n)
}

// spill is keyed.Spill on the cell c, whose value was old, under its
// stripe's mutex: it publishes s, which does not fit c, by holding c, and
// reports false if the value moved meanwhile (the caller decides again).
func spill[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, old V, s kernel.TokenBucketState) bool {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	return keyed.Spill(c, &st.m, ptr, old, s)
}

// reserveHeld is keyed.Reserve on the cell c, whether held or not, under its
// stripe's mutex.
func reserveHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, now time.Duration, n int, maxWait time.Duration) (d time.Duration, ok bool, ticket uint64) {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	d, ok, ticket, _ = keyed.Reserve(&k.TokenBucket, k, c, &st.m, ptr, now, n, maxWait) // a single key is never a tombstone
	return d, ok, ticket
}

// cancelHeld is keyed.Cancel on the cell c, under its stripe's mutex: it
// succeeds only on a held cell whose hold has the ticket.
func cancelHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer, ticket uint64, now time.Duration) bool {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	return keyed.Cancel(&k.TokenBucket, k, c, &st.m, ptr, ticket, now)
}
