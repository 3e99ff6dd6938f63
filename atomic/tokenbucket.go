package atomic

import (
	satomic "sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// tbCell is a token bucket packed in one word: the single-key
// [TokenBucket]'s state.
//
//	bits[0:64]  the state in scaled units of 1/L' ns (L' = Limit/gcd(Limit,
//	            Window)), as kernel.TokenBucket.Pack writes it: the TAT
//	            times L' plus the fraction, biased by 2^63, so that 0 is a
//	            full bucket. When Window/Limit is whole nanoseconds, L' = 1
//	            and the word is the TAT in nanoseconds of the limiter's clock,
//	            exactly kernel.TokenBucketState.TAT.
//
// Horizon: a state packs while its TAT lies within ±(MaxInt64/L' − 1) ns of
// the clock's origin (kernel.TokenBucket.Horizon): every int64 TAT for L' =
// 1, ±97.4 years for 3 per second, ±41.8 years for 7 per minute, ±10.7 days
// for 9,999 per second. Past it nothing wraps and no decision changes: a
// state that does not fit is spilled (hold.go), kept in a record under the
// cell's hold mutex with the cell held, and decided there by the same
// kernel, exactly and with no allocation, but under a mutex rather than by
// one CAS, until a state fits again. TestPackHorizon and
// TestTokenBucketSpillBoundary pin the boundary; TestTokenBucketSpillHammer
// and TestSpillReservations race and replay the spill.
//
// The word 2 is the held value (see hold.go), and the word 1 the tombstone
// of internal/keyed's held protocol, which only a store's eviction writes, so a
// single-key bucket never meets it. Pack never returns either: with L' = 1,
// every TAT the kernel writes is a reading clamped to at least -(2^62-1)
// ns, plus at least one nanosecond of cost; with L' > 1 every packed value
// is at least MinInt64 + L' + 1 before the bias. So a bucket is held only
// by a reservation or a spill.
type tbCell struct {
	w satomic.Uint64
}

const (
	tbTombstone = kernel.TokenBucketTomb
	tbHeld      = kernel.TokenBucketHeld
)

// The methods of holdCell (hold.go).

func (c *tbCell) Load() uint64 { return c.w.Load() }

func (c *tbCell) State(k *kernel.TokenBucket, w uint64) (kernel.TokenBucketState, bool, bool) {
	return k.Unpack(w), w == tbHeld, w == tbTombstone
}

func (c *tbCell) Fits(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	_, ok := k.Pack(s)
	return ok
}

func (c *tbCell) CAS(k *kernel.TokenBucket, old uint64, s kernel.TokenBucketState) bool {
	w, _ := k.Pack(s) // the caller checked that s fits
	return c.w.CompareAndSwap(old, w)
}

func (c *tbCell) CASHeld(old uint64) bool { return c.w.CompareAndSwap(old, tbHeld) }

func (c *tbCell) Release(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	w, ok := k.Pack(s)
	if ok {
		c.w.Store(w)
	}
	return ok
}

func (c *tbCell) Bury() { c.w.Store(tbTombstone) }

// try is one attempt of the packed bucket's CAS loop, on the word old: it
// decides, and publishes the new state if there is one. done is false if
// the CAS failed, and the caller must load the word again and retry.
//
// The tempting wrong version loads the word, decides, and Stores the result.
// Two goroutines that load the same word both see the last token and both
// Store a bucket with it spent: two admissions for one token, and no data
// race for the race detector to report. The CAS publishes a decision only if
// the word is still the one it was computed from; otherwise the goroutine
// recomputes from the new word.
//
// Linearization point: the successful CompareAndSwap for an admission (to
// the new word, or to the held value when the new state is past the word's
// horizon and spills: see spill); the Load that returned the word it was
// computed from, for a denial or a probe (they publish nothing). A stale
// reading of now needs no clamp here: the kernel charges the debt the bucket
// has at that reading, which is never less than at a later one, and the TAT
// it publishes never moves backwards.
func (c *tbCell) try(k *packedKernel, now time.Duration, n int, old uint64) (v kernel.Verdict, done bool) {
	s := k.Unpack(old)
	before := s
	v = k.Decide(&s, now, n)
	if s == before { // nothing to publish: a denial, a probe, or a saturated TAT
		return v, true
	}
	w, ok := k.Pack(s)
	if !ok {
		return v, k.spill(c, old, s)
	}
	hook.Between(hook.BeforeCAS)
	return v, c.w.CompareAndSwap(old, w)
}

// decide is the single-key bucket's CAS loop (see try); a held bucket is
// decided under its hold's mutex (hold.go).
func (c *tbCell) decide(k *packedKernel, now time.Duration, n int) kernel.Verdict {
	for {
		old := c.w.Load()
		if old == tbHeld {
			if v, o := k.decideHeld(c, now, n); o == keyed.Decided {
				return v
			}
			continue
		}
		if v, done := c.try(k, now, n, old); done {
			return v
		}
	}
}

// tbSnapCell is a token bucket as an immutable snapshot: the single-key
// [TokenBucketSnapshot]'s state. nil is a full bucket. Each admission publishes a new
// 16-byte snapshot; a snapshot is never modified after it is published, so a
// goroutine that loaded it may read it without synchronisation, and pointer
// identity rules out ABA (a snapshot's address is not reused while anyone
// holds it). tbSnapTombstone, a snapshot no cell ever publishes, is the
// tombstone of internal/keyed's held protocol, which a single key never meets.
type tbSnapCell struct {
	p satomic.Pointer[kernel.TokenBucketState]
}

var (
	tbSnapTombstone = new(kernel.TokenBucketState)
	tbSnapHeld      = new(kernel.TokenBucketState) // the held value (hold.go)
)

// The methods of holdCell (hold.go).

func (c *tbSnapCell) Load() *kernel.TokenBucketState { return c.p.Load() }

func (c *tbSnapCell) State(_ *kernel.TokenBucket, p *kernel.TokenBucketState) (s kernel.TokenBucketState, held, tomb bool) {
	switch p {
	case nil:
		return s, false, false
	case tbSnapHeld:
		return s, true, false
	case tbSnapTombstone:
		return s, false, true
	}
	return *p, false, false
}

func (c *tbSnapCell) Fits(*kernel.TokenBucket, kernel.TokenBucketState) bool { return true }

func (c *tbSnapCell) CAS(_ *kernel.TokenBucket, old *kernel.TokenBucketState, s kernel.TokenBucketState) bool {
	return c.p.CompareAndSwap(old, &s)
}

func (c *tbSnapCell) CASHeld(old *kernel.TokenBucketState) bool {
	return c.p.CompareAndSwap(old, tbSnapHeld)
}

func (c *tbSnapCell) Release(_ *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	c.p.Store(&s)
	return true
}

func (c *tbSnapCell) Bury() { c.p.Store(tbSnapTombstone) }

// decide is the CAS loop of the snapshot bucket; see tbCell.try for why a
// CAS and where each decision takes effect. The candidate snapshot is
// allocated once per call, on the first admission attempt, and reused
// across retries. A held bucket is decided under its hold's mutex
// (hold.go).
func (c *tbSnapCell) decide(k *snapKernel, now time.Duration, n int) (v kernel.Verdict) {
	var next *kernel.TokenBucketState
	for {
		cur := c.p.Load()
		if cur == tbSnapHeld {
			v, o := k.decideHeld(c, now, n)
			if o == keyed.Decided {
				return v
			}
			continue
		}
		var s kernel.TokenBucketState
		if cur != nil {
			s = *cur
		}
		v = k.Decide(&s, now, n)
		if !v.Allowed || n == 0 || (cur != nil && s == *cur) {
			return v
		}
		if next == nil {
			next = new(kernel.TokenBucketState)
		}
		*next = s
		hook.Between(hook.BeforeCAS)
		if c.p.CompareAndSwap(cur, next) {
			return v
		}
	}
}

// TokenBucket is a lock-free token bucket for a single key whose whole state is
// one atomic word, so that no call allocates or takes a lock: the fastest
// limiter admit has (see docs/algorithms.md for the measurements).
//
// It enforces the GCRA form of the token bucket (package admit describes the
// semantics) for any token-bucket rule, exactly: the word keeps the
// theoretical arrival time in units of 1/L' ns, L' = Limit/gcd(Limit,
// Window), in which the emission interval Window/Limit is whole. The word
// has a horizon only when Window/Limit is not whole nanoseconds: a state
// whose TAT lies more than MaxInt64/L' ns from the clock's origin (97 years
// for 3 per second, 10.7 days for 9,999 per second) is kept under a mutex
// instead, with the same decisions and no allocation, until it fits again.
// The zero value is not usable; build one with [NewTokenBucket]. It is safe
// for concurrent use.
type TokenBucket struct {
	c     tbCell
	k     packedKernel
	clock clockref.Ref
	rule  admit.Rule
}

// Rule returns the rule the limiter enforces.
func (l *TokenBucket) Rule() admit.Rule { return l.rule }

// NewTokenBucket returns a packed token bucket for rule. It returns an error
// wrapping [admit.ErrInvalidRule] for an invalid or non-token-bucket rule.
func NewTokenBucket(rule admit.Rule, opts ...admit.Option) (*TokenBucket, error) {
	k, set, err := tokenBucket(rule, opts)
	if err != nil {
		return nil, err
	}
	l := &TokenBucket{clock: clockref.New(set.Clock), rule: rule}
	l.k.init(&k)
	return l, nil
}

// Allow is AllowN(1).
//
// It is tbCell.decide(k, now, 1) with kernel.TokenBucket.AllowOne as its
// fast path, written out here so that the clock read, the load, the
// specialised arithmetic and the CAS share one frame (every call and every
// five-field Decision copied between frames costs instructions on the
// hottest path admit has). The CAS loop's reasoning, the tempting wrong
// version and the linearization point, is tbCell.try's: an admission takes
// effect at its successful CompareAndSwap. Whatever AllowOne declines (a
// denial, a reading outside its range) and a held word go to decide, which
// loads the word again and decides on what it finds.
func (l *TokenBucket) Allow() (d admit.Decision) {
	var now time.Duration
	if l.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else if l.clock.Coarse == nil {
		now = l.clock.C.Now()
	} else {
		now = l.clock.CoarseNow()
	}
	for {
		old := l.c.w.Load()
		nw, owed, ok := l.k.AllowOne(old, now)
		if !ok || old == tbHeld {
			break
		}
		hook.Between(hook.BeforeCAS)
		if l.c.w.CompareAndSwap(old, nw) {
			d.Allowed, d.Limit = true, l.rule.Limit
			d.Remaining, d.ResetAfter = l.k.OneVerdict(owed)
			return d
		}
	}
	v := l.c.decide(&l.k, now, 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN decides a request for n, with the semantics of [admit.Limiter].
func (l *TokenBucket) AllowN(n int) (d admit.Decision) {
	if n == 1 {
		return l.Allow()
	}
	v := l.c.decide(&l.k, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// TokenBucketSnapshot is a lock-free token bucket for a single key whose state
// is an immutable snapshot behind an atomic pointer. It takes any token-bucket
// rule, exact to a fraction of a nanosecond, with no horizon, at the price of
// one 16-byte allocation per admission (none per denial). [TokenBucket] takes
// every rule too and allocates nothing; prefer it. Build one with
// [NewTokenBucketSnapshot]; it is safe for concurrent use.
type TokenBucketSnapshot struct {
	c     tbSnapCell
	k     snapKernel
	clock clockref.Ref
	rule  admit.Rule
}

// Rule returns the rule the limiter enforces.
func (l *TokenBucketSnapshot) Rule() admit.Rule { return l.rule }

// NewTokenBucketSnapshot returns a snapshot token bucket for rule. It returns an
// error wrapping [admit.ErrInvalidRule] for an invalid or non-token-bucket rule.
func NewTokenBucketSnapshot(rule admit.Rule, opts ...admit.Option) (*TokenBucketSnapshot, error) {
	k, set, err := tokenBucket(rule, opts)
	if err != nil {
		return nil, err
	}
	l := &TokenBucketSnapshot{clock: clockref.New(set.Clock), rule: rule}
	l.k.init(&k)
	return l, nil
}

// Allow is AllowN(1).
func (l *TokenBucketSnapshot) Allow() (d admit.Decision) {
	v := l.c.decide(&l.k, l.clock.Now(), 1)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN decides a request for n, with the semantics of [admit.Limiter].
func (l *TokenBucketSnapshot) AllowN(n int) (d admit.Decision) {
	v := l.c.decide(&l.k, l.clock.Now(), n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.Limit(), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

func tokenBucket(rule admit.Rule, opts []admit.Option) (kernel.TokenBucket, plumb.Settings, error) {
	if rule.Algorithm != admit.TokenBucket && rule.Validate() == nil {
		return kernel.TokenBucket{}, plumb.Settings{}, wrongAlgorithm(rule, "NewTokenBucket", admit.TokenBucket)
	}
	set, err := settings(rule, opts)
	if err != nil {
		return kernel.TokenBucket{}, plumb.Settings{}, err
	}
	return *kernel.NewTokenBucket(rule), set, nil
}
