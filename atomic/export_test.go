package atomic

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
)

// evictAt evicts every key fresh at reading at (no slack): the forced
// eviction of the conformance checks.
func (l *keyed[C, PC, K]) evictAt(at time.Duration) int { return l.sweepAt(at) }

// setPause makes the next call stop at the pause point and run f.
func (l *keyed[C, PC, K]) setPause(f func()) { l.pause.Store(&f) }

// ringLens returns how many cells each ring holds.
func (l *keyed[C, PC, K]) ringLens() []int {
	lens := make([]int, len(l.rings))
	for i := range l.rings {
		r := &l.rings[i]
		r.mu.Lock()
		lens[i] = r.len()
		r.mu.Unlock()
	}
	return lens
}

// loseCreationRace replays the losing side of two calls racing to create
// key, which another call has created: a call that found key missing, then
// reached obtain after the other call had stored the key's cell. It reports
// whether obtain handed back that cell.
func (l *keyed[C, PC, K]) loseCreationRace(key string) bool {
	c, _, m := l.obtain(key, l.clock.Now(), true, keeper{})
	existing, _ := l.m.Load(key)
	return m == missCell && c == existing
}

type testHooks interface {
	evictAt(time.Duration) int
	setPause(func())
}

// Hooks gives the conformance suite its view of an atomic store.
var Hooks = &conformance.StoreHooks{
	EvictAt: func(lim admit.KeyedLimiter, at time.Duration) int { return lim.(testHooks).evictAt(at) },
	Pause:   func(lim admit.KeyedLimiter, f func()) { lim.(testHooks).setPause(f) },
}

// Held reports whether the bucket's word is the held value: a reservation
// holds it, or its state is past the word's horizon (spilled).
func Held(l *TokenBucket) bool { return l.c.w.Load() == tbHeld }

// cellOf returns key's cell in l, creating it if it is missing.
func cellOf[C any, PC interface {
	*C
	kcell[K]
}, K any](l *keyed[C, PC, K], key string) *C {
	c, _, _ := l.obtain(key, 0, true, keeper{})
	return c
}

// SetState stores s, a kernel state of lim's algorithm
// (kernel.TokenBucketState, FixedWindowState or SlidingCounterState), as
// key's state in lim, a store from New, creating key if it is missing. A
// token bucket's state past its word's horizon is spilled, as an admission
// spills it; a window's must be one its word packs (a Window within the
// clock range).
func SetState(lim admit.KeyedLimiter, key string, s any) {
	switch l := lim.(type) {
	case keyedTokenBucket:
		c := cellOf(l.keyed, key)
		st := s.(kernel.TokenBucketState)
		if !c.Fits(l.k, st) {
			if !spill(l.k, c, unsafe.Pointer(c), c.w.Load(), st) {
				panic("SetState: the cell moved")
			}
			return
		}
		w, _ := l.k.Pack(st)
		c.w.Store(w)
	case keyedFixedWindow:
		cellOf(l.keyed, key).w.Store(l.k.pack(s.(kernel.FixedWindowState)))
	case keyedSlidingCounter:
		cellOf(l.keyed, key).w.Store(l.k.pack(s.(kernel.SlidingCounterState)))
	case keyedSlidingCounterSnapshot:
		st := s.(kernel.SlidingCounterState)
		cellOf(l.keyed, key).p.Store(&st)
	default:
		panic(fmt.Sprintf("SetState: %T is no store of New", lim))
	}
}

// State returns key's state in lim, as SetState takes it (a held bucket's
// from its record), or nil if key is not stored.
func State(lim admit.KeyedLimiter, key string) any {
	switch l := lim.(type) {
	case keyedTokenBucket:
		c, ok := l.m.Load(key)
		if !ok {
			return nil
		}
		switch w := c.w.Load(); w {
		case tbTombstone:
			return nil
		case tbHeld:
			st := l.k.holds.of(unsafe.Pointer(c))
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.m.M[unsafe.Pointer(c)].State
		default:
			return l.k.Unpack(w)
		}
	case keyedFixedWindow:
		if c, ok := l.m.Load(key); ok && c.w.Load() != l.k.tomb {
			return l.k.unpack(c.w.Load())
		}
	case keyedSlidingCounter:
		if c, ok := l.m.Load(key); ok && c.w.Load() != l.k.tomb {
			return l.k.unpack(c.w.Load())
		}
	case keyedSlidingCounterSnapshot:
		if c, ok := l.m.Load(key); ok && c.p.Load() != scSnapTombstone {
			if p := c.p.Load(); p != nil {
				return *p
			}
			return kernel.SlidingCounterState{}
		}
	default:
		panic(fmt.Sprintf("State: %T is no store of New", lim))
	}
	return nil
}

// AllowOne runs the fast path of lim.Allow(key) alone (kcell.allowOne) on
// key's cell at reading now, creating key if it is missing: the Verdict
// with ok true if it admitted, ok false if it declined.
func AllowOne(lim admit.KeyedLimiter, key string, now time.Duration) (kernel.Verdict, bool) {
	switch l := lim.(type) {
	case keyedTokenBucket:
		return cellOf(l.keyed, key).allowOne(l.k, now, nil)
	case keyedFixedWindow:
		return cellOf(l.keyed, key).allowOne(l.k, now, nil)
	case keyedSlidingCounter:
		return cellOf(l.keyed, key).allowOne(l.k, now, nil)
	case keyedSlidingCounterSnapshot:
		return cellOf(l.keyed, key).allowOne(l.k, now, nil)
	}
	panic(fmt.Sprintf("AllowOne: %T is no store of New", lim))
}
