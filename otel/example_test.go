package otel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/otel"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/tally"
)

// checks runs three Checks of alice on /orders and on /login through a
// Service over book "default = token-bucket,2,1m", "api./login =
// fixed-window,1,1m", observed by o.
func checks(o observe.Observer) {
	book, err := policy.Parse(strings.NewReader("default = token-bucket,2,1m\napi./login = fixed-window,1,1m\n"))
	if err != nil {
		panic(err)
	}
	svc, err := policy.NewService(book, policy.WithObserver(o), admit.WithClock(clock.NewFake()))
	if err != nil {
		panic(err)
	}
	for range 3 {
		svc.Check("alice", "/orders")
		svc.Check("alice", "/login")
	}
}

// printMetric prints the data points of the metric name that reader
// collects, one line each, sorted: the name, scope and outcome attributes,
// then the value (a histogram's count).
func printMetric(reader *sdkmetric.ManualReader, name string) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s = %d", m.Name, short(p.Attributes.ToSlice()), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s count = %d, %d bounds", m.Name, short(p.Attributes.ToSlice()), p.Count, len(p.Bounds)))
				}
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
}

// short writes the name, scope and outcome attributes of a data point.
func short(kvs []attribute.KeyValue) string {
	var vals []string
	for _, kv := range kvs {
		switch kv.Key {
		case "admit.name", "admit.scope", "admit.outcome":
			vals = append(vals, kv.Value.Emit())
		}
	}
	return strings.Join(vals, " ")
}

// An Observer attached to a policy.Service reports its decisions, by API,
// scope and outcome, at each collection of the provider's readers.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otel.New(otel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer obs.Unregister()

	checks(obs)
	printMetric(reader, "admit.decisions")
	// Output:
	// admit.decisions /login admitted api = 1
	// admit.decisions /login denied api = 2
	// admit.decisions /orders admitted default = 2
	// admit.decisions /orders denied default = 1
}

// With WithLatency, each decision's latency is recorded in the histogram
// admit.decision.duration, in seconds, beside the counts.
func ExampleWithLatency() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otel.New(otel.WithMeterProvider(mp), otel.WithLatency())
	if err != nil {
		panic(err)
	}
	defer obs.Unregister()

	checks(obs)
	printMetric(reader, "admit.decision.duration")
	// Output:
	// admit.decision.duration /login admitted api count = 1, 22 bounds
	// admit.decision.duration /login denied api count = 2, 22 bounds
	// admit.decision.duration /orders admitted default count = 2, 22 bounds
	// admit.decision.duration /orders denied default count = 1, 22 bounds
}

// One Tally can be exported to OpenTelemetry and read elsewhere too (here
// by its Snapshot; the admit/prom module exports it to Prometheus): the
// limiters are given the Tally, or the Observer, whose instruments are the
// Tally's.
func ExampleWithTally() {
	t, err := tally.New()
	if err != nil {
		panic(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otel.New(otel.WithMeterProvider(mp), otel.WithTally(t))
	if err != nil {
		panic(err)
	}
	defer obs.Unregister()

	checks(t)
	printMetric(reader, "admit.decisions")
	for _, s := range t.Snapshot() {
		fmt.Printf("snapshot %s admitted = %d\n", s.Labels.Name, s.Decisions[observe.Admitted])
	}
	// Output:
	// admit.decisions /login admitted api = 1
	// admit.decisions /login denied api = 2
	// admit.decisions /orders admitted default = 2
	// admit.decisions /orders denied default = 1
	// snapshot /login admitted = 1
	// snapshot /orders admitted = 2
}
