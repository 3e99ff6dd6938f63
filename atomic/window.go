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

// fwCell is one key's packed fixed window, with fwCodec's bit map: the
// single-key [FixedWindow]'s state, and a keyed store's cell (name is the
// key there). The keyed store's tombstone is ^mask: Count 0 with every index
// bit set. The cell never publishes a Count of 0 (it publishes only after an
// admission), and its zero word is a fresh key, so no state takes the
// tombstone's value.
type fwCell struct {
	w    satomic.Uint64
	name string
}

func (c *fwCell) key() string       { return c.name }
func (c *fwCell) setKey(key string) { c.name = key }

// try is one attempt of the packed window's CAS loop, on the word old; done
// is as for tbCell.try. A Load, a decision and
// a Store would let two goroutines both take the window's last slot; the CAS
// publishes a count only if the word is still the one it was computed from.
//
// Linearization point: the successful CompareAndSwap for an admission; the
// Load of the word it decided on, for a denial or a probe. A stale reading that
// falls in a window older than the word's is clamped by the kernel to the
// word's window, so it can never reopen an old window: the word's index never
// moves backwards.
func (c *fwCell) try(k *fwCodec, now time.Duration, n int, old uint64) (v kernel.Verdict, done bool) {
	s := k.unpack(old, k.k.Index(now))
	v = k.k.Decide(&s, now, n)
	if !v.Allowed || n == 0 {
		return v, true
	}
	hook.Between(hook.BeforeCAS)
	return v, c.w.CompareAndSwap(old, k.pack(s))
}

// decide is the single-key window's CAS loop (see try).
func (c *fwCell) decide(k *fwCodec, now time.Duration, n int) kernel.Verdict {
	for {
		if v, done := c.try(k, now, n, c.w.Load()); done {
			return v
		}
	}
}

// decideKeyed is the keyed store's CAS loop; see tbCell.decideKeyed.
func (c *fwCell) decideKeyed(k *fwCodec, now time.Duration, n int, pause func()) (kernel.Verdict, bool) {
	old := c.w.Load()
	if pause != nil {
		pause()
	}
	for old != ^k.mask {
		if v, done := c.try(k, now, n, old); done {
			return v, true
		}
		old = c.w.Load()
	}
	return kernel.Verdict{}, false
}

