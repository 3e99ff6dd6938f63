package table

import (
	"unsafe"

	"github.com/admit-go/admit"
)

// store returns the table behind lim, a limiter New returned.
func store(lim admit.KeyedLimiter) *Table {
	if r, ok := lim.(reserver); ok {
		return r.Table
	}
	return lim.(*Table)
}

// IsTable reports whether lim is a table New returned.
func IsTable(lim admit.KeyedLimiter) bool {
	switch lim.(type) {
	case reserver, *Table:
		return true
	}
	return false
}

// Slots returns the slots of every shard's table of lim, a table.
func Slots(lim admit.KeyedLimiter) int {
	t := store(lim)
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if tb := sh.tab.Load(); tb != nil {
			n += int(tb.n)
		}
		sh.mu.Unlock()
	}
	return n
}

// SlotBytes returns the bytes of one slot of a table of full keys and of
// hashed keys.
func SlotBytes() (full, hashed uintptr) {
	f, h := newTab(8, 2), newTab(8, 1)
	w := unsafe.Sizeof(f.w[0])
	return uintptr(len(f.w)) * w / uintptr(f.n), uintptr(len(h.w)) * w / uintptr(h.n)
}

// ShortKey is shortKey.
var ShortKey = shortKey

// Hash is the hash of key in lim, a table, and its shard.
func Hash(lim admit.KeyedLimiter, key string) (h uint64, shard int) {
	t := store(lim)
	h, _, _ = t.hash(key)
	return h, int(h >> t.shift)
}

// LockShards locks the mutex of every shard of lim, a table, and returns
// the function that unlocks them.
func LockShards(lim admit.KeyedLimiter) (unlock func()) {
	t := store(lim)
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	return func() {
		for i := range t.shards {
			t.shards[i].mu.Unlock()
		}
	}
}
