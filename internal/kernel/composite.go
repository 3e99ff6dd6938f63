package kernel

import (
	"time"

	"github.com/admit-go/admit"
)

// Composite is the kernel of admit.Limits: the kernels of its rules, decided
// together, all or nothing. A request for n is admitted iff every part admits
// n at the reading; then every part is charged; if any part denies, no part's
// state changes. It adds no arithmetic of its own: each part is its rule's
// kernel, run on its own state.
//
// The Verdict: Remaining is the smallest of the parts' (after the charge),
// RetryAfter the largest of the parts' (for these algorithms a part that
// admits n at a reading t admits it at every later reading if nothing else
// arrives, so the earliest reading at which all parts admit n is the latest
// of the parts' earliest readings; the property tests check it), ResetAfter
// the largest. Which names the part that bound the decision: on a denial the
// part with the largest RetryAfter, on an admission (or a probe) the part with
// the smallest Remaining, the first in order on a tie.
type Composite struct {
	parts  []part
	limits admit.Limits
	limit  int // the smallest Limit
	allTB  bool
}

// part is one rule's kernel; exactly one of tb, fw, sl and sc is set.
type part struct {
	limit int // the rule's Limit
	tb    *TokenBucket
	fw    *FixedWindow
	sl    *SlidingLog
	sc    *SlidingCounter
}

// PartState is one part's state in a composite: the words of its kernel's
// state (token bucket: TAT, Frac; fixed window: Window, Count; sliding
// counter: Window, Prev, Curr) or, for a sliding log, its log, allocated on
// the part's first admission. The zero value is a fresh part.
type PartState struct {
	A, B, C uint64
	Log     *Log
}

// NewComposite returns the kernel of limits, which must be valid.
func NewComposite(limits admit.Limits) *Composite {
	c := &Composite{limits: limits, limit: limits.Limit(), allTB: true}
	for i := range limits.Len() {
		r := limits.At(i)
		p := part{limit: r.Limit}
		switch r.Algorithm {
		case admit.TokenBucket:
			p.tb = NewTokenBucket(r)
		case admit.FixedWindow:
			p.fw = NewFixedWindow(r)
		case admit.SlidingLog:
			p.sl = NewSlidingLog(r)
		default:
			p.sc = NewSlidingCounter(r)
		}
		if p.tb == nil {
			c.allTB = false
		}
		c.parts = append(c.parts, p)
	}
	return c
}

// Len returns the number of parts; a composite state is a []PartState of
// that length.
func (c *Composite) Len() int { return len(c.parts) }

// Limits returns the rules the kernel enforces.
func (c *Composite) Limits() admit.Limits { return c.limits }

// Limit returns the smallest Limit of the parts: the largest n ever admitted.
func (c *Composite) Limit() int { return c.limit }

// PartLimit returns the Limit of part i.
func (c *Composite) PartLimit(i int) int { return c.parts[i].limit }

// Reservable reports whether every part is a token bucket, the one algorithm
// that hands out reservations.
func (c *Composite) Reservable() bool { return c.allTB }

// TokenBucket returns part i's kernel if it is a token bucket, else nil.
func (c *Composite) TokenBucket(i int) *TokenBucket { return c.parts[i].tb }

// FixedWindow returns part i's kernel if it is a fixed window, else nil.
func (c *Composite) FixedWindow(i int) *FixedWindow { return c.parts[i].fw }

// SlidingCounter returns part i's kernel if it is a sliding counter, else nil.
func (c *Composite) SlidingCounter(i int) *SlidingCounter { return c.parts[i].sc }

// TB, FW and SC convert between a part's words and its kernel's state.
func (p *PartState) TB() TokenBucketState     { return TokenBucketState{TAT: p.A, Frac: int64(p.B)} }
func (p *PartState) SetTB(s TokenBucketState) { p.A, p.B = s.TAT, uint64(s.Frac) }
func (p *PartState) FW() FixedWindowState {
	return FixedWindowState{Window: int64(p.A), Count: int64(p.B)}
}
func (p *PartState) SetFW(s FixedWindowState) { p.A, p.B = uint64(s.Window), uint64(s.Count) }
func (p *PartState) SC() SlidingCounterState {
	return SlidingCounterState{Window: int64(p.A), Prev: int64(p.B), Curr: int64(p.C)}
}
func (p *PartState) SetSC(s SlidingCounterState) {
	p.A, p.B, p.C = uint64(s.Window), uint64(s.Prev), uint64(s.Curr)
}

