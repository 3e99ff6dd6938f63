package mapstore

import (
	"testing"
	"unsafe"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
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
		if size != layout.CacheLinePad {
			t.Errorf("shard for %s is %d bytes, want %d", name, size, layout.CacheLinePad)
		}
	}
}
