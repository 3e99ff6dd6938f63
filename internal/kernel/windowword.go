package kernel

import (
	"math"
	"math/bits"
)

// FixedWindowWord packs a fixed window's state into one word:
//
//	bits[0:cb)   Count, 0..Limit, where cb = bits.Len(Limit) (at most 31)
//	bits[cb:64)  k - base: the window index k = floor(now/Window) less base,
//	             the index of the clock range's first window
//
// The index is stored whole, as an offset from the first window of the
// kernels' clock range: readings are clamped to ±(2^62-1) ns, so every index
// the kernel computes lies in [base, Index(2^62-1)]. A valid rule has Window
// >= Limit ns >= 2^(cb-1) ns, so that range holds at most 2^(64-cb) windows
// and every offset fits the word's 64-cb bits. Horizon: none. Any two
// readings of the clock range, however far apart, restore the same window,
// so a stale reading is counted against the newest window exactly as the
// kernel counts it. A zero Count is a fresh key whatever the index bits say,
// so the zero word is an empty window, and every word with a zero Count and
// other bits set is free for a store's sentinels (Spare).
//
// The tempting alternative, the index modulo 2^(64-cb) restored as the one
// nearest to the caller's own, fits too but aliases readings more than
// 2^(63-cb) windows apart, which the clock range allows (2^63 windows of 1ns
// for fixed-window,1,1ns): a stale reading at one end of the range would see
// a fresh window and be admitted where the newest reading, at the other end,
// is denied.
type FixedWindowWord struct {
	cb   uint
	mask uint64
	base int64 // the index of the clock range's first window
}

// Word returns the packing of k's states.
func (k *FixedWindow) Word() FixedWindowWord {
	cb := uint(bits.Len64(uint64(k.limit)))
	return FixedWindowWord{cb: cb, mask: 1<<cb - 1, base: k.Index(math.MinInt64)}
}

// Pack returns s as one word. s must be a state the kernel wrote.
func (p FixedWindowWord) Pack(s FixedWindowState) uint64 {
	return uint64(s.Window-p.base)<<p.cb | uint64(s.Count)
}

// Unpack returns the state a word from Pack stands for.
func (p FixedWindowWord) Unpack(w uint64) FixedWindowState {
	count := w & p.mask
	if count == 0 {
		return FixedWindowState{}
	}
	return FixedWindowState{Window: int64(w>>p.cb) + p.base, Count: int64(count)}
}

// Spare returns the i-th word (i >= 1) that Pack never returns for a state
// with a Count: a zero Count with index bits ^i. Stores publish only states
// after an admission (Count >= 1), so these are theirs for sentinels.
func (p FixedWindowWord) Spare(i uint64) uint64 { return ^(i - 1) << p.cb &^ p.mask }

// SlidingCounterWord packs a sliding counter's state into one word:
//
//	bits[0:cb)    Curr, the current window's count (cb = bits.Len(Limit) <= 16)
//	bits[cb:2cb)  Prev, the previous window's count
//	bits[2cb:64)  k - base: the current window's index less base, the index
//	              of the clock range's first window (as for FixedWindowWord)
//
// The index is stored whole, as for the fixed window, so the word is exact
// over the whole clock range, but it has only 64-2cb bits: the range's
// windows must number at most 2^(64-2cb), which holds exactly when Window >=
// 2^(2cb-1) ns (524µs for limits up to 1023, 134ms up to 16,383, 2.15s up to
// 65,535). Other rules do not pack: Word reports them. Both counts zero is a
// fresh key, so the zero word is fresh, and every word with both counts zero
// and other bits set is free for a store's sentinels (Spare).
type SlidingCounterWord struct {
	cb   uint
	mask uint64
	base int64 // the index of the clock range's first window
}

// MaxWordLimit is the largest Limit whose sliding counter's counts pack in
// a SlidingCounterWord.
const MaxWordLimit = 1<<16 - 1

// Word returns the packing of k's states, and whether they pack: whether
// the counts fit (Limit <= MaxWordLimit) and every window index of the clock
// range fits the word's index bits.
func (k *SlidingCounter) Word() (SlidingCounterWord, bool) {
	if k.limit > MaxWordLimit {
		return SlidingCounterWord{}, false
	}
	cb := uint(bits.Len64(uint64(k.limit)))
	p := SlidingCounterWord{cb: cb, mask: 1<<cb - 1, base: k.Index(math.MinInt64)}
	return p, uint64(k.Index(math.MaxInt64)-p.base)>>(64-2*cb) == 0
}

// Pack returns s as one word. s must be a state the kernel wrote, of a rule
// whose states pack.
func (p SlidingCounterWord) Pack(s SlidingCounterState) uint64 {
	return uint64(s.Window-p.base)<<(2*p.cb) | uint64(s.Prev)<<p.cb | uint64(s.Curr)
}

// Unpack returns the state a word from Pack stands for.
func (p SlidingCounterWord) Unpack(w uint64) SlidingCounterState {
	curr, prev := w&p.mask, w>>p.cb&p.mask
	if curr == 0 && prev == 0 {
		return SlidingCounterState{}
	}
	return SlidingCounterState{Window: int64(w>>(2*p.cb)) + p.base, Prev: int64(prev), Curr: int64(curr)}
}

// Spare returns the i-th word (i >= 1) that Pack never returns for a state
// with a current count: both counts zero and index bits ^i. Stores publish
// only states after an admission (Curr >= 1), so these are theirs for
// sentinels.
func (p SlidingCounterWord) Spare(i uint64) uint64 {
	both := uint64(1)<<(2*p.cb) - 1
	return ^(i - 1) << (2 * p.cb) &^ both
}
