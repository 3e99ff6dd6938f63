package mapstore

import (
	"testing"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// TestShardSize pins the padding: a shard fills exactly one 128-byte pair of
// cache lines, whatever its key and state types, so neighbouring shards'
// locks never share one; and the words insertions write (the key count and
// makeRoom's cursor) have 128-byte stretches to themselves on both sides.
func TestShardSize(t *testing.T) {
	sizes := map[string]uintptr{
		"token-bucket packed":    unsafe.Sizeof(shard[string, uint64]{}),
		"token-bucket":           unsafe.Sizeof(shard[string, kernel.TokenBucketState]{}),
		"fixed-window":           unsafe.Sizeof(shard[string, kernel.FixedWindowState]{}),
		"sliding-log":            unsafe.Sizeof(shard[string, kernel.Log]{}),
		"sliding-counter":        unsafe.Sizeof(shard[string, kernel.SlidingCounterState]{}),
		"sliding-counter hashed": unsafe.Sizeof(shard[uint64, kernel.SlidingCounterState]{}),
	}
	for name, size := range sizes {
		if size != keyed.CacheLinePad {
			t.Errorf("shard for %s is %d bytes, want %d", name, size, keyed.CacheLinePad)
		}
	}
}

// TestStateBehindPointer: the map store keeps each key's state behind a
// pointer in its shard's map (map[K]*S; docs/keyed-stores.md, "The three
// stores"), and a call on a stored key decides on that state in place: the
// pointer the map holds for a key is the one it held before admissions,
// denials and probes, for a sliding log and for a composite's parts.
func TestStateBehindPointer(t *testing.T) {
	fake := clock.NewFake()
	set := plumb.Settings{Clock: fake, Shards: 1}
	log := New(admit.Rule{Algorithm: admit.SlidingLog, Limit: 2, Window: time.Hour}, set)
	comp := NewLimits(mustLimits(t, "fixed-window,2,1h + sliding-counter,5,1h"), set)
	for _, c := range []struct {
		name  string
		lim   admit.KeyedLimiter
		state func() unsafe.Pointer
	}{
		{"sliding-log", log, func() unsafe.Pointer { return unsafe.Pointer(log.(*fullKeys[kernel.Log]).shards[0].m["k"]) }},
		{"composite", comp, func() unsafe.Pointer {
			return unsafe.Pointer(comp.(*compFullKeys[[2]kernel.PartState]).shards[0].m["k"])
		}},
	} {
		if !c.lim.Allow("k").Allowed {
			t.Fatalf("%s: the first Allow(k) was denied", c.name)
		}
		p := c.state()
		if p == nil {
			t.Fatalf("%s: no state stored for k", c.name)
		}
		for i, n := range []int{1, 1, 0} { // admitted, denied, a probe
			c.lim.AllowN("k", n)
			if q := c.state(); q != p {
				t.Errorf("%s: call %d, AllowN(k, %d): the map holds the state at %p, after %p; want it decided in place", c.name, i+2, n, q, p)
			}
		}
	}
}
