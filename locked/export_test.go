package locked

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
)

// evictAt evicts every key fresh at reading at (no slack): the forced
// eviction of the conformance checks.
func (l *keyed[S, K]) evictAt(at time.Duration) int { return l.sweepAt(at) }

// setPause makes the next call stop at the pause point and run f.
func (l *keyed[S, K]) setPause(f func()) { l.pause.Store(&f) }

// stripeLens returns how many keys each stripe holds.
func (l *keyed[S, K]) stripeLens() []int {
	lens := make([]int, len(l.stripes))
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		lens[i] = len(st.m)
		st.mu.Unlock()
	}
	return lens
}

type testHooks interface {
	evictAt(time.Duration) int
	setPause(func())
}

// Hooks gives the conformance suite its view of a locked store.
var Hooks = &conformance.StoreHooks{
	EvictAt: func(lim admit.KeyedLimiter, at time.Duration) int { return lim.(testHooks).evictAt(at) },
	Pause:   func(lim admit.KeyedLimiter, f func()) { lim.(testHooks).setPause(f) },
}
