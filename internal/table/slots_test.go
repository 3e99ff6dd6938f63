package table_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

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
