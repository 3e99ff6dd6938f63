package table_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"

	"github.com/admit-go/admit/internal/table"
)

// TestSlotSize pins the slot sizes docs/keyed-stores.md states: two slots
// of full keys, or four of hashed keys, to a 64-byte cache line.
func TestSlotSize(t *testing.T) {
	full, hashed := table.SlotBytes()
	assert.EqualValues(t, 32, full)
	assert.EqualValues(t, 16, hashed)
}

// unsafeString returns a string that shares b's memory, as a caller that
// reuses a buffer would pass.
func unsafeString(b []byte) string { return unsafe.String(&b[0], len(b)) }

// TestShortKey: a key of up to 15 bytes is its bytes in order, little-endian
// across words 2 and 3, with its length in the top byte of word 3; so two
// keys have the same words only if they are equal. Longer keys are marked.
func TestShortKey(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		key := rapid.StringN(0, 20, 20).Draw(rt, "key")
		if len(key) > 20 {
			key = key[:20]
		}
		var want [16]byte
		copy(want[:15], key)
		want[15] = byte(len(key))
		k0, k1, ok := table.ShortKey(key)
		if len(key) > 15 {
			assert.False(t, ok)
			assert.EqualValues(t, len(key), k0)
			return
		}
		assert.True(t, ok)
		assert.Equal(t, binary.LittleEndian.Uint64(want[:8]), k0, "%q", key)
		assert.Equal(t, binary.LittleEndian.Uint64(want[8:]), k1, "%q", key)
	})
	for n := range 16 { // every length, with every byte distinct
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(0xa0 + i)
		}
		k0, k1, _ := table.ShortKey(string(b))
		var want [16]byte
		copy(want[:], b)
		want[15] = byte(n)
		assert.Equal(t, binary.LittleEndian.Uint64(want[:8]), k0, "n=%d", n)
		assert.Equal(t, binary.LittleEndian.Uint64(want[8:]), k1, "n=%d", n)
	}
}

// TestHashSpreads: short keys that differ in a byte or two (counters, IP
// addresses) spread evenly over the shards and never share a tag, with the
// multiply-mix hash (full keys) and maphash (hashed keys and long keys).
func TestHashSpreads(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}
	for _, opts := range [][]admit.Option{{admit.WithShards(16)}, {admit.WithShards(16), admit.WithHashedKeys()}} {
		for _, format := range []string{"user-%d", "10.0.%d.%d", "%d", "a-key-longer-than-fifteen-bytes-%d"} {
			l := newTable(t, rule, clock.NewFake(), opts...)
			const n = 64_000
			var perShard [16]int
			tags := make(map[uint64]bool, n)
			for i := range n {
				var key string
				if strings.Count(format, "%d") == 2 {
					key = fmt.Sprintf(format, i/256, i%256)
				} else {
					key = fmt.Sprintf(format, i)
				}
				h, sh := table.Hash(l, key)
				perShard[sh]++
				require.False(t, tags[h], "%q shares a tag", key)
				tags[h] = true
			}
			for sh, c := range perShard {
				assert.InDelta(t, n/16, c, n/16/10, "%s: shard %d holds %d keys", format, sh, c)
			}
		}
	}
}
