package locked_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/locked"
)

// The full comparison across variants and peers lives in bench/; these are the
// package's own quick numbers. Names are key=value for benchstat.

func clocks() []struct {
	name string
	c    clock.Clock
} {
	return []struct {
		name string
		c    clock.Clock
	}{{"system", clock.System()}, {"fake", clock.NewFake()}}
}

// BenchmarkAllow measures one key, serially: path=allow with a limit so large
// every call is admitted, path=deny with a spent limit.
func BenchmarkAllow(b *testing.B) {
	for _, alg := range conformance.Algorithms {
		for _, path := range []string{"allow", "deny"} {
			for _, ck := range clocks() {
				rule := admit.Rule{Algorithm: alg, Limit: admit.MaxSlidingLogLimit, Window: time.Hour}
				if path == "deny" {
					rule.Limit = 1
				}
				b.Run("algo="+alg.String()+"/path="+path+"/clock="+ck.name, func(b *testing.B) {
					lim, err := locked.NewLimiter(rule, admit.WithClock(ck.c))
					if err != nil {
						b.Fatal(err)
					}
					lim.Allow()
					b.ReportAllocs()
					for b.Loop() {
						lim.Allow()
					}
				})
			}
		}
	}
}

// BenchmarkKeyedAllow measures the keyed limiter: keys=1 is one hot key shared
// by every goroutine, keys=N spreads calls over N existing keys. Parallelism
// comes from -cpu.
func BenchmarkKeyedAllow(b *testing.B) {
	for _, alg := range conformance.Algorithms {
		for _, nkeys := range []int{1, 1000} {
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = "user-" + strconv.Itoa(i)
			}
			b.Run("algo="+alg.String()+"/keys="+strconv.Itoa(nkeys), func(b *testing.B) {
				lim, err := locked.New(admit.Rule{Algorithm: alg, Limit: admit.MaxSlidingLogLimit, Window: time.Hour}, admit.WithClock(clock.NewFake()))
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range keys {
					lim.Allow(k)
				}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						lim.Allow(keys[i%nkeys])
						i++
					}
				})
			})
		}
	}
}
