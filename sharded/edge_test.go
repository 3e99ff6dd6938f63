package sharded_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/sharded"
)

// clockEnd is the end of the kernels' clock range: they clamp every reading
// to ±clockEnd (2^62-1 ns).
const clockEnd time.Duration = 1<<62 - 1

// addSat is a+b, saturated at the ends of time.Duration.
func addSat(a, b time.Duration) time.Duration {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// drawReading draws the next reading after now, for a rule whose window is
// w: near either end of the clock range (just inside, on it, just outside),
// at the ends of int64, a jump of 2^62 either way, a mirror jump to the other
// end of the range, anywhere, or a small step either way. (atomic's edge
// tests draw readings the same way.)
func drawReading(rt *rapid.T, now, w time.Duration) time.Duration {
	small := func(label string) time.Duration {
		return time.Duration(rapid.Int64Range(-2*int64(min(w, 1<<40)), 2*int64(min(w, 1<<40))).Draw(rt, label))
	}
	switch rapid.IntRange(0, 7).Draw(rt, "move") {
	case 0:
		end := rapid.SampledFrom([]time.Duration{clockEnd, -clockEnd}).Draw(rt, "end")
		return addSat(end, time.Duration(rapid.Int64Range(-3, 3).Draw(rt, "off")))
	case 1:
		end := rapid.SampledFrom([]time.Duration{clockEnd, -clockEnd}).Draw(rt, "end")
		return addSat(end, small("near"))
	case 2:
		return rapid.SampledFrom([]time.Duration{math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64}).Draw(rt, "int64")
	case 3:
		jump := rapid.SampledFrom([]time.Duration{1 << 62, -1 << 62}).Draw(rt, "jump")
		return addSat(addSat(now, jump), small("by"))
	case 4:
		return addSat(-now, small("mirror"))
	case 5:
		return time.Duration(rapid.Int64().Draw(rt, "anywhere"))
	default:
		return addSat(now, small("step"))
	}
}

// TestEdges: the store equals the kernel at the ends of the clock range, for
// the packed token bucket (a bare TAT word, for rules whose emission interval
// is whole nanoseconds) and for the other algorithms, with full and with
// hashed keys.
func TestEdges(t *testing.T) {
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter, admit.SlidingLog} {
		t.Run("algo="+alg.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				limit := rapid.SampledFrom([]int{1, 2, 3, 7, admit.MaxLimit, rapid.IntRange(1, admit.MaxLimit).Draw(rt, "anyLimit")}).Draw(rt, "limit")
				if alg == admit.SlidingLog {
					limit = rapid.IntRange(1, 8).Draw(rt, "logLimit")
				}
				hi := int64(admit.MaxLimitTimesWindow) / int64(limit)
				w := rapid.SampledFrom([]int64{int64(limit), int64(limit) + 1, hi, rapid.Int64Range(int64(limit), hi).Draw(rt, "anyWindow")}).Draw(rt, "window")
				if alg == admit.TokenBucket { // whole nanoseconds per token: the packed state
					w -= w % int64(limit)
				}
				r := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Duration(w)}
				fake := clock.NewFake()
				fake.Set(drawReading(rt, 0, r.Window))
				opts := []admit.Option{admit.WithClock(fake)}
				if rapid.Bool().Draw(rt, "hashed") {
					opts = append(opts, admit.WithHashedKeys())
				}
				lim, err := sharded.New(r, opts...)
				require.NoError(rt, err)
				want := conformance.NewOracle(r)
				for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
					if rapid.IntRange(0, 2).Draw(rt, "op") == 0 {
						fake.Set(drawReading(rt, fake.Now(), r.Window))
						continue
					}
					n := rapid.SampledFrom([]int{0, 1, 1, 1, 2, r.Limit, r.Limit + 1}).Draw(rt, "n")
					key := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key")
					now := fake.Now()
					if got, exp := lim.AllowN(key, n), want.Allow(key, now, n); got != exp {
						rt.Fatalf("%v op %d: AllowN(t=%d, %q, %d) = %+v, want %+v", r, i, now, key, n, got, exp)
					}
				}
			})
		})
	}
}
