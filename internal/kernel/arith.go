package kernel

import (
	"math"
	"time"
)

// The kernels' clock range. Readings are clamped to [minTime, maxTime], ±146
// years around the clock's origin; beyond them time stands still. Within it,
// no instant a kernel computes (a TAT, a window's end, an expiry) can leave
// int64: each is a reading plus or minus at most one Window <= 2^62 ns. So
// nothing saturates in normal use, and at the end of the range a limiter
// keeps refusing beyond its limit instead of wrapping or resetting.
const (
	maxTime = 1<<62 - 1
	minTime = -maxTime
)

func clampTime(t time.Duration) time.Duration {
	return max(minTime, min(t, maxTime))
}

// Saturating int64 arithmetic. Times and waits in admit saturate at the ends of
// int64 instead of wrapping: a wait that would overflow is reported as
// admit.Never, a time past the end of the clock is the end of the clock.

func addSat(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) { // overflow in the direction of b's sign
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

func subSat(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b
	}
	return addSat(a, -b)
}

// mulSat returns a*b for b > 0, saturated.
func mulSat(a, b int64) int64 {
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	if a < math.MinInt64/b {
		return math.MinInt64
	}
	return a * b
}

// floorDiv returns the largest q with q*b <= a, for b > 0. Go's / truncates
// towards zero, which would merge the windows (-W, 0) and [0, W) into one.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// ceilDiv returns the smallest q with q*b >= a, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// wait returns the non-negative wait from now until t, saturated.
func wait(t, now int64) int64 {
	if t <= now {
		return 0
	}
	if d := t - now; d > 0 {
		return d
	}
	return math.MaxInt64 // t - now overflowed
}
