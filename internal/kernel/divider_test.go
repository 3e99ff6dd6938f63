package kernel

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestDividerExact checks the reciprocal division against the hardware's, for
// divisors and dividends drawn across the whole range, with the edges (powers
// of two and their neighbours, 2^63-1) drawn often.
func TestDividerExact(t *testing.T) {
	edge := rapid.Custom(func(t *rapid.T) int64 {
		p := rapid.IntRange(0, 62).Draw(t, "pow")
		return (int64(1) << p) + rapid.Int64Range(-1, 1).Draw(t, "nudge")
	})
	positive := rapid.OneOf(rapid.Int64Range(1, 1000), rapid.Int64Range(1, math.MaxInt64), edge.Filter(func(v int64) bool { return v > 0 }))
	rapid.Check(t, func(t *rapid.T) {
		d := positive.Draw(t, "d")
		v := newDivider(d)
		for range 50 {
			x := rapid.OneOf(rapid.Int64Range(0, math.MaxInt64), rapid.Int64Range(0, mulSat(d, 3)), rapid.Just(int64(math.MaxInt64)), edge.Filter(func(v int64) bool { return v >= 0 })).Draw(t, "x")
			if got, want := v.div(x), x/d; got != want {
				t.Fatalf("div(%d / %d) = %d, want %d", x, d, got, want)
			}
			if got, want := v.ceilDiv(x), ceilDiv(x, d); got != want {
				t.Fatalf("ceilDiv(%d / %d) = %d, want %d", x, d, got, want)
			}
			neg := -x - rapid.Int64Range(0, 1).Draw(t, "minus") // reaches MinInt64
			if got, want := v.floorDiv(neg), floorDiv(neg, d); got != want {
				t.Fatalf("floorDiv(%d / %d) = %d, want %d", neg, d, got, want)
			}
			if got, want := v.floorDiv(x), floorDiv(x, d); got != want {
				t.Fatalf("floorDiv(%d / %d) = %d, want %d", x, d, got, want)
			}
		}
	})
}

func BenchmarkDivide(b *testing.B) {
	const d = 3_333_333_333
	v := newDivider(d)
	x := int64(math.MaxInt64 / 3)
	b.Run("op=hardware", func(b *testing.B) {
		s := int64(0)
		for b.Loop() {
			s += x / (d + s&1)
		}
		sink = s
	})
	b.Run("op=reciprocal", func(b *testing.B) {
		s := int64(0)
		for b.Loop() {
			s += v.div(x ^ s&1)
		}
		sink = s
	})
}

var sink int64
