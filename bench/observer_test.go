package bench

import (
	"strconv"
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
	admitotel "github.com/admit-go/admit/otel"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/prom"
	"github.com/admit-go/admit/tally"
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// observers are the rows of BenchmarkObserver: the Service without an
// observer, and with each way of attaching one. tally is the counting the
// exporters read; tally-timed adds the opt-in latency histogram (two clock
// reads per Check); prom and otel are the exporters' observers, registered
// on a registry or a meter provider of their own (the same counting, read
// at a scrape).
var observers = []struct {
	name string
	make func(b *testing.B) observe.Observer // nil: no observer
}{
	{"none", nil},
	{"tally", func(b *testing.B) observe.Observer { return mustTally(b) }},
	{"prom", func(b *testing.B) observe.Observer {
		c, err := prom.New()
		if err != nil {
			b.Fatal(err)
		}
		if err := prometheus.NewRegistry().Register(c); err != nil {
			b.Fatal(err)
		}
		return c
	}},
	{"otel", func(b *testing.B) observe.Observer {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		o, err := admitotel.New(admitotel.WithMeterProvider(mp))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { o.Unregister() })
		return o
	}},
	{"tally-timed", func(b *testing.B) observe.Observer { return mustTally(b, tally.WithLatency()) }},
}

func mustTally(b *testing.B, opts ...tally.Option) *tally.Tally {
	t, err := tally.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkObserver measures policy.Service.Check (the default variant,
// the system clock, as BenchmarkPolicy) with an observer attached beside
// the same Service without one: pairs=1000 spreads the calls over 1,000
// existing users of one API, uniform, from every goroutine; pairs=1 is one
// pair shared by all. Budgets no run spends (admitted/op = 1).
func BenchmarkObserver(b *testing.B) {
	book, err := policy.Parse(strings.NewReader(policyBook))
	if err != nil {
		b.Fatal(err)
	}
	for _, nkeys := range []int{1, 1000} {
		w := KeyedWorkload(nkeys, Uniform)
		for _, o := range observers {
			b.Run("pairs="+strconv.Itoa(nkeys)+"/observer="+o.name, func(b *testing.B) {
				opts := []admit.Option{admit.WithClock(clock.System())}
				if o.make != nil {
					opts = append(opts, policy.WithObserver(o.make(b)))
				}
				s, err := policy.NewService(book, opts...)
				if err != nil {
					b.Fatal(err)
				}
				for _, u := range w.Keys {
					s.Check(u, "/orders")
				}
				runKeyed(b, w, func(u string, _ int) admit.Decision { return s.Check(u, "/orders") })
			})
		}
	}
}
