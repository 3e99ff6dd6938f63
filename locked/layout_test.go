package locked

import (
	"testing"
	"unsafe"

	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
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
		if size != layout.CacheLinePad {
			t.Errorf("stripe for %s is %d bytes, want %d", name, size, layout.CacheLinePad)
		}
	}
}