// try decides n on part i's state *s without writing *s, returning the
// verdict and, if admitted, the state after the charge in *after. A sliding
// log's admission is not computed here (its log is shared, not copied): its
// verdict is the probe's, and commit charges it.
func (p *part) try(s *PartState, after *PartState, now time.Duration, n int) Verdict {
	*after = *s
	switch {
	case p.tb != nil:
		st := s.TB()
		v := p.tb.Decide(&st, now, n)
		after.SetTB(st)
		return v
	case p.fw != nil:
		st := s.FW()
		v := p.fw.Decide(&st, now, n)
		after.SetFW(st)
		return v
	case p.sc != nil:
		st := s.SC()
		v := p.sc.Decide(&st, now, n)
		after.SetSC(st)
		return v
	default:
		var empty Log
		l := s.Log
		if l == nil {
			l = &empty
		}
		if n > 0 {
			probe := p.sl.Decide(l, now, 0)
			if probe.Remaining >= n && n <= p.sl.Limit() {
				return Verdict{Allowed: true, Remaining: probe.Remaining - n} // ResetAfter filled by commit
			}
		}
		return p.sl.Decide(l, now, n) // a denial, a probe or n out of range: writes nothing
	}
}

// commitLog charges an admitted n to a sliding log part and returns its
// verdict after the charge.
func (p *part) commitLog(s *PartState, now time.Duration, n int) Verdict {
	if s.Log == nil {
		s.Log = new(Log)
	}
	return p.sl.Decide(s.Log, now, n)
}

// Decide decides a request for n at reading now on the composite state s
// (len(s) == c.Len()), all or nothing, and returns the verdict and the index
// of the part that bound it. It writes s only when it admits n > 0.
func (c *Composite) Decide(s []PartState, now time.Duration, n int) (Verdict, int) {
	// The parts' states after the charge and their verdicts are kept on the
	// stack; two parts, the common case, zero a quarter of the bytes eight
	// would.
	if len(c.parts) <= 2 {
		var after [2]PartState
		var verdicts [2]Verdict
		return c.decide(s, now, n, after[:len(c.parts)], verdicts[:len(c.parts)])
	}
	var after [admit.MaxLimits]PartState
	var verdicts [admit.MaxLimits]Verdict
	return c.decide(s, now, n, after[:len(c.parts)], verdicts[:len(c.parts)])
}

// decide is Decide with its scratch space: after and verdicts, one entry per
// part.
func (c *Composite) decide(s []PartState, now time.Duration, n int, after []PartState, verdicts []Verdict) (Verdict, int) {
	all := true
	for i := range c.parts {
		verdicts[i] = c.parts[i].try(&s[i], &after[i], now, n)
		all = all && verdicts[i].Allowed
	}
	if !all {
		return c.deny(s, now, verdicts)
	}
	if n > 0 {
		for i := range c.parts {
			if c.parts[i].sl != nil {
				verdicts[i] = c.parts[i].commitLog(&s[i], now, n)
			} else {
				s[i] = after[i]
			}
		}
	}
	var v Verdict
	v.Allowed = true
	which := 0
	for i := range c.parts {
		if i == 0 || verdicts[i].Remaining < v.Remaining {
			v.Remaining, which = verdicts[i].Remaining, i
		}
		v.ResetAfter = max(v.ResetAfter, verdicts[i].ResetAfter)
	}
	return v, which
}

// deny builds the verdict of a denial: the parts that admitted were charged
// only in their copies, so their ResetAfter is taken again from the state
// as it stays.
func (c *Composite) deny(s []PartState, now time.Duration, verdicts []Verdict) (Verdict, int) {
	var v Verdict
	which := 0
	var scratch PartState
	for i := range c.parts {
		pv := verdicts[i]
		if pv.Allowed {
			pv = c.parts[i].try(&s[i], &scratch, now, 0)
			pv.RetryAfter = 0
		}
		if pv.RetryAfter > v.RetryAfter {
			v.RetryAfter, which = pv.RetryAfter, i
		}
		v.ResetAfter = max(v.ResetAfter, pv.ResetAfter)
	}
	return v, which
}

// Allow is Decide with the Limit of the part that bound the decision.
func (c *Composite) Allow(s []PartState, now time.Duration, n int) (admit.Decision, int) {
	v, which := c.Decide(s, now, n)
	return v.Decision(c.PartLimit(which)), which
}

