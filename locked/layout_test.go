package locked

import (
	"testing"
	"unsafe"

	"github.com/admit-go/admit/internal/kernel"
)

// TestStripeSize pins the padding: a stripe fills exactly one 128-byte pair of
// cache lines, whatever the state type, so neighbouring stripes never share one.
func TestStripeSize(t *testing.T) {
	sizes := map[string]uintptr{
		"token-bucket":    unsafe.Sizeof(stripe[kernel.TokenBucketState]{}),
		"fixed-window":    unsafe.Sizeof(stripe[kernel.FixedWindowState]{}),
		"sliding-log":     unsafe.Sizeof(stripe[kernel.Log]{}),
		"sliding-counter": unsafe.Sizeof(stripe[kernel.SlidingCounterState]{}),
	}
	for name, size := range sizes {
		if size != cacheLinePad {
			t.Errorf("stripe for %s is %d bytes, want %d", name, size, cacheLinePad)
		}
	}
	var c counter
	if off := unsafe.Offsetof(c.n); off != cacheLinePad {
		t.Errorf("counter.n is at offset %d, want %d", off, cacheLinePad)
	}
	if off := unsafe.Offsetof(c.cursor); off != cacheLinePad+8 {
		t.Errorf("counter.cursor is at offset %d, want %d, next to n", off, cacheLinePad+8)
	}
	if size := unsafe.Sizeof(c); size != 2*cacheLinePad {
		t.Errorf("counter is %d bytes, want %d", size, 2*cacheLinePad)
	}
}