// evict is tbCell.evict for a packed window.
func (c *fwCell) evict(k *fwCodec, at time.Duration, floor *paddedInt64) bool {
	old := c.w.Load()
	if old == ^k.mask {
		return false
	}
	s := k.unpack(old, k.k.Index(at))
	if !k.k.Fresh(&s, at) {
		return false
	}
	floor.raise(int64(at))
	hook.Between(hook.BeforeCAS)
	return c.w.CompareAndSwap(old, ^k.mask)
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

// scCell is one key's packed sliding counter, with scCodec's bit map, for
// the single-key limiter and the keyed store. The tombstone is ^mask: Curr 0
// with every other bit set. The cell publishes only after an admission, when
// Curr >= 1, and its zero word is a fresh key, so no state takes the
// tombstone's value. See fwCell.try for the CAS loop's reasoning, which is
// the same.
type scCell struct {
	w    satomic.Uint64
	name string
}

func (c *scCell) key() string       { return c.name }
func (c *scCell) setKey(key string) { c.name = key }

func (c *scCell) try(k *scCodec, now time.Duration, n int, old uint64) (v kernel.Verdict, done bool) {
	s := k.unpack(old, k.k.Index(now))
	v = k.k.Decide(&s, now, n)
	if !v.Allowed || n == 0 {
		return v, true
	}
	hook.Between(hook.BeforeCAS)
	return v, c.w.CompareAndSwap(old, k.pack(s))
}

func (c *scCell) decide(k *scCodec, now time.Duration, n int) kernel.Verdict {
	for {
		if v, done := c.try(k, now, n, c.w.Load()); done {
			return v
		}
	}
}

func (c *scCell) decideKeyed(k *scCodec, now time.Duration, n int, pause func()) (kernel.Verdict, bool) {
	old := c.w.Load()
	if pause != nil {
		pause()
	}
	for old != ^k.mask {
		if v, done := c.try(k, now, n, old); done {
			return v, true
		}
		old = c.w.Load()
	}
	return kernel.Verdict{}, false
}

func (c *scCell) evict(k *scCodec, at time.Duration, floor *paddedInt64) bool {
	old := c.w.Load()
	if old == ^k.mask {
		return false
	}
	s := k.unpack(old, k.k.Index(at))
	if !k.k.Fresh(&s, at) {
		return false
	}
	floor.raise(int64(at))
	hook.Between(hook.BeforeCAS)
	return c.w.CompareAndSwap(old, ^k.mask)
}

// scSnapCell is one key's sliding counter as an immutable snapshot, for
// limits too large to pack; nil is fresh and scSnapTombstone the keyed
// store's tombstone. See tbSnapCell for the snapshot discipline.
type scSnapCell struct {
	p    satomic.Pointer[kernel.SlidingCounterState]
	name string
}

var scSnapTombstone = new(kernel.SlidingCounterState)

func (c *scSnapCell) key() string       { return c.name }
func (c *scSnapCell) setKey(key string) { c.name = key }

// decide is decideKeyed for the single-key limiter, which has no tombstone.
func (c *scSnapCell) decide(k *kernel.SlidingCounter, now time.Duration, n int) kernel.Verdict {
	v, _ := c.decideKeyed(k, now, n, nil)
	return v
}

// decideKeyed is tbSnapCell.decideKeyed for a sliding counter.
func (c *scSnapCell) decideKeyed(k *kernel.SlidingCounter, now time.Duration, n int, pause func()) (v kernel.Verdict, live bool) {
	var next *kernel.SlidingCounterState
	for {
		cur := c.p.Load()
		if pause != nil {
			pause()
			pause = nil
		}
		if cur == scSnapTombstone {
			return v, false
		}
		var s kernel.SlidingCounterState
		if cur != nil {
			s = *cur
		}
		v = k.Decide(&s, now, n)
		if !v.Allowed || n == 0 {
			return v, true
		}
		if next == nil {
			next = new(kernel.SlidingCounterState)
		}
		*next = s
		hook.Between(hook.BeforeCAS)
		if c.p.CompareAndSwap(cur, next) {
			return v, true
		}
	}
}

func (c *scSnapCell) evict(k *kernel.SlidingCounter, at time.Duration, floor *paddedInt64) bool {
	cur := c.p.Load()
	if cur == scSnapTombstone {
		return false
	}
	var s kernel.SlidingCounterState
	if cur != nil {
		s = *cur
	}
	if !k.Fresh(&s, at) {
		return false
	}
	floor.raise(int64(at))
	hook.Between(hook.BeforeCAS)
	return c.p.CompareAndSwap(cur, scSnapTombstone)
}

// slidingCounter is the single-key sliding counter packed in one word
// (Limit < 2^16), returned by NewLimiter. Like [FixedWindow], it has a
// concrete type so that its CAS loop inlines into AllowN.
type slidingCounter struct {
	c     scCell
	codec *scCodec
	clock clock.Clock
}

func (l *slidingCounter) Allow() admit.Decision { return l.AllowN(1) }

// AllowN fills its named result from the cell's Verdict (see kernel.Verdict).
func (l *slidingCounter) AllowN(n int) (d admit.Decision) {
	v := l.c.decide(l.codec, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.codec.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// slidingCounterSnapshot is the single-key sliding counter for limits too
// large to pack, returned by NewLimiter.
type slidingCounterSnapshot struct {
	c     scSnapCell
	k     *kernel.SlidingCounter
	clock clock.Clock
}

func (l *slidingCounterSnapshot) Allow() admit.Decision { return l.AllowN(1) }

// AllowN fills its named result from the cell's Verdict (see kernel.Verdict).
func (l *slidingCounterSnapshot) AllowN(n int) (d admit.Decision) {
	v := l.c.decide(l.k, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

func wrongAlgorithm(rule admit.Rule, constructor string, want admit.Algorithm) error {
	return fmt.Errorf("atomic: %w: %s needs a %v rule, not %v; use New or NewLimiter for any algorithm",
		admit.ErrInvalidRule, constructor, want, rule)
}
