package atomic_test

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
)

// BenchmarkComposite compares, serially on one key, admitted Allows of
// "token-bucket,10,1s + fixed-window,1000,1h" in each form (limits=pair,
// limits=snapshot) with each of its rules alone (limits=bucket,
// limits=window: atomic.NewLimiter and atomic.New), single-key, and the
// rules alone keyed (atomic has no keyed composite: sharded.NewLimits is
// measured in package sharded), on a step clock that moves 3.6s per reading: a token of the bucket and a
// slot of the window each call, so that every call is admitted by both
// rules.
func BenchmarkComposite(b *testing.B) {
	bucket, err := admit.ParseRule("token-bucket,10,1s")
	if err != nil {
		b.Fatal(err)
	}
	window, err := admit.ParseRule("fixed-window,1000,1h")
	if err != nil {
		b.Fatal(err)
	}
	limits, err := admit.ParseLimits("token-bucket,10,1s + fixed-window,1000,1h")
	if err != nil {
		b.Fatal(err)
	}
	const step = 3600 * time.Millisecond
	type variant struct {
		name   string
		single func(*stepClock) (admit.Limiter, error)
		keyed  func(*stepClock) (admit.KeyedLimiter, error) // nil: none
	}
	variants := []variant{
		{"bucket",
			func(c *stepClock) (admit.Limiter, error) { return admitatomic.NewLimiter(bucket, admit.WithClock(c)) },
			func(c *stepClock) (admit.KeyedLimiter, error) { return admitatomic.New(bucket, admit.WithClock(c)) }},
		{"window",
			func(c *stepClock) (admit.Limiter, error) { return admitatomic.NewLimiter(window, admit.WithClock(c)) },
			func(c *stepClock) (admit.KeyedLimiter, error) { return admitatomic.New(window, admit.WithClock(c)) }},
		{"pair",
			func(c *stepClock) (admit.Limiter, error) {
				return admitatomic.NewLimitsLimiter(limits, admit.WithClock(c))
			}, nil},
		{"snapshot",
			func(c *stepClock) (admit.Limiter, error) {
				return admitatomic.NewLimitsLimiterForm(limits, false, admit.WithClock(c))
			}, nil},
	}
	for _, key := range []string{"single", "keyed"} {
		for _, v := range variants {
			if key == "keyed" && v.keyed == nil {
				continue
			}
			b.Run("limits="+v.name+"/key="+key, func(b *testing.B) {
				ck := &stepClock{step: step}
				var allow func() bool
				if key == "single" {
					lim, err := v.single(ck)
					if err != nil {
						b.Fatal(err)
					}
					allow = func() bool { return lim.Allow().Allowed }
				} else {
					lim, err := v.keyed(ck)
					if err != nil {
						b.Fatal(err)
					}
					allow = func() bool { return lim.Allow("k").Allowed }
				}
				if v.name == "pair" && !admitatomic.PairAvailable() {
					b.Skip("no two-word compare-and-swap here")
				}
				allow()
				admitted := 0
				b.ReportAllocs()
				for b.Loop() {
					if allow() {
						admitted++
					}
				}
				b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
			})
		}
	}
}
