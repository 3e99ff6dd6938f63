package tally

import (
	"testing"
	"unsafe"
)

// TestSaltLine: a series' salt has a cache line's worth of padding on each
// side, so that no field a count reads, and no other allocation, shares its
// line.
func TestSaltLine(t *testing.T) {
	var s series
	before := unsafe.Offsetof(s.salt) - (unsafe.Offsetof(s.hist) + unsafe.Sizeof(s.hist))
	after := unsafe.Sizeof(s) - unsafe.Offsetof(s.salt)
	if before < cacheLine || after < cacheLine {
		t.Errorf("salt at offset %d of %d bytes: %d bytes before it past hist, %d from it to the end; want at least %d each", unsafe.Offsetof(s.salt), unsafe.Sizeof(s), before, after, cacheLine)
	}
}
