package stress

import (
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// A spec is the sequential specification of one rule or of a composite: the
// pure kernel of its algorithm behind a persistent (never mutated) state, so
// that the replay oracle can branch from any state and porcupine's Step can
// stay pure. States are opaque values of type any; compare them with equal,
// never with ==.
type spec interface {
	// limits returns the rules the spec enforces: one, or a composite's.
	limits() admit.Limits
	// init returns the state of a fresh key.
	init() any
	// step decides a request for n at reading now on state s and returns
	// the Decision and the state after it. It never modifies s.
	step(s any, now time.Duration, n int) (admit.Decision, any)
	// fresh reports whether s at reading now is equivalent to a fresh key.
	fresh(s any, now time.Duration) bool
	equal(a, b any) bool
	hash(s any) uint64
}

// newSpec returns the spec of rule, which must be valid.
func newSpec(rule admit.Rule) spec {
	ls, err := admit.NewLimits(rule)
	if err != nil {
		panic(fmt.Sprintf("stress: no spec for %v: %v", rule, err))
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		return &kspec[kernel.TokenBucketState]{ls: ls, k: kernel.NewTokenBucket(rule)}
	case admit.FixedWindow:
		return &kspec[kernel.FixedWindowState]{ls: ls, k: kernel.NewFixedWindow(rule)}
	case admit.SlidingLog:
		return &slSpec{ls: ls, r: rule, k: kernel.NewSlidingLog(rule)}
	case admit.SlidingCounter:
		return &kspec[kernel.SlidingCounterState]{ls: ls, k: kernel.NewSlidingCounter(rule)}
	}
	panic(fmt.Sprintf("stress: no spec for %v", rule))
}

var hashSeed = maphash.MakeSeed()

// kspec is the spec of a kernel whose state is a comparable value (every
// algorithm but the sliding log): a state is copied by assignment.
type kspec[S comparable] struct {
	ls admit.Limits // its one rule
	k  kernel.Kernel[S]
}

func (p *kspec[S]) limits() admit.Limits { return p.ls }
func (p *kspec[S]) init() any            { var s S; return s }

func (p *kspec[S]) step(s any, now time.Duration, n int) (admit.Decision, any) {
	c := s.(S) // a copy
	d := p.k.Allow(&c, now, n)
	return d, c
}

func (p *kspec[S]) fresh(s any, now time.Duration) bool {
	c := s.(S)
	return p.k.Fresh(&c, now)
}

func (p *kspec[S]) equal(a, b any) bool { return a.(S) == b.(S) }
func (p *kspec[S]) hash(s any) uint64   { return maphash.Comparable(hashSeed, s.(S)) }

// slSpec is the spec of the sliding log. The kernel's log is a ring buffer
// that Allow updates in place, and its fields are unexported, so a state here
// is the sorted list of the log's timestamps plus a kernel log rebuilt from
// them, which is only ever read (the kernel does not write a log when it
// denies, probes or refuses). An admission rebuilds a private log by
// replaying the timestamps, lets the kernel decide on it, and that log
// becomes the new state's.
type slSpec struct {
	ls admit.Limits // its one rule, r
	r  admit.Rule
	k  *kernel.SlidingLog
}

type slState struct {
	ts  []time.Duration // ascending; every entry was live at the last admission
	log *kernel.Log     // the kernel's log holding exactly ts; read only
}

func (p *slSpec) limits() admit.Limits { return p.ls }
func (p *slSpec) init() any            { return slState{log: new(kernel.Log)} }

// rebuild returns a new kernel log holding ts.
func (p *slSpec) rebuild(ts []time.Duration) *kernel.Log {
	l := new(kernel.Log)
	for _, t := range ts {
		// Each entry is live at its own time (all were live together at a
		// later time), so the kernel admits every one.
		if !p.k.Allow(l, t, 1).Allowed {
			panic(fmt.Sprintf("stress: sliding-log spec: replaying %v refused at %v", ts, t))
		}
	}
	return l
}

func (p *slSpec) step(s any, now time.Duration, n int) (admit.Decision, any) {
	st := s.(slState)
	probe := p.k.Allow(st.log, now, 0) // writes nothing
	if n <= 0 || n > probe.Remaining {
		// A probe, or a request that does not fit: the kernel writes
		// nothing, so it may decide on the shared log.
		return p.k.Allow(st.log, now, n), st
	}
	l := p.rebuild(st.ts)
	d := p.k.Allow(l, now, n)
	if !d.Allowed {
		panic(fmt.Sprintf("stress: sliding-log spec: %d fits (remaining %d) but was refused", n, probe.Remaining))
	}
	// The admitted entries carry the effective time: the reading, or the
	// newest entry if the reading is older. Entries expire once eff-ts >= W.
	eff := now
	if len(st.ts) > 0 {
		eff = max(eff, st.ts[len(st.ts)-1])
	}
	ts := make([]time.Duration, 0, len(st.ts)+n)
	for _, t := range st.ts {
		if eff-t < p.r.Window {
			ts = append(ts, t)
		}
	}
	for range n {
		ts = append(ts, eff)
	}
	return d, slState{ts: ts, log: l}
}

func (p *slSpec) fresh(s any, now time.Duration) bool {
	return p.k.Fresh(s.(slState).log, now)
}

func (p *slSpec) equal(a, b any) bool {
	// Two lists differing only in entries expired for every future reading
	// would decide alike; treating them as different only costs porcupine
	// some caching.
	return slices.Equal(a.(slState).ts, b.(slState).ts)
}

func (p *slSpec) hash(s any) uint64 {
	ts := s.(slState).ts
	h := uint64(len(ts))
	if len(ts) > 0 {
		h = h*0x9e3779b97f4a7c15 ^ uint64(ts[0]) ^ uint64(ts[len(ts)-1])<<1
	}
	return h
}

// compositeSpec is the spec of admit.Limits, composed from the specs of its
// rules rather than taken from kernel.Composite, which the variants run: a
// request for n is admitted iff every rule's spec admits n at the reading,
// and then every rule's state moves on; if any rule denies, no state
// changes. The Decision is the one admit.Limits documents: on an admission,
// Remaining the smallest of the rules' and the Limit of the rule that has
// it; on a denial, RetryAfter the largest of the rules' (a rule that admits
// counts 0) and the Limit of the rule that has it; ResetAfter the largest,
// a rule that admits counting its ResetAfter as it stays (a probe's); ties
// go to the first rule in order. TestCompositeSpec checks it against
// kernel.Composite on random operations.
type compositeSpec struct {
	ls    admit.Limits
	parts []spec // one per rule, in order
}

// compositeState is a composite spec's state: one state per rule, in
// order. Like every state it is never modified once made.
type compositeState []any

func newCompositeSpec(ls admit.Limits) *compositeSpec {
	c := &compositeSpec{ls: ls}
	for i := range ls.Len() {
		c.parts = append(c.parts, newSpec(ls.At(i)))
	}
	return c
}

func (c *compositeSpec) limits() admit.Limits { return c.ls }

func (c *compositeSpec) init() any {
	s := make(compositeState, len(c.parts))
	for i, p := range c.parts {
		s[i] = p.init()
	}
	return s
}

func (c *compositeSpec) step(s any, now time.Duration, n int) (admit.Decision, any) {
	st := s.(compositeState)
	ds, next, all := c.each(st, now, n)
	var d admit.Decision
	which := 0
	if all {
		d.Allowed = true
		for i, pd := range ds {
			if i == 0 || pd.Remaining < d.Remaining {
				d.Remaining, which = pd.Remaining, i
			}
			d.ResetAfter = max(d.ResetAfter, pd.ResetAfter)
		}
		d.Limit = ds[which].Limit
		if n <= 0 {
			return d, st
		}
		return d, next
	}
	for i, pd := range ds {
		if pd.Allowed {
			pd, _ = c.parts[i].step(st[i], now, 0) // as it stays: nothing is charged
			pd.RetryAfter = 0
		}
		if pd.RetryAfter > d.RetryAfter {
			d.RetryAfter, which = pd.RetryAfter, i
		}
		d.ResetAfter = max(d.ResetAfter, pd.ResetAfter)
	}
	d.Limit = c.ls.At(which).Limit
	return d, st
}

// each returns every rule's own Decision on n at reading now and the
// states after them, and whether every rule admits n.
func (c *compositeSpec) each(st compositeState, now time.Duration, n int) ([]admit.Decision, compositeState, bool) {
	ds := make([]admit.Decision, len(c.parts))
	next := make(compositeState, len(c.parts))
	all := true
	for i, p := range c.parts {
		ds[i], next[i] = p.step(st[i], now, n)
		all = all && ds[i].Allowed
	}
	return ds, next, all
}

// readOnly is porcupine's check of a composite's denial or probe out of n
// at reading now on state s, whose Decision is d (see porcupine.go): the
// bounds matches checks, and a Limit naming a rule that, in s, denies n (a
// denial) or has at most the reported Remaining left (a probe). Which rule
// binds a read-only call is not monotone within a phase (a rule that binds
// early, its budget spent first, can be overtaken by one whose wait is
// longer once it runs out too), so an exact match would make it valid on an
// interval of the phase's states rather than a suffix, and porcupine's
// search would backtrack over it; "a rule that denies" and "a rule with at
// most that much left" stay true once true.
func (c *compositeSpec) readOnly(s any, now time.Duration, n int, d, out admit.Decision) bool {
	ds, _, _ := c.each(s.(compositeState), now, n)
	var bounded bool
	if out.Allowed {
		bounded = d.Allowed && out.RetryAfter == 0 && out.Remaining >= d.Remaining && out.ResetAfter <= d.ResetAfter
	} else {
		bounded = !d.Allowed && out.Remaining == 0 && (out.RetryAfter == admit.Never) == (d.RetryAfter == admit.Never) &&
			out.RetryAfter <= d.RetryAfter && out.ResetAfter <= d.ResetAfter
	}
	if !bounded {
		return false
	}
	for i, pd := range ds {
		if c.ls.At(i).Limit != out.Limit {
			continue
		}
		if (out.Allowed && pd.Remaining <= out.Remaining) || (!out.Allowed && !pd.Allowed) {
			return true
		}
	}
	return false
}

func (c *compositeSpec) fresh(s any, now time.Duration) bool {
	st := s.(compositeState)
	for i, p := range c.parts {
		if !p.fresh(st[i], now) {
			return false
		}
	}
	return true
}

func (c *compositeSpec) equal(a, b any) bool {
	x, y := a.(compositeState), b.(compositeState)
	for i, p := range c.parts {
		if !p.equal(x[i], y[i]) {
			return false
		}
	}
	return true
}

func (c *compositeSpec) hash(s any) uint64 {
	var h uint64
	for i, p := range c.parts {
		h = h*0x9e3779b97f4a7c15 ^ p.hash(s.(compositeState)[i])
	}
	return h
}
