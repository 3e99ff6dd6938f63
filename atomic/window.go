package atomic

import (
	"fmt"
	"math/bits"
	satomic "sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// fwCodec packs a fixed window's state into one word:
//
//	bits[0:cb)   Count, 0..Limit, where cb = bits.Len(Limit) (at most 31)
//	bits[cb:64)  the window index k = floor(now/Window), modulo 2^(64-cb)
//
// The word keeps only the index's low 64-cb bits (at least 33); unpack restores
// the rest from the caller's own window index, taking the stored window to be
// the one nearest to it with those low bits. That is exact whenever the two
// are less than 2^(63-cb) windows apart. Since a valid rule has Window >= Limit
// ns >= 2^(cb-1) ns, that span is at least 2^62 ns: the restored index is
// exact for any two readings less than 2^62 ns minus one window apart (146
// years), whatever the rule (TestFixedWindowBitBudget checks it). Horizon: for readings further
// apart than that, an old count could be read as the current window's and the
// key denied until that window ends; it is never admitted beyond the limit. A
// zero Count is a fresh key whatever the index bits say, so the zero word is
// an empty window.
type fwCodec struct {
	k    kernel.FixedWindow
	cb   uint
	mask uint64
}

func newFWCodec(rule admit.Rule) *fwCodec {
	cb := uint(bits.Len(uint(rule.Limit)))
	return &fwCodec{k: *kernel.NewFixedWindow(rule), cb: cb, mask: 1<<cb - 1}
}

func (c *fwCodec) pack(s kernel.FixedWindowState) uint64 {
	return uint64(s.Window)<<c.cb | uint64(s.Count)
}

// unpack restores the state from word w, given the window index idx of the
// caller's reading.
func (c *fwCodec) unpack(w uint64, idx int64) kernel.FixedWindowState {
	count := w & c.mask
	if count == 0 {
		return kernel.FixedWindowState{}
	}
	// (idx - stored) modulo 2^(64-cb), sign-extended: the signed distance from
	// the stored window to idx.
	diff := int64((uint64(idx)-w>>c.cb)<<c.cb) >> c.cb
	return kernel.FixedWindowState{Window: idx - diff, Count: int64(count)}
}

// fwCell is one key's packed fixed window; see fwCodec for the bit map.
type fwCell struct{ w satomic.Uint64 }

// decide is the CAS loop of the packed window. A Load, a decision and a Store
// would let two goroutines both take the window's last slot; the CAS publishes
// a count only if the word is still the one it was computed from.
//
// Linearization point: the successful CompareAndSwap for an admission; the
// Load of the word it decided on, for a denial or a probe. A stale reading that
// falls in a window older than the word's is clamped by the kernel to the
// word's window, so it can never reopen an old window: the word's index never
// moves backwards.
func (c *fwCell) decide(k *fwCodec, now time.Duration, n int) kernel.Verdict {
	idx := k.k.Index(now)
	for {
		old := c.w.Load()
		s := k.unpack(old, idx)
		v := k.k.Decide(&s, now, n)
		if !v.Allowed || n == 0 {
			return v
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, k.pack(s)) {
			return v
		}
	}
}

// FixedWindow is a lock-free fixed window for a single key, its count and
// window index packed into one atomic word (the bit map and its horizon are
// documented on the packing code): no call allocates or takes a lock. Build one
// with [NewFixedWindow]; it is safe for concurrent use.
type FixedWindow struct {
	c     fwCell
	codec *fwCodec
	clock clock.Clock
}

// NewFixedWindow returns a packed fixed window for rule. It returns an error
// wrapping [admit.ErrInvalidRule] for an invalid or non-fixed-window rule.
func NewFixedWindow(rule admit.Rule, opts ...admit.Option) (*FixedWindow, error) {
	if rule.Algorithm != admit.FixedWindow && rule.Validate() == nil {
		return nil, wrongAlgorithm(rule, "NewFixedWindow", admit.FixedWindow)
	}
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	return &FixedWindow{codec: newFWCodec(rule), clock: set.Clock}, nil
}

// Allow is AllowN(1).
func (l *FixedWindow) Allow() (d admit.Decision) {
	v := l.c.decide(l.codec, l.clock.Now(), 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.codec.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN decides a request for n, with the semantics of [admit.Limiter].
func (l *FixedWindow) AllowN(n int) (d admit.Decision) {
	v := l.c.decide(l.codec, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.codec.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// scCodec packs a sliding counter's state into one word, for Limit < 2^16:
//
//	bits[0:cb)    Curr, the current window's count (cb = bits.Len(Limit) <= 16)
//	bits[cb:2cb)  Prev, the previous window's count
//	bits[2cb:64)  the current window's index, modulo 2^(64-2cb) (at least 32 bits)
//
// The index is restored as for the fixed window (see fwCodec), exactly while
// the stored and the caller's windows are less than 2^(63-2cb) windows apart:
// at least 2^31 windows (68 years of one-second windows), and never less than
// 2^(62-cb) ns (19 hours) since Window >= Limit ns. Horizon: readings further
// apart than that can have old counts weighed as current; the key is then
// denied more, never admitted beyond the limit. Both counts zero is a fresh
// key, so the zero word is fresh. Larger limits use a snapshot (scSnapCell).
type scCodec struct {
	k    kernel.SlidingCounter
	cb   uint
	mask uint64
}

// maxPackedCounterLimit is the largest Limit whose sliding counter packs.
const maxPackedCounterLimit = 1<<16 - 1

func newSCCodec(rule admit.Rule) (*scCodec, bool) {
	if rule.Limit > maxPackedCounterLimit {
		return nil, false
	}
	cb := uint(bits.Len(uint(rule.Limit)))
	return &scCodec{k: *kernel.NewSlidingCounter(rule), cb: cb, mask: 1<<cb - 1}, true
}

func (c *scCodec) pack(s kernel.SlidingCounterState) uint64 {
	return uint64(s.Window)<<(2*c.cb) | uint64(s.Prev)<<c.cb | uint64(s.Curr)
}

func (c *scCodec) unpack(w uint64, idx int64) kernel.SlidingCounterState {
	curr, prev := w&c.mask, w>>c.cb&c.mask
	if curr == 0 && prev == 0 {
		return kernel.SlidingCounterState{}
	}
	shift := 2 * c.cb
	diff := int64((uint64(idx)-w>>shift)<<shift) >> shift
	return kernel.SlidingCounterState{Window: idx - diff, Prev: int64(prev), Curr: int64(curr)}
}

// scCell is one key's packed sliding counter; see scCodec for the bit map and
// fwCell.decide for the CAS loop's reasoning, which is the same.
type scCell struct{ w satomic.Uint64 }

func (c *scCell) decide(k *scCodec, now time.Duration, n int) kernel.Verdict {
	idx := k.k.Index(now)
	for {
		old := c.w.Load()
		s := k.unpack(old, idx)
		v := k.k.Decide(&s, now, n)
		if !v.Allowed || n == 0 {
			return v
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, k.pack(s)) {
			return v
		}
	}
}

// scSnapCell is one key's sliding counter as an immutable snapshot, for limits
// too large to pack; nil is fresh. See tbSnapCell for the snapshot discipline.
type scSnapCell struct {
	p satomic.Pointer[kernel.SlidingCounterState]
}

func (c *scSnapCell) decide(k *kernel.SlidingCounter, now time.Duration, n int) kernel.Verdict {
	var next *kernel.SlidingCounterState
	for {
		cur := c.p.Load()
		var s kernel.SlidingCounterState
		if cur != nil {
			s = *cur
		}
		v := k.Decide(&s, now, n)
		if !v.Allowed || n == 0 {
			return v
		}
		if next == nil {
			next = new(kernel.SlidingCounterState)
		}
		*next = s
		hook.Between(hook.BeforeCAS)
		if c.p.CompareAndSwap(cur, next) {
			return v
		}
	}
}

func wrongAlgorithm(rule admit.Rule, constructor string, want admit.Algorithm) error {
	return fmt.Errorf("atomic: %w: %s needs a %v rule, not %v; use New or NewLimiter for any algorithm",
		admit.ErrInvalidRule, constructor, want, rule)
}
