package atomic

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
)

// TestKeyedLayout pins the padding of the keyed store's shared words and
// rings: each has 128 bytes to itself, so insertions and sweeps, which
// write them, do not slow down calls on stored keys, which only read their
// neighbours.
func TestKeyedLayout(t *testing.T) {
	var w paddedInt64
	if off := unsafe.Offsetof(w.n); off != layout.CacheLinePad {
		t.Errorf("paddedInt64.n is at offset %d, want %d", off, layout.CacheLinePad)
	}
	if size := unsafe.Sizeof(w); size != 2*layout.CacheLinePad {
		t.Errorf("paddedInt64 is %d bytes, want %d", size, 2*layout.CacheLinePad)
	}
	for name, size := range map[string]uintptr{
		"token-bucket":             unsafe.Sizeof(ring[tbCell]{}),
		"fixed-window":             unsafe.Sizeof(ring[fwCell]{}),
		"sliding-counter":          unsafe.Sizeof(ring[scCell]{}),
		"sliding-counter snapshot": unsafe.Sizeof(ring[scSnapCell]{}),
	} {
		if size != layout.CacheLinePad {
			t.Errorf("ring of %s cells is %d bytes, want %d", name, size, layout.CacheLinePad)
		}
	}
}

// TestTombstonesAreNoState checks that no state a cell publishes takes its
// tombstone's value: the packed bucket's TAT word after an admission at the
// earliest reading with the cheapest token, and packed windows and counters
// after any admission.
func TestTombstonesAreNoState(t *testing.T) {
	k := kernel.NewTokenBucket(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: 1})
	for _, now := range []time.Duration{math.MinInt64, math.MinInt64 + 1, -(1<<62 - 1), 0} {
		var s kernel.TokenBucketState
		if !k.Allow(&s, now, 1).Allowed {
			t.Fatalf("a fresh bucket denied at %v", now)
		}
		if s.TAT == tbTombstone {
			t.Errorf("an admission at %v wrote the tombstone word", now)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, maxPackedCounterLimit).Draw(rt, "limit")
		window := time.Duration(rapid.Int64Range(int64(limit), int64(time.Hour)).Draw(rt, "window"))
		now := time.Duration(rapid.Int64Range(-1<<62, 1<<62).Draw(rt, "now"))
		n := rapid.IntRange(1, limit).Draw(rt, "n")

		fw := newFWCodec(admit.Rule{Algorithm: admit.FixedWindow, Limit: limit, Window: window})
		var fs kernel.FixedWindowState
		if fw.k.Allow(&fs, now, n); fw.pack(fs) == fw.tomb {
			rt.Fatalf("fixed window %v: packed %+v is the tombstone", fs, fw.pack(fs))
		}
		sc, _ := newSCCodec(admit.Rule{Algorithm: admit.SlidingCounter, Limit: limit, Window: window})
		var ss kernel.SlidingCounterState
		if sc.k.Allow(&ss, now, n); sc.pack(ss) == sc.tomb {
			rt.Fatalf("sliding counter %+v: packed is the tombstone", ss)
		}
	})
}
