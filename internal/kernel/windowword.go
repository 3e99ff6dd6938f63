package kernel

import (
	"math"
	"math/bits"
)

// FixedWindowWord packs a fixed window's state into one word:
//
//	bits[0:cb)   Count, 0..2^cb-1, where cb = 64 - bits.Len(the index span
//	             below), at most 56: at least bits.Len(Limit), and at least
//	             bits.Len(Window) bits (42 for an hour, 30 for a second)
//	bits[cb:64)  k - base: the window index k = floor(now/Window) less base,
//	             the index of the clock range's first window
//
// The index is stored whole, as an offset from the first window of the
// kernels' clock range: readings are clamped to ±(2^62-1) ns, so every index
// the kernel computes lies in [base, Index(2^62-1)], a span of at most
// 2^63/Window + 1 windows, and the count takes every bit the span leaves. A
// valid rule has Window >= Limit ns >= 2^(bits.Len(Limit)-1) ns, so the
// count always has room for Limit; the rest of its room holds a count past
// Limit that a change of limits carried (Convert keeps a consumption the
// new Limit cannot admit). A count past 2^cb-1 (more than Window in
// nanoseconds, or 2^56) packs as 2^cb-1: the window still denies every
// request until it ends, but a later change of limits carries that count,
// not the larger one. Horizon: none. Any two
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

// maxCountBits is the most bits a packed window's count takes, so that
// every packing keeps at least eight index bits for the stores' spare
// words (Spare).
const maxCountBits = 56

// Word returns the packing of k's states.
func (k *FixedWindow) Word() FixedWindowWord {
	base := k.Index(math.MinInt64)
	span := uint64(k.Index(math.MaxInt64) - base)
	cb := min(uint(64-bits.Len64(span)), maxCountBits)
	cb = max(cb, uint(bits.Len64(uint64(k.limit)))) // a no-op for a valid rule (see the bit map)
	return FixedWindowWord{cb: cb, mask: 1<<cb - 1, base: base}
}

// Pack returns s as one word. s must be a state the kernel or Convert
// wrote; a Count past the word's room packs as the largest it holds.
func (p FixedWindowWord) Pack(s FixedWindowState) uint64 {
	return uint64(s.Window-p.base)<<p.cb | min(uint64(s.Count), p.mask)
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
//	bits[0:cb)    Curr, the current window's count
//	bits[cb:2cb)  Prev, the previous window's count
//	bits[2cb:64)  k - base: the current window's index less base, the index
//	              of the clock range's first window (as for FixedWindowWord)
//
// The index is stored whole, as for the fixed window, so the word is exact
// over the whole clock range, but it has only 64-2cb bits: the range's
// windows must number at most 2^(64-2cb). The counts take every bit the
// index leaves, cb = (64 - bits.Len(the index span))/2 (15 for a second's
// window, 18 for a minute's, 21 for an hour's); the rule packs when Limit
// fits them, Limit <= MaxWordLimit, which holds exactly when Window >=
// 2^(2·bits.Len(Limit)-1) ns (524µs for limits up to 1023, 134ms up to
// 16,383, 2.15s up to 65,535). Other rules do not pack: Word reports them.
// The room past Limit holds counts a change of limits carried (Convert);
// a count past 2^cb-1 packs as 2^cb-1, which still denies every request
// until it rolls out, but a later change of limits carries that count, not
// the larger one. Both counts zero is a
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
	base := k.Index(math.MinInt64)
	span := uint64(k.Index(math.MaxInt64) - base)
	cb := min(uint(64-bits.Len64(span))/2, maxCountBits/2)
	p := SlidingCounterWord{cb: cb, mask: 1<<cb - 1, base: base}
	return p, cb >= uint(bits.Len64(uint64(k.limit)))
}

// Pack returns s as one word. s must be a state the kernel or Convert
// wrote, of a rule whose states pack; a count past the word's room packs
// as the largest it holds.
func (p SlidingCounterWord) Pack(s SlidingCounterState) uint64 {
	return uint64(s.Window-p.base)<<(2*p.cb) | min(uint64(s.Prev), p.mask)<<p.cb | min(uint64(s.Curr), p.mask)
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
