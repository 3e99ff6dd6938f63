package kernel

import "math/bits"

// divider divides by a fixed positive divisor d with a multiplication and a
// shift instead of a hardware division, which costs tens of cycles on the
// processors admit runs on and sits on every Allow's path (Remaining is a count
// of whole tokens). It is exact for every dividend below 2^63.
//
// The method is Granlund and Montgomery's (PLDI 1994, theorem 4.2): for N-bit
// dividends and ℓ = ceil(log2 d), the magic number m = ceil(2^(N+ℓ) / d) has at
// most N+1 bits and floor(x/d) = floor(m·x / 2^(N+ℓ)) for every 0 <= x < 2^N.
// With N = 63, m fits a uint64 and m·x is a 128-bit product whose high word,
// shifted right by ℓ-1, is the quotient.
type divider struct {
	d     uint64
	magic uint64 // 0 when d is a power of two: then a shift alone divides
	shift uint8
}

func newDivider(d int64) divider {
	if d <= 0 {
		panic("kernel: divider of a non-positive number")
	}
	u := uint64(d)
	if u&(u-1) == 0 {
		return divider{d: u, shift: uint8(bits.TrailingZeros64(u))}
	}
	l := uint(bits.Len64(u - 1)) // ceil(log2 d), >= 2 since d is not a power of two
	// 2^(63+l) / d: the dividend's high word is 2^(l-1) < d, as Div64 requires.
	q, r := bits.Div64(1<<(l-1), 0, u)
	if r != 0 {
		q++
	}
	return divider{d: u, magic: q, shift: uint8(l - 1)}
}

// div returns floor(x / d) for 0 <= x < 2^63.
func (v divider) div(x int64) int64 {
	if v.magic == 0 {
		return x >> v.shift
	}
	hi, _ := bits.Mul64(uint64(x), v.magic)
	return int64(hi >> v.shift)
}

// floorDiv returns floor(x / d) for any x, rounding towards minus infinity.
func (v divider) floorDiv(x int64) int64 {
	if x >= 0 {
		return v.div(x)
	}
	// floor(x/d) = -ceil(-x/d) = -(floor((-x-1)/d) + 1), and -x-1 = ^x >= 0.
	return -v.div(^x) - 1
}

// ceilDiv returns ceil(x / d) for 0 <= x < 2^63.
func (v divider) ceilDiv(x int64) int64 {
	q := v.div(x)
	if q*int64(v.d) != x {
		q++
	}
	return q
}
