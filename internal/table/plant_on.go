//go:build admitstress

package table

import (
	"sync/atomic"

	"github.com/admit-go/admit/internal/hook"
)

// plantUnfrozen, when set, makes rebuilds copy each word without the
// CompareAndSwap that freezes it: the tempting wrong version of the
// rebuild, kept for the stress harness's self-test (PlantUnfrozenRebuild).
var plantUnfrozen atomic.Bool

// unfrozen reports whether rebuilds copy words without freezing them.
func unfrozen() bool { return plantUnfrozen.Load() }

// PlantUnfrozenRebuild turns the planted bug on or off, for every table of
// the process, in builds with the tag admitstress only: a rebuild then
// loads each word and copies it, leaving the old slot live, so a call that
// loaded the old table publishes into it after the copy and its admission
// is lost with the old table (the key's next calls see the copied, older
// state: admissions beyond the rule). The stress harness must catch it.
func PlantUnfrozenRebuild(on bool) { plantUnfrozen.Store(on) }

// plantLockFreeReset, when set, makes Reset find the key's slot without the
// shard's mutex and give up when it meets a tombstone: the tempting wrong
// version, kept for the stress harness's self-test (PlantLockFreeReset).
var plantLockFreeReset atomic.Bool

func lockFreeReset() bool { return plantLockFreeReset.Load() }

// PlantLockFreeReset turns the planted bug on or off, for every table of the
// process, in builds with the tag admitstress only: Reset then loads the
// shard's table and CASes the key's word to the zero word without the
// shard's mutex, so a rebuild can freeze the slot under it, and the reset,
// finding the tombstone, is lost (the key keeps its spent budget in the new
// table). The stress harness must catch it.
func PlantLockFreeReset(on bool) { plantLockFreeReset.Store(on) }

// resetLockFree is the planted Reset.
func (t *Table) resetLockFree(key string) {
	h, k0, k1 := t.hash(key)
	tb := t.shards[h>>t.shift].tab.Load()
	if tb == nil {
		return
	}
	i, ok := tb.find(tagOf(h), k0, k1, key, t.hashed, t.sbits)
	if !ok {
		return
	}
	p := &tb.slot(i)[1]
	for {
		w := p.Load()
		if w == t.tomb || w == t.held || w == 0 {
			return // BUG: a tombstone may be a rebuild's freeze, not an eviction
		}
		hook.Between(hook.BeforeCAS)
		if p.CompareAndSwap(w, 0) {
			return
		}
	}
}
