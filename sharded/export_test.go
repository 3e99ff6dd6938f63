package sharded

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
)

// evictAt evicts every key fresh at reading at (no slack): the forced
// eviction of the conformance checks.
func (l *store[KT, S]) evictAt(at time.Duration) int { return l.sweepAt(at) }

// setPause makes the next call stop at the pause point and run f.
func (l *store[KT, S]) setPause(f func()) { l.pause.Store(&f) }

// shardLens returns how many keys each shard holds.
func (l *store[KT, S]) shardLens() []int {
	lens := make([]int, len(l.shards))
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		lens[i] = len(sh.m)
		sh.mu.Unlock()
	}
	return lens
}

type testHooks interface {
	evictAt(time.Duration) int
	setPause(func())
}

// Hooks gives the conformance suite its view of a sharded store.
var Hooks = &conformance.StoreHooks{
	EvictAt: func(lim admit.KeyedLimiter, at time.Duration) int { return lim.(testHooks).evictAt(at) },
	Pause:   func(lim admit.KeyedLimiter, f func()) { lim.(testHooks).setPause(f) },
}
