package kernel

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// The saturating helpers of arith.go, checked against exact big.Int arithmetic
// clamped to int64, at the extremes and on generated values.

var extremes = []int64{
	math.MinInt64, math.MinInt64 + 1, math.MinInt64 / 2, math.MinInt64/3 - 1, math.MinInt64 / 3,
	-1 << 32, -3, -2, -1, 0, 1, 2, 3, 1 << 32,
	math.MaxInt64 / 3, math.MaxInt64/3 + 1, math.MaxInt64 / 2, math.MaxInt64/2 + 1, math.MaxInt64 - 1, math.MaxInt64,
}

// clamp saturates an exact result to int64.
func clamp(v *big.Int) int64 {
	switch {
	case v.Cmp(bi(math.MaxInt64)) > 0:
		return math.MaxInt64
	case v.Cmp(bi(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return v.Int64()
}

// fataler is what testing.T and rapid.T have in common.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func checkArith(t fataler, a, b int64) {
	t.Helper()
	if got, want := addSat(a, b), clamp(bAdd(bi(a), bi(b))); got != want {
		t.Fatalf("addSat(%d, %d) = %d, want %d", a, b, got, want)
	}
	if got, want := subSat(a, b), clamp(bSub(bi(a), bi(b))); got != want {
		t.Fatalf("subSat(%d, %d) = %d, want %d", a, b, got, want)
	}
	if got, want := wait(a, b), clamp(bSub(bi(a), bi(b))); got != max(0, want) {
		t.Fatalf("wait(%d, %d) = %d, want %d", a, b, got, max(0, want))
	}
	if b <= 0 {
		return
	}
	if got, want := mulSat(a, b), clamp(bMul(bi(a), bi(b))); got != want {
		t.Fatalf("mulSat(%d, %d) = %d, want %d", a, b, got, want)
	}
	if got, want := floorDiv(a, b), bFloorDiv(bi(a), bi(b)).Int64(); got != want {
		t.Fatalf("floorDiv(%d, %d) = %d, want %d", a, b, got, want)
	}
	if a >= 0 {
		want := new(big.Int).Div(bAdd(bi(a), bi(b-1)), bi(b)).Int64() // (a+b-1)/b, exact in big.Int
		if got := ceilDiv(a, b); got != want {
			t.Fatalf("ceilDiv(%d, %d) = %d, want %d", a, b, got, want)
		}
	}
}

func TestArithExtremes(t *testing.T) {
	for _, a := range extremes {
		for _, b := range extremes {
			checkArith(t, a, b)
		}
	}
}

// Spot checks that read as the rules they pin.
func TestArithRules(t *testing.T) {
	cases := []struct {
		name      string
		got, want int64
	}{
		{"addSat(Max, 1) saturates up", addSat(math.MaxInt64, 1), math.MaxInt64},
		{"addSat(Min, -1) saturates down", addSat(math.MinInt64, -1), math.MinInt64},
		{"addSat(Max, Min) is exact", addSat(math.MaxInt64, math.MinInt64), -1},
		{"subSat(0, Min) saturates up", subSat(0, math.MinInt64), math.MaxInt64},
		{"subSat(-1, Min) is exactly Max", subSat(-1, math.MinInt64), math.MaxInt64},
		{"subSat(Min, Min) is 0", subSat(math.MinInt64, math.MinInt64), 0},
		{"subSat(Min, 1) saturates down", subSat(math.MinInt64, 1), math.MinInt64},
		{"mulSat(Max/2+1, 2) saturates up", mulSat(math.MaxInt64/2+1, 2), math.MaxInt64},
		{"mulSat(Min/2, 2) is exactly Min", mulSat(math.MinInt64/2, 2), math.MinInt64},
		{"mulSat(Min/2-1, 2) saturates down", mulSat(math.MinInt64/2-1, 2), math.MinInt64},
		{"floorDiv(-1, 10) is -1, not 0", floorDiv(-1, 10), -1},
		{"floorDiv(-10, 10) is -1", floorDiv(-10, 10), -1},
		{"floorDiv(-11, 10) is -2", floorDiv(-11, 10), -2},
		{"floorDiv(Min, Max) is -2", floorDiv(math.MinInt64, math.MaxInt64), -2},
		{"floorDiv(Min, 1) is Min", floorDiv(math.MinInt64, 1), math.MinInt64},
		{"ceilDiv(Max, 1) is Max", ceilDiv(math.MaxInt64, 1), math.MaxInt64},
		{"ceilDiv(Max, 2) is 2^62", ceilDiv(math.MaxInt64, 2), 1 << 62},
		{"ceilDiv(0, 7) is 0", ceilDiv(0, 7), 0},
		{"wait(Max, Min) saturates", wait(math.MaxInt64, math.MinInt64), math.MaxInt64},
		{"wait(Min, Max) is 0", wait(math.MinInt64, math.MaxInt64), 0},
		{"wait(5, 5) is 0", wait(5, 5), 0},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestPropertyArith(t *testing.T) {
	value := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-1000, 1000), rapid.SampledFrom(extremes))
	rapid.Check(t, func(t *rapid.T) {
		checkArith(t, value.Draw(t, "a"), value.Draw(t, "b"))
	})
}
