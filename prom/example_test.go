package prom_test

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/prom"
	"github.com/admit-go/admit/tally"
)

// A Collector attached to a Service and registered on the application's
// registry: a scrape reports the decisions per API, scope and outcome, and
// the store behind each limiter.
func Example() {
	registry := prometheus.NewRegistry()
	c, err := prom.New()
	if err != nil {
		panic(err)
	}
	registry.MustRegister(c)
	book, err := policy.Parse(strings.NewReader("default = token-bucket,2,1m\napi./login = fixed-window,1,1m\n"))
	if err != nil {
		panic(err)
	}
	svc, err := policy.NewService(book, policy.WithObserver(c), admit.WithClock(clock.NewFake()))
	if err != nil {
		panic(err)
	}
	for range 3 {
		svc.Check("alice", "/orders")
		svc.Check("alice", "/login")
	}
	svc.Check("bob", "/orders")

	// What promhttp.HandlerFor(registry, …) would serve, less the HELP and
	// TYPE lines.
	families, err := registry.Gather()
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			panic(err)
		}
	}
	for sc := bufio.NewScanner(&buf); sc.Scan(); {
		if !strings.HasPrefix(sc.Text(), "#") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="admitted",scope="api",source="policy"} 1
	// admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="denied",scope="api",source="policy"} 2
	// admit_decisions_total{limits="token-bucket,2,1m",name="/orders",outcome="admitted",scope="default",source="policy"} 3
	// admit_decisions_total{limits="token-bucket,2,1m",name="/orders",outcome="denied",scope="default",source="policy"} 1
	// admit_observer_folds_total 0
	// admit_store_evictions_total{limits="fixed-window,1,1m",name="/login",source="policy"} 0
	// admit_store_evictions_total{limits="token-bucket,2,1m",name="/orders",source="policy"} 0
	// admit_store_full_denials_total{limits="fixed-window,1,1m",name="/login",source="policy"} 0
	// admit_store_full_denials_total{limits="token-bucket,2,1m",name="/orders",source="policy"} 0
	// admit_store_keys{limits="fixed-window,1,1m",name="/login",source="policy"} 1
	// admit_store_keys{limits="token-bucket,2,1m",name="/orders",source="policy"} 2
}

// A Tally attached once can be exported by several exporters: here by a
// Collector under its own namespace, the Tally's histogram included.
func ExampleWithTally() {
	t, err := tally.New(tally.WithLatency())
	if err != nil {
		panic(err)
	}
	c, err := prom.New(prom.WithTally(t), prom.WithNamespace("edge"))
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(c)
	in := t.Instrument(observe.Labels{Source: "http", Name: "default"})
	in.Observe(observe.Admitted, 1, 3*time.Microsecond)
	in.Observe(observe.Denied, 1, 40*time.Microsecond)
	in.Observe(observe.ShadowDenied, 1, 40*time.Microsecond)

	families, err := registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				fmt.Printf("%s count=%d sum=%gs\n", f.GetName(), h.GetSampleCount(), h.GetSampleSum())
				continue
			}
			if c := m.GetCounter(); c != nil {
				if len(m.GetLabel()) == 0 {
					fmt.Printf("%s %g\n", f.GetName(), c.GetValue())
				}
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" {
						fmt.Printf("%s outcome=%s %g\n", f.GetName(), l.GetValue(), c.GetValue())
					}
				}
				continue
			}
			fmt.Printf("%s %g\n", f.GetName(), m.GetGauge().GetValue())
		}
	}
	// Output:
	// edge_decision_duration_seconds count=3 sum=8.3e-05s
	// edge_decisions_total outcome=admitted 1
	// edge_decisions_total outcome=denied 1
	// edge_decisions_total outcome=shadow_denied 1
	// edge_observer_folds_total 0
}
