package table_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/table"
)

// BenchmarkKeyed measures the table on existing keys from every goroutine,
// with full and hashed keys. The clock is a frozen fake one, so no key ever
// becomes idle, none is evicted and stored again mid-run, and every call
// takes the existing-key path; the budget (a billion per second) outlasts
// any run. (The
// suite in bench/ compares it with the other stores and with other
// limiters.)
func BenchmarkKeyed(b *testing.B) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000_000, Window: time.Second}
	for _, nkeys := range []int{1000, 100_000} {
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = "user:" + strconv.Itoa(i*7919)
		}
		for _, impl := range []string{"table", "table-hashed"} {
			set, _ := plumb.ResolveLimiter("sharded", []admit.Option{admit.WithClock(clock.NewFake())})
			var l admit.KeyedLimiter
			if impl == "table-hashed" {
				set.HashedKeys = true
			}
			l = table.New(rule, set)
			for _, k := range keys {
				l.Allow(k)
			}
			b.Run("keys="+strconv.Itoa(nkeys)+"/impl="+impl, func(b *testing.B) {
				var admitted atomic.Int64
				var g atomic.Int32
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := int(g.Add(1)) * 104729
					n := int64(0)
					for pb.Next() {
						i++
						if l.Allow(keys[(uint32(i)*2654435761)%uint32(len(keys))]).Allowed {
							n++
						}
					}
					admitted.Add(n)
				})
				b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
			})
		}
	}
}
