package atomic

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
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
	c, _, ok := l.obtain(key, l.clock.now())
	existing, _ := l.m.Load(key)
	return ok && c == existing
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
