package table_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

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
