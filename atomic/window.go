package atomic

import (
	"fmt"
	satomic "sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// fwCodec is a fixed window's kernel and its one-word packing
// (kernel.FixedWindowWord: the count and the window index as an offset from
// the clock range's first window, exact over the whole range, no horizon).
type fwCodec struct {
	k kernel.FixedWindow
	w kernel.FixedWindowWord
}

func newFWCodec(rule admit.Rule) *fwCodec {
	k := kernel.NewFixedWindow(rule)
	return &fwCodec{k: *k, w: k.Word()}
}

func (c *fwCodec) pack(s kernel.FixedWindowState) uint64 { return c.w.Pack(s) }

// unpack restores the state from word w.
func (c *fwCodec) unpack(w uint64) kernel.FixedWindowState { return c.w.Unpack(w) }

// fwCell is a packed fixed window, with fwCodec's bit map: the single-key
// [FixedWindow]'s state. Its zero word is a fresh window.
type fwCell struct {
	w satomic.Uint64
}

// try is one attempt of the packed window's CAS loop, on the word old; done
// is as for tbCell.try. A Load, a decision and
// a Store would let two goroutines both take the window's last slot; the CAS
// publishes a count only if the word is still the one it was computed from.
//
// Linearization point: the successful CompareAndSwap for an admission; the
// Load of the word it decided on, for a denial or a probe. A stale reading that
// falls in a window older than the word's is clamped by the kernel to the
// word's window, so it can never reopen an old window: the word's index never
// moves backwards. That needs the word's index exact however far the reading
// lies behind it, which fwCodec guarantees over the whole clock range.
func (c *fwCell) try(k *fwCodec, now time.Duration, n int, old uint64) (v kernel.Verdict, done bool) {
	s := k.unpack(old)
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

// FixedWindow is a lock-free fixed window for a single key, its count and
// window index packed into one atomic word, exact over the kernels' whole
// clock range (±(2^62-1) ns) for every rule: no call allocates or takes a
// lock. Build one with [NewFixedWindow]; it is safe for concurrent use.
type FixedWindow struct {
	c     fwCell
	codec *fwCodec
	clock clockref.Ref
	rule  admit.Rule
}

// Rule returns the rule the limiter enforces.
func (l *FixedWindow) Rule() admit.Rule { return l.rule }

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
	return &FixedWindow{codec: newFWCodec(rule), clock: clockref.New(set.Clock), rule: rule}, nil
}

// Allow is AllowN(1).
//
// It is fwCell.decide(codec, now, 1) with kernel.FixedWindow.AllowOne as its
// fast path, in one frame, as TokenBucket.Allow does; the CAS loop's
// reasoning and linearization point are fwCell.try's. What AllowOne declines
// (a denial, a stale reading, one outside the clock range) goes to decide.
func (l *FixedWindow) Allow() (d admit.Decision) {
	var now time.Duration
	if l.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else if l.clock.Coarse == nil {
		now = l.clock.C.Now()
	} else {
		now = l.clock.CoarseNow()
	}
	k := l.codec
	for {
		old := l.c.w.Load()
		s := k.unpack(old)
		v, ok := k.k.AllowOne(&s, now)
		if !ok {
			break
		}
		hook.Between(hook.BeforeCAS)
		if l.c.w.CompareAndSwap(old, k.pack(s)) {
			d.Allowed, d.Limit, d.Remaining, d.ResetAfter = true, l.rule.Limit, v.Remaining, v.ResetAfter
			return d
		}
	}
	v := l.c.decide(k, now, 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, k.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN decides a request for n, with the semantics of [admit.Limiter].
func (l *FixedWindow) AllowN(n int) (d admit.Decision) {
	if n == 1 {
		return l.Allow()
	}
	v := l.c.decide(l.codec, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.codec.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// scCodec is a sliding counter's kernel and its one-word packing
// (kernel.SlidingCounterWord: both counts and the window index as an offset
// from the clock range's first window, exact over the whole range for the
// rules it packs: Limit < 2^16 and Window >= 2^(2cb-1) ns). Other rules
// are not packed: newSCCodec reports them, and [NewLimiter] gives them the
// snapshot (scSnapCell).
type scCodec struct {
	k kernel.SlidingCounter
	w kernel.SlidingCounterWord
}

// maxPackedCounterLimit is the largest Limit whose sliding counter's counts
// pack.
const maxPackedCounterLimit = kernel.MaxWordLimit

// newSCCodec returns rule's packing, and whether it packs; no cell may use a
// codec that does not.
func newSCCodec(rule admit.Rule) (c *scCodec, ok bool) {
	k := kernel.NewSlidingCounter(rule)
	w, ok := k.Word()
	return &scCodec{k: *k, w: w}, ok
}

func (c *scCodec) pack(s kernel.SlidingCounterState) uint64 { return c.w.Pack(s) }

func (c *scCodec) unpack(w uint64) kernel.SlidingCounterState { return c.w.Unpack(w) }

// scCell is a packed sliding counter, with scCodec's bit map, for the
// single-key limiter; its zero word is a fresh counter. See fwCell.try for
// the CAS loop's reasoning, which is the same.
type scCell struct {
	w satomic.Uint64
}

func (c *scCell) try(k *scCodec, now time.Duration, n int, old uint64) (v kernel.Verdict, done bool) {
	s := k.unpack(old)
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

// scSnapCell is a sliding counter as an immutable snapshot, for rules that
// do not pack (see scCodec); nil is fresh. See tbSnapCell for the snapshot
// discipline.
type scSnapCell struct {
	p satomic.Pointer[kernel.SlidingCounterState]
}

// decide is tbSnapCell.decide for a sliding counter, which is never held.
func (c *scSnapCell) decide(k *kernel.SlidingCounter, now time.Duration, n int) (v kernel.Verdict) {
	var next *kernel.SlidingCounterState
	for {
		cur := c.p.Load()
		var s kernel.SlidingCounterState
		if cur != nil {
			s = *cur
		}
		v = k.Decide(&s, now, n)
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

// slidingCounter is the single-key sliding counter packed in one word, for
// the rules scCodec packs, returned by NewLimiter. Like [FixedWindow], it has
// a concrete type so that its CAS loop inlines into AllowN.
type slidingCounter struct {
	c     scCell
	codec *scCodec
	clock clockref.Ref
	rule  admit.Rule
}

func (l *slidingCounter) Rule() admit.Rule { return l.rule }

// Allow is FixedWindow.Allow for the sliding counter, with
// kernel.SlidingCounter.AllowOne as the fast path of scCell.decide.
func (l *slidingCounter) Allow() (d admit.Decision) {
	var now time.Duration
	if l.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else if l.clock.Coarse == nil {
		now = l.clock.C.Now()
	} else {
		now = l.clock.CoarseNow()
	}
	k := l.codec
	for {
		old := l.c.w.Load()
		s := k.unpack(old)
		v, ok := k.k.AllowOne(&s, now)
		if !ok {
			break
		}
		hook.Between(hook.BeforeCAS)
		if l.c.w.CompareAndSwap(old, k.pack(s)) {
			d.Allowed, d.Limit, d.Remaining, d.ResetAfter = true, l.rule.Limit, v.Remaining, v.ResetAfter
			return d
		}
	}
	v := l.c.decide(k, now, 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, k.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN fills its named result from the cell's Verdict (see kernel.Verdict).
func (l *slidingCounter) AllowN(n int) (d admit.Decision) {
	if n == 1 {
		return l.Allow()
	}
	v := l.c.decide(l.codec, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.codec.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// slidingCounterSnapshot is the single-key sliding counter for the rules
// scCodec does not pack, returned by NewLimiter.
type slidingCounterSnapshot struct {
	c     scSnapCell
	k     *kernel.SlidingCounter
	clock clockref.Ref
	rule  admit.Rule
}

func (l *slidingCounterSnapshot) Rule() admit.Rule { return l.rule }

func (l *slidingCounterSnapshot) Allow() admit.Decision { return l.AllowN(1) }

// AllowN fills its named result from the cell's Verdict (see kernel.Verdict).
func (l *slidingCounterSnapshot) AllowN(n int) (d admit.Decision) {
	v := l.c.decide(l.k, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

func wrongAlgorithm(rule admit.Rule, constructor string, want admit.Algorithm) error {
	return fmt.Errorf("%w: atomic.%s needs a %v rule, not %v; use New or NewLimiter for any algorithm",
		admit.ErrInvalidRule, constructor, want, rule)
}
