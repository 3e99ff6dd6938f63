package atomic_test

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
)

// tick is a serial benchmark's clock: each reading is step later than the
// last, without the atomic read of clock.Fake or the system clock's cost, so
// that the cell's own work is what the benchmark sees.
type tick struct{ now, step time.Duration }

func (c *tick) Now() time.Duration { c.now += c.step; return c.now }

// BenchmarkPackedWindow measures the packed fixed window and sliding counter
// on one key, serially, single-key and keyed, on the admit path (one request
// every 2µs against 1000 per millisecond: every call passes) and the deny
// path (a spent window on a clock that stands still).
func BenchmarkPackedWindow(b *testing.B) {
	for _, alg := range []admit.Algorithm{admit.FixedWindow, admit.SlidingCounter} {
		rule := admit.Rule{Algorithm: alg, Limit: 1000, Window: time.Millisecond}
		for _, path := range []string{"allow", "deny"} {
			for _, shape := range []string{"single", "keyed"} {
				b.Run("algo="+alg.String()+"/shape="+shape+"/path="+path, func(b *testing.B) {
					ck := &tick{step: 2 * time.Microsecond}
					allow := func() admit.Decision { panic("unset") }
					if shape == "single" {
						lim, err := admitatomic.NewLimiter(rule, admit.WithClock(ck))
						if err != nil {
							b.Fatal(err)
						}
						allow = lim.Allow
					} else {
						lim, err := admitatomic.New(rule, admit.WithClock(ck))
						if err != nil {
							b.Fatal(err)
						}
						allow = func() admit.Decision { return lim.Allow("k") }
					}
					allow()
					if path == "deny" {
						ck.step = 0
						for allow().Allowed {
						}
					}
					admitted := 0
					b.ReportAllocs()
					for b.Loop() {
						if allow().Allowed {
							admitted++
						}
					}
					if want := map[string]int{"allow": b.N, "deny": 0}[path]; admitted != want {
						b.Fatalf("%d of %d admitted, want %d", admitted, b.N, want)
					}
				})
			}
		}
	}
}
