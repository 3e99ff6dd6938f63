package stress

import (
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// A spec is the sequential specification of one rule: the pure kernel of its
// algorithm behind a persistent (never mutated) state, so that the replay
// oracle can branch from any state and porcupine's Step can stay pure. States
// are opaque values of type any; compare them with equal, never with ==.
type spec interface {
	rule() admit.Rule
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
	switch rule.Algorithm {
	case admit.TokenBucket:
		return &kspec[kernel.TokenBucketState]{r: rule, k: kernel.NewTokenBucket(rule)}
	case admit.FixedWindow:
		return &kspec[kernel.FixedWindowState]{r: rule, k: kernel.NewFixedWindow(rule)}
	case admit.SlidingLog:
		return &slSpec{r: rule, k: kernel.NewSlidingLog(rule)}
	case admit.SlidingCounter:
		return &kspec[kernel.SlidingCounterState]{r: rule, k: kernel.NewSlidingCounter(rule)}
	}
	panic(fmt.Sprintf("stress: no spec for %v", rule))
}

var hashSeed = maphash.MakeSeed()

// kspec is the spec of a kernel whose state is a comparable value (every
// algorithm but the sliding log): a state is copied by assignment.
type kspec[S comparable] struct {
	r admit.Rule
	k kernel.Kernel[S]
}

func (p *kspec[S]) rule() admit.Rule { return p.r }
func (p *kspec[S]) init() any        { var s S; return s }

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
	r admit.Rule
	k *kernel.SlidingLog
}

type slState struct {
	ts  []time.Duration // ascending; every entry was live at the last admission
	log *kernel.Log     // the kernel's log holding exactly ts; read only
}

func (p *slSpec) rule() admit.Rule { return p.r }
func (p *slSpec) init() any        { return slState{log: new(kernel.Log)} }

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