// Fresh reports whether every part of s is fresh at reading now.
func (c *Composite) Fresh(s []PartState, now time.Duration) bool {
	for i := range c.parts {
		p := &c.parts[i]
		switch {
		case p.tb != nil:
			st := s[i].TB()
			if !p.tb.Fresh(&st, now) {
				return false
			}
		case p.fw != nil:
			st := s[i].FW()
			if !p.fw.Fresh(&st, now) {
				return false
			}
		case p.sc != nil:
			st := s[i].SC()
			if !p.sc.Fresh(&st, now) {
				return false
			}
		default:
			if s[i].Log != nil && !p.sl.Fresh(s[i].Log, now) {
				return false
			}
		}
	}
	return true
}

// Reserve is TokenBucket.Reserve for a composite whose parts are all token
// buckets (Reservable): the reservation's wait d is the largest of the
// parts' waits at reading now, and, if d <= maxWait, every part is charged n
// as an admission at reading now+d, when the waiter proceeds (each part
// admits n there: its own wait is at most d). The binding part's state is
// then the one its own reservation at now would leave; the others are
// charged from the reading they are spent at, never earlier. When not ok, or
// for n <= 0 or n > Limit, s is left as it was.
func (c *Composite) Reserve(s []PartState, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool) {
	if n < 0 || n > c.limit {
		return admit.Never, false
	}
	if n == 0 {
		return 0, true
	}
	var d time.Duration
	for i := range c.parts {
		st := s[i].TB()
		w, _ := c.parts[i].tb.Reserve(&st, now, n, admit.Never)
		d = max(d, w)
	}
	if d > maxWait {
		return d, false
	}
	at := time.Duration(addSat(int64(clampTime(now)), int64(d)))
	for i := range c.parts {
		st := s[i].TB()
		c.parts[i].tb.Reserve(&st, at, n, 0)
		s[i].SetTB(st)
	}
	return d, true
}

// Due returns the reading at which a composite reservation that left the
// state after is due: the latest of its parts' due readings.
func (c *Composite) Due(after []PartState) time.Duration {
	due := time.Duration(minTime)
	for i := range c.parts {
		due = max(due, c.parts[i].tb.Due(after[i].TB()))
	}
	return due
}

// CompositeHold is [Hold] for a composite of token buckets: the latest
// reservation on a key that can still be cancelled, with the states of all
// its parts before and after it.
type CompositeHold struct {
	Ticket uint64
	Before [admit.MaxLimits]PartState
	After  [admit.MaxLimits]PartState
	Seen   time.Duration
}

// Observe is TokenBucket.Observe for a composite: it shows h a reading now of
// a key whose state is s and reports whether h is still live (s is the state
// its reservation left and it is not due at the newest reading seen).
func (c *Composite) Observe(h *CompositeHold, s []PartState, now time.Duration) bool {
	h.Seen = max(h.Seen, clampTime(now))
	if h.Ticket == 0 {
		return false
	}
	for i := range c.parts {
		if s[i] != h.After[i] {
			return false
		}
	}
	return c.Due(h.After[:len(c.parts)]) > h.Seen
}

// CancelHold is TokenBucket.CancelHold for a composite: it gives back, in
// every part, the tokens of the reservation whose ticket is ticket, if h is
// that reservation's and still live at reading now. ok and drop are
// CancelHold's.
func (c *Composite) CancelHold(s []PartState, h *CompositeHold, ticket uint64, now time.Duration) (ok, drop bool) {
	if ticket == 0 || h.Ticket != ticket {
		return false, false
	}
	if !c.Observe(h, s, now) {
		return false, true
	}
	copy(s, h.Before[:len(c.parts)])
	return true, true
}

// ReserveHold is TokenBucket.ReserveHold for a composite: it shows h the
// reading, reserves, and replaces *h with the new reservation's hold if it
// must wait (returning its ticket), or drops *h if it is no longer live.
func (c *Composite) ReserveHold(s []PartState, h *CompositeHold, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool, uint64) {
	seen := clampTime(now)
	if h.Ticket != 0 {
		c.Observe(h, s, now)
		seen = h.Seen
	}
	var before [admit.MaxLimits]PartState
	copy(before[:], s)
	d, ok := c.Reserve(s, now, n, maxWait)
	if ok && n > 0 && d > 0 && c.Due(s) > seen {
		t := nextTicket()
		*h = CompositeHold{Ticket: t, Before: before, Seen: seen}
		copy(h.After[:], s)
		return d, ok, t
	}
	if h.Ticket != 0 && !c.Observe(h, s, now) {
		*h = CompositeHold{}
	}
	return d, ok, 0
}
