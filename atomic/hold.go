package atomic

import (
	"sync"
	"time"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// This file is how a lock-free token bucket keeps the hold (kernel.Hold) of
// a reservation that may still be cancelled, and a packed state past its
// word's horizon (spilled): while it has either, a cell is held, its value
// the held value, and its state and hold live in a record under a mutex.
// Package internal/keyed (held.go) has the protocol, its invariants and its
// linearization points, in keyed.Holds; this file gives a limiter's cell
// its Holds and the mutex that guards it. A call on a cell that is not held
// takes no mutex unless it reserves or cancels.

// tbKernel is what a token-bucket cell C, of values V, decides with: the
// kernel, and the held protocol on the cell with the mutex that guards it.
// A limiter has one cell, so it has one record at most, which needs no name
// (struct{}).
type tbKernel[V comparable, C keyed.Cell[V]] struct {
	kernel.TokenBucket
	mu    sync.Mutex
	holds keyed.Holds[V, struct{}, C] // guarded by mu
}

// The kernels of the two single-key buckets.
type (
	packedKernel = tbKernel[uint64, *tbCell]
	snapKernel   = tbKernel[*kernel.TokenBucketState, *tbSnapCell]
)

// init makes k the kernel tb, with no record.
func (k *tbKernel[V, C]) init(tb *kernel.TokenBucket) {
	k.TokenBucket = *tb
	k.holds.Init(&k.TokenBucket)
}

// decideHeld is Holds.Decide on the held cell c, under the mutex.
func (k *tbKernel[V, C]) decideHeld(c C, now time.Duration, n int) (kernel.Verdict, keyed.HoldResult) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.holds.Decide(c, struct{}{}, now, n)
}

// spill is Holds.Spill on the cell c, whose value was old, under the mutex:
// it publishes s, which does not fit c, by holding c, and reports false if
// the value moved meanwhile (the caller decides again).
func (k *tbKernel[V, C]) spill(c C, old V, s kernel.TokenBucketState) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.holds.Spill(c, struct{}{}, old, s)
}

// reserve is Holds.Reserve on the cell c, whether held or not, under the
// mutex.
func (k *tbKernel[V, C]) reserve(c C, now time.Duration, n int, maxWait time.Duration) (d time.Duration, ok bool, ticket uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d, ok, ticket, _ = k.holds.Reserve(c, struct{}{}, now, n, maxWait) // a single key is never a tombstone
	return d, ok, ticket
}

// cancel is Holds.Cancel on the cell c, under the mutex: it succeeds only
// on a held cell whose hold has the ticket.
func (k *tbKernel[V, C]) cancel(c C, ticket uint64, now time.Duration) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.holds.Cancel(c, struct{}{}, ticket, now)
}
