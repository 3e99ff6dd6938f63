package atomic_test

import (
	"strconv"
	"sync"
	satomic "sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
)

// The package's own quick benchmarks; bench/ compares every variant with the
// peer libraries. Sub-benchmark names are key=value for benchstat.

var sinkDecision admit.Decision

// BenchmarkFloor measures what an Allow cannot avoid, in the same run as the
// limiters so that ratios are meaningful: a read of the system clock, one CAS,
// and both.
func BenchmarkFloor(b *testing.B) {
	var w satomic.Uint64
	sys := clock.System()
	b.Run("op=clock", func(b *testing.B) {
		var s time.Duration
		for b.Loop() {
			s += sys.Now()
		}
		sinkDecision.ResetAfter = s
	})
	b.Run("op=cas", func(b *testing.B) {
		for b.Loop() {
			v := w.Load()
			w.CompareAndSwap(v, v+1)
		}
	})
	b.Run("op=clock+cas", func(b *testing.B) {
		for b.Loop() {
			v := w.Load()
			w.CompareAndSwap(v, v+uint64(sys.Now()))
		}
	})
	b.Run("op=mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			w.Store(w.Load() + 1)
			mu.Unlock()
		}
	})
}

func clocks(b *testing.B) []struct {
	name string
	c    clock.Clock
} {
	coarse, err := clock.Coarse(time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(coarse.Stop)
	return []struct {
		name string
		c    clock.Clock
	}{{"system", clock.System()}, {"coarse", coarse}}
}

// BenchmarkTokenBucket measures one key, serially, on the admit path (a rate
// so high that every call passes) and the deny path (a spent bucket), in both
// token-bucket forms.
func BenchmarkTokenBucket(b *testing.B) {
	for _, ck := range clocks(b) {
		for _, path := range []string{"allow", "deny"} {
			rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Millisecond} // one token per ns
			if path == "deny" {
				rule = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Hour}
			}
			packed, err := admitatomic.NewTokenBucket(rule, admit.WithClock(ck.c))
			if err != nil {
				b.Fatal(err)
			}
			snap, err := admitatomic.NewTokenBucketSnapshot(rule, admit.WithClock(ck.c))
			if err != nil {
				b.Fatal(err)
			}
			for _, f := range []struct {
				name string
				lim  admit.Limiter
			}{{"packed", packed}, {"snapshot", snap}} {
				b.Run("form="+f.name+"/path="+path+"/clock="+ck.name, func(b *testing.B) {
					f.lim.Allow()
					admitted := 0
					b.ReportAllocs()
					for b.Loop() {
						if f.lim.Allow().Allowed {
							admitted++
						}
					}
					b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
				})
			}
		}
	}
}

// BenchmarkHotKey: every goroutine on one key (parallelism from -cpu).
func BenchmarkHotKey(b *testing.B) {
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter} {
		b.Run("algo="+alg.String(), func(b *testing.B) {
			lim, err := admitatomic.NewLimiter(admit.Rule{Algorithm: alg, Limit: 1_000_000, Window: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lim.Allow()
				}
			})
		})
	}
}

// BenchmarkKeyed spreads calls over existing keys (parallelism from -cpu).
func BenchmarkKeyed(b *testing.B) {
	for _, nkeys := range []int{1, 1000, 100_000} {
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = "user-" + strconv.Itoa(i)
		}
		b.Run("algo=token-bucket/keys="+strconv.Itoa(nkeys), func(b *testing.B) {
			lim, err := admitatomic.New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Millisecond})
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

// stepClock advances by step at every reading, so that a limiter whose
// rule refills one token every step admits every call.
type stepClock struct {
	t    satomic.Int64
	step time.Duration
}

func (c *stepClock) Now() time.Duration { return time.Duration(c.t.Add(int64(c.step))) }

// BenchmarkScaledRules compares serial admitted Allows of token buckets
// whose emission interval is whole nanoseconds (5 per 10s) with rules whose
// word is kept in scaled units (3 per second, 7 per minute, 9,999 per
// second), single-key and keyed (one key), on a step clock that refills one
// token per call, so every call is admitted: the scaled rules must allocate
// nothing and cost about what the whole-nanosecond rule costs.
func BenchmarkScaledRules(b *testing.B) {
	for _, r := range []string{"token-bucket,5,10s", "token-bucket,3,1s", "token-bucket,7,1m", "token-bucket,9999,1s"} {
		rule, err := admit.ParseRule(r)
		if err != nil {
			b.Fatal(err)
		}
		step := (rule.Window + time.Duration(rule.Limit) - 1) / time.Duration(rule.Limit) // one token, rounded up
		for _, form := range []string{"single", "keyed"} {
			b.Run("rule="+r+"/form="+form, func(b *testing.B) {
				ck := &stepClock{step: step}
				allow := func() bool { return false }
				if form == "single" {
					lim, err := admitatomic.NewLimiter(rule, admit.WithClock(ck))
					if err != nil {
						b.Fatal(err)
					}
					allow = func() bool { return lim.Allow().Allowed }
				} else {
					lim, err := admitatomic.New(rule, admit.WithClock(ck))
					if err != nil {
						b.Fatal(err)
					}
					allow = func() bool { return lim.Allow("k").Allowed }
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
