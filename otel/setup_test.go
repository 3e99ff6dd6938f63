package otel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/otel"
	"github.com/admit-go/admit/policy"
)

// observeBook has one limiter that serves two scopes: vip's rule equals
// /login's, so vip on /login is decided by /login's limiter.
const observeBook = `
default    = token-bucket,2,1m
api./login = fixed-window,1,1m
user.vip   = fixed-window,1,1m
`

// provider returns a meter provider whose only reader is the returned
// manual reader; the provider is shut down when the test ends.
func provider(t testing.TB) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, r
}

// newObserver returns an Observer, unregistered when the test ends.
func newObserver(t testing.TB, opts ...otel.Option) *otel.Observer {
	t.Helper()
	o, err := otel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.Unregister()) })
	return o
}

// service returns a Service over book, observed by o, on a fake clock, its
// limiters built by atomic's New (a keyed store that reports statistics)
// unless opts choose another factory.
func service(t testing.TB, book string, o observe.Observer, opts ...admit.Option) (*policy.Service, *clock.Fake) {
	t.Helper()
	b, err := policy.Parse(strings.NewReader(book))
	require.NoError(t, err)
	fake := clock.NewFake()
	opts = append([]admit.Option{policy.WithObserver(o), admit.WithClock(fake)}, opts...)
	s, err := policy.NewService(b, opts...)
	require.NoError(t, err)
	return s, fake
}

// collect reads every metric of r, by name.
func collect(t testing.TB, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, otel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrs writes an attribute set as "key=value" pairs, in key order,
// separated by spaces.
func attrs(s attribute.Set) string {
	var b strings.Builder
	for i, kv := range s.ToSlice() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(kv.Key))
		b.WriteByte('=')
		b.WriteString(kv.Value.Emit())
	}
	return b.String()
}

// sum returns the data points of the int64 sum name, by attributes, and
// whether the sum is monotonic; it fails the test unless the sum is
// cumulative. A metric absent from ms is an empty map.
func sum(t testing.TB, ms map[string]metricdata.Metrics, name string) (map[string]int64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return map[string]int64{}, false
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, want an int64 sum", name, m.Data)
	require.Equal(t, metricdata.CumulativeTemporality, s.Temporality, name)
	out := map[string]int64{}
	for _, p := range s.DataPoints {
		k := attrs(p.Attributes)
		_, dup := out[k]
		require.False(t, dup, "%s: two data points for %s", name, k)
		out[k] = p.Value
	}
	return out, s.IsMonotonic
}

// counter is sum for a monotonic sum (a counter).
func counter(t testing.TB, ms map[string]metricdata.Metrics, name string) map[string]int64 {
	t.Helper()
	got, mono := sum(t, ms, name)
	if _, ok := ms[name]; ok {
		require.True(t, mono, "%s is not monotonic", name)
	}
	return got
}

// upDown is sum for a non-monotonic sum (an up-down counter).
func upDown(t testing.TB, ms map[string]metricdata.Metrics, name string) map[string]int64 {
	t.Helper()
	got, mono := sum(t, ms, name)
	require.False(t, mono, "%s is monotonic", name)
	return got
}
