package otel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	otelapi "go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/otel"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/tally"
)

const (
	tb21m = "token-bucket,2,1m"
	fw11m = "fixed-window,1,1m"
)

// dec is the attributes of a policy.Service's decisions, as attrs writes
// them.
func dec(scope, name, limits, outcome string) string {
	return fmt.Sprintf("admit.limits=%s admit.name=%s admit.outcome=%s admit.scope=%s admit.source=policy", limits, name, outcome, scope)
}

// store is the attributes of a policy.Service's store.
func store(name, limits string) string {
	return fmt.Sprintf("admit.limits=%s admit.name=%s admit.source=policy", limits, name)
}

// labels returns policy labels for name under token-bucket,2,1m.
func labels(t testing.TB, name string) observe.Labels {
	t.Helper()
	l, err := admit.ParseLimits(tb21m)
	require.NoError(t, err)
	return observe.Labels{Source: "policy", Name: name, Scope: "default", Limits: l}
}

// TestDecisions: every Check is counted once, under its scope's
// attributes, admitted and denied reported (zeros included), the other
// outcomes not until counted.
func TestDecisions(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp))
	s, _ := service(t, observeBook, o, policy.WithFactory(admitatomic.New))
	assert.Equal(t, map[string]int64{
		dec("api", "/login", fw11m, "admitted"): 0,
		dec("api", "/login", fw11m, "denied"):   0,
	}, counter(t, collect(t, r), "admit.decisions"), "an API entry's series is there from NewService")
	for range 3 {
		s.Check("alice", "/orders")
		s.Check("alice", "/login")
		s.Check("vip", "/login")
		s.Check("vip", "/orders")
	}
	ms := collect(t, r)
	assert.Equal(t, map[string]int64{
		dec("api", "/login", fw11m, "admitted"):      1,
		dec("api", "/login", fw11m, "denied"):        2,
		dec("default", "/orders", tb21m, "admitted"): 2,
		dec("default", "/orders", tb21m, "denied"):   1,
		dec("user", "/login", fw11m, "admitted"):     1,
		dec("user", "/login", fw11m, "denied"):       2,
		dec("user", "/orders", fw11m, "admitted"):    1,
		dec("user", "/orders", fw11m, "denied"):      2,
	}, counter(t, ms, "admit.decisions"))
	assert.Equal(t, "{decision}", ms["admit.decisions"].Unit)
	assert.Equal(t, map[string]int64{"": 0}, counter(t, ms, "admit.observer.folds"))
	assert.NotContains(t, ms, "admit.decision.duration", "no histogram without WithLatency")

	// Another outcome appears once counted (here by a caller other than
	// the Service), under the labels' attributes; no scope, no limits are
	// left out rather than empty.
	o.Instrument(observe.Labels{Source: "http", Name: "api"}).Observe(observe.ShadowDenied, 1, 0)
	got := counter(t, collect(t, r), "admit.decisions")
	assert.Equal(t, int64(1), got["admit.name=api admit.outcome=shadow_denied admit.source=http"])
	assert.Equal(t, int64(0), got["admit.name=api admit.outcome=admitted admit.source=http"])
	assert.NotContains(t, got, "admit.name=api admit.outcome=errored admit.source=http")
}

// TestCumulative: the sums are cumulative and never decrease from one
// collection to the next; a collection with nothing new repeats them.
func TestCumulative(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp))
	s, fake := service(t, observeBook, o)
	want := map[string]int64{
		dec("api", "/login", fw11m, "admitted"):      0,
		dec("api", "/login", fw11m, "denied"):        0,
		dec("default", "/orders", tb21m, "admitted"): 0,
		dec("default", "/orders", tb21m, "denied"):   0,
	}
	steps := []struct {
		user, api string
		outcome   string
		limits    string
		scope     string
	}{
		{"alice", "/orders", "admitted", tb21m, "default"},
		{"alice", "/orders", "admitted", tb21m, "default"},
		{"alice", "/orders", "denied", tb21m, "default"},
		{"bob", "/login", "admitted", fw11m, "api"},
		{"bob", "/login", "denied", fw11m, "api"},
	}
	// /orders' series is created by the first Check: collect after it.
	for i, st := range steps {
		s.Check(st.user, st.api)
		want[dec(st.scope, st.api, st.limits, st.outcome)]++
		for range 2 {
			assert.Equal(t, want, counter(t, collect(t, r), "admit.decisions"), "step %d: Check(%q, %q)", i, st.user, st.api)
		}
	}
	// A minute on, the windows are new: the counts carry on from where they
	// were.
	fake.Advance(time.Minute)
	s.Check("bob", "/login")
	want[dec("api", "/login", fw11m, "admitted")]++
	assert.Equal(t, want, counter(t, collect(t, r), "admit.decisions"))
}

// TestStoresDeduplicated: the limiter that serves /login for the api and
// the user scope is reported once, with the keys of both scopes' users,
// and without a scope attribute.
func TestStoresDeduplicated(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp))
	s, _ := service(t, observeBook, o, policy.WithFactory(admitatomic.New), admit.WithMaxKeys(100))
	assert.True(t, s.Check("vip", "/login").Allowed)
	assert.True(t, s.Check("alice", "/login").Allowed)
	ms := collect(t, r)
	assert.Equal(t, map[string]int64{
		dec("api", "/login", fw11m, "admitted"):  1,
		dec("api", "/login", fw11m, "denied"):    0,
		dec("user", "/login", fw11m, "admitted"): 1,
		dec("user", "/login", fw11m, "denied"):   0,
	}, counter(t, ms, "admit.decisions"))
	login := store("/login", fw11m)
	assert.Equal(t, map[string]int64{login: 2}, upDown(t, ms, "admit.store.keys"))
	assert.Equal(t, map[string]int64{login: 100}, upDown(t, ms, "admit.store.max_keys"))
	assert.Equal(t, map[string]int64{login: 0}, counter(t, ms, "admit.store.evictions"))
	assert.Equal(t, map[string]int64{login: 0}, counter(t, ms, "admit.store.full_denials"))
	assert.Equal(t, "{key}", ms["admit.store.keys"].Unit)
	assert.Equal(t, "{request}", ms["admit.store.full_denials"].Unit)

	// The same again at the next collection: one data point per store.
	ms = collect(t, r)
	assert.Equal(t, map[string]int64{login: 2}, upDown(t, ms, "admit.store.keys"))
}

// TestStoreFull: a full store's denials and evictions are reported as the
// store counts them, and a store without a bound reports no max_keys. The
// store has one shard, so that a full store examines every key for an idle
// one (with more, which it examines depends on its random hash seed).
func TestStoreFull(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp))
	s, fake := service(t, observeBook, o, policy.WithFactory(admitatomic.New), admit.WithMaxKeys(1), admit.WithShards(1))
	assert.True(t, s.Check("alice", "/login").Allowed)
	assert.False(t, s.Check("bob", "/login").Allowed, "a full store denies a new key")
	login := store("/login", fw11m)
	ms := collect(t, r)
	assert.Equal(t, map[string]int64{login: 1}, upDown(t, ms, "admit.store.keys"))
	assert.Equal(t, map[string]int64{login: 1}, upDown(t, ms, "admit.store.max_keys"))
	assert.Equal(t, map[string]int64{login: 1}, counter(t, ms, "admit.store.full_denials"))
	assert.Equal(t, map[string]int64{login: 0}, counter(t, ms, "admit.store.evictions"))

	// Two minutes on, alice's key is idle: bob's takes its place.
	fake.Advance(2 * time.Minute)
	assert.True(t, s.Check("bob", "/login").Allowed)
	ms = collect(t, r)
	assert.Equal(t, map[string]int64{login: 1}, upDown(t, ms, "admit.store.keys"))
	assert.Equal(t, map[string]int64{login: 1}, counter(t, ms, "admit.store.full_denials"))
	assert.Equal(t, map[string]int64{login: 1}, counter(t, ms, "admit.store.evictions"))

	// Without WithMaxKeys: no bound to report.
	mp2, r2 := provider(t)
	o2 := newObserver(t, otel.WithMeterProvider(mp2))
	s2, _ := service(t, observeBook, o2, policy.WithFactory(admitatomic.New))
	s2.Check("alice", "/login")
	ms = collect(t, r2)
	assert.Equal(t, map[string]int64{login: 1}, upDown(t, ms, "admit.store.keys"))
	assert.Empty(t, upDown(t, ms, "admit.store.max_keys"))
}

// TestNoStoreStats: labels without a Store report decisions and no store
// instrument.
func TestNoStoreStats(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp))
	o.Instrument(observe.Labels{Source: "redis", Name: "rl:"}).Observe(observe.Admitted, 1, 0)
	ms := collect(t, r)
	assert.Equal(t, map[string]int64{
		"admit.name=rl: admit.outcome=admitted admit.source=redis": 1,
		"admit.name=rl: admit.outcome=denied admit.source=redis":   0,
	}, counter(t, ms, "admit.decisions"))
	for _, name := range []string{"admit.store.keys", "admit.store.max_keys", "admit.store.evictions", "admit.store.full_denials"} {
		got, _ := sum(t, ms, name)
		assert.Empty(t, got, name)
	}
}

// TestNoKeys: no attribute value holds a user name.
func TestNoKeys(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp))
	s, _ := service(t, observeBook, o, policy.WithFactory(admitatomic.New))
	for i := range 50 {
		s.Check(fmt.Sprintf("user-%d", i), "/orders")
	}
	for name, m := range collect(t, r) {
		if d, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range d.DataPoints {
				assert.NotContains(t, attrs(p.Attributes), "user-", name)
			}
		}
	}
}

// TestLatency: the histogram exists only with WithLatency; its buckets are
// the bounds in seconds, and it counts each decision under its series'
// attributes and outcome, as the decisions counter does.
func TestLatency(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp), otel.WithLatency(time.Microsecond, time.Millisecond))
	in := o.Instrument(labels(t, "/a"))
	require.True(t, in.Timed())
	assert.Same(t, in, o.Instrument(labels(t, "/a")), "the same labels, the same instrument")
	in.Observe(observe.Admitted, 1, 500*time.Microsecond)
	in.Observe(observe.Admitted, 1, 0)
	in.Observe(observe.Denied, 1, 2*time.Millisecond)
	in.Observe(observe.Outcome(0), 1, time.Millisecond) // not an outcome: counted nowhere
	ms := collect(t, r)
	m, ok := ms["admit.decision.duration"]
	require.True(t, ok)
	assert.Equal(t, "s", m.Unit)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "a %T", m.Data)
	assert.Equal(t, metricdata.CumulativeTemporality, h.Temporality)
	got := map[string][]uint64{}
	for _, p := range h.DataPoints {
		assert.Equal(t, []float64{1e-6, 1e-3}, p.Bounds)
		got[attrs(p.Attributes)] = append(p.BucketCounts, p.Count)
	}
	assert.Equal(t, map[string][]uint64{
		dec("default", "/a", tb21m, "admitted"): {1, 1, 0, 2},
		dec("default", "/a", tb21m, "denied"):   {0, 0, 1, 1},
	}, got, "bucket counts, then the count")
	assert.Equal(t, map[string]int64{
		dec("default", "/a", tb21m, "admitted"): 2,
		dec("default", "/a", tb21m, "denied"):   1,
	}, counter(t, ms, "admit.decisions"))

	// A Service's Checks, timed: one recording each (their durations are
	// the machine's, and not asserted).
	mp2, r2 := provider(t)
	o2 := newObserver(t, otel.WithMeterProvider(mp2), otel.WithLatency())
	s, _ := service(t, observeBook, o2)
	for range 5 {
		s.Check("alice", "/orders")
	}
	h, ok = collect(t, r2)["admit.decision.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok)
	counts := map[string]uint64{}
	for _, p := range h.DataPoints {
		counts[attrs(p.Attributes)] = p.Count
		assert.Len(t, p.Bounds, len(tally.DefaultBounds))
	}
	assert.Equal(t, map[string]uint64{
		dec("default", "/orders", tb21m, "admitted"): 2,
		dec("default", "/orders", tb21m, "denied"):   3,
	}, counts)

	// Untimed without WithLatency.
	mp3, _ := provider(t)
	assert.False(t, newObserver(t, otel.WithMeterProvider(mp3)).Instrument(labels(t, "/a")).Timed())
}

// registered tells whether this test binary has registered a global meter
// provider: the global provider moves the instruments created before to the
// first provider registered only, once per process.
var registered bool

// TestMeterProvider: without WithMeterProvider the Observer reports to the
// global provider, including an Observer built before the first provider
// was registered; with it, to the given one only.
func TestMeterProvider(t *testing.T) {
	prev := otelapi.GetMeterProvider()
	t.Cleanup(func() { otelapi.SetMeterProvider(prev) })
	global, rg := provider(t)
	mine, rm := provider(t)
	want := map[string]int64{}
	if !registered {
		early := newObserver(t)
		early.Instrument(labels(t, "/early")).Observe(observe.Admitted, 1, 0)
		want[dec("default", "/early", tb21m, "admitted")] = 1
		want[dec("default", "/early", tb21m, "denied")] = 0
	}
	registered = true
	otelapi.SetMeterProvider(global)

	og := newObserver(t)
	om := newObserver(t, otel.WithMeterProvider(mine))
	og.Instrument(labels(t, "/global")).Observe(observe.Admitted, 1, 0)
	om.Instrument(labels(t, "/mine")).Observe(observe.Admitted, 1, 0)
	want[dec("default", "/global", tb21m, "admitted")] = 1
	want[dec("default", "/global", tb21m, "denied")] = 0
	assert.Equal(t, want, counter(t, collect(t, rg), "admit.decisions"))
	assert.Equal(t, map[string]int64{
		dec("default", "/mine", tb21m, "admitted"): 1,
		dec("default", "/mine", tb21m, "denied"):   0,
	}, counter(t, collect(t, rm), "admit.decisions"))
}

// TestFolding: past WithMaxSeries, label sets are counted under "_other",
// and admit.observer.folds counts them; the latency histogram folds alike.
func TestFolding(t *testing.T) {
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp), otel.WithMaxSeries(1), otel.WithLatency())
	s, _ := service(t, "default = token-bucket,2,1m\n", o, policy.WithFactory(admitatomic.New))
	for _, api := range []string{"/a", "/b", "/c", "/b"} {
		s.Check("alice", api)
	}
	ms := collect(t, r)
	assert.Equal(t, map[string]int64{
		dec("default", "/a", tb21m, "admitted"):     1,
		dec("default", "/a", tb21m, "denied"):       0,
		dec("default", "_other", tb21m, "admitted"): 3,
		dec("default", "_other", tb21m, "denied"):   0,
	}, counter(t, ms, "admit.decisions"))
	assert.Equal(t, map[string]int64{"": 2}, counter(t, ms, "admit.observer.folds"))
	assert.Equal(t, map[string]int64{store("/a", tb21m): 1}, upDown(t, ms, "admit.store.keys"),
		"a folded series reports no store")
	h, ok := ms["admit.decision.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok)
	counts := map[string]uint64{}
	for _, p := range h.DataPoints {
		counts[attrs(p.Attributes)] = p.Count
	}
	assert.Equal(t, map[string]uint64{
		dec("default", "/a", tb21m, "admitted"):     1,
		dec("default", "_other", tb21m, "admitted"): 3,
	}, counts)
}

// TestWithTally: an Observer over a Tally reports what the Tally counts,
// whoever was given to the limiters, and its Instrument is the Tally's.
func TestWithTally(t *testing.T) {
	tl, err := tally.New()
	require.NoError(t, err)
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp), otel.WithTally(tl))
	s, _ := service(t, "default = token-bucket,2,1m\n", tl)
	for range 3 {
		s.Check("alice", "/a")
	}
	assert.Equal(t, map[string]int64{
		dec("default", "/a", tb21m, "admitted"): 2,
		dec("default", "/a", tb21m, "denied"):   1,
	}, counter(t, collect(t, r), "admit.decisions"))
	assert.Equal(t, tl.Instrument(labels(t, "/b")), o.Instrument(labels(t, "/b")))
}

// TestUnregister: after Unregister, the asynchronous instruments report
// nothing and the histogram records nothing; a second call is a no-op.
func TestUnregister(t *testing.T) {
	mp, r := provider(t)
	o, err := otel.New(otel.WithMeterProvider(mp), otel.WithLatency())
	require.NoError(t, err)
	in := o.Instrument(labels(t, "/a"))
	in.Observe(observe.Admitted, 1, time.Microsecond)
	require.Contains(t, collect(t, r), "admit.decisions")
	require.NoError(t, o.Unregister())
	require.NoError(t, o.Unregister())
	in.Observe(observe.Admitted, 1, time.Microsecond)
	ms := collect(t, r)
	assert.NotContains(t, ms, "admit.decisions")
	assert.NotContains(t, ms, "admit.observer.folds")
	if m, ok := ms["admit.decision.duration"]; ok {
		// The SDK keeps the cumulative histogram: one recording, not two.
		h := m.Data.(metricdata.Histogram[float64])
		require.Len(t, h.DataPoints, 1)
		assert.Equal(t, uint64(1), h.DataPoints[0].Count)
	}
}

// TestOptionErrors: bad and contradictory options are errors wrapping
// admit.ErrInvalidOption, each saying what to do instead.
func TestOptionErrors(t *testing.T) {
	tl, err := tally.New()
	require.NoError(t, err)
	mp, _ := provider(t)
	for _, tc := range []struct {
		name string
		opts []otel.Option
		want string
	}{
		{"nil option", []otel.Option{nil}, "option 1 is nil"},
		{"nil provider", []otel.Option{otel.WithMeterProvider(nil)}, "WithMeterProvider(nil)"},
		{"nil tally", []otel.Option{otel.WithTally(nil)}, "WithTally(nil)"},
		{"zero bound", []otel.Option{otel.WithLatency(0)}, "bound 0 is 0s"},
		{"descending bounds", []otel.Option{otel.WithLatency(time.Millisecond, time.Microsecond)}, "ascending"},
		{"equal bounds", []otel.Option{otel.WithLatency(time.Millisecond, time.Millisecond)}, "ascending"},
		{"max series 0", []otel.Option{otel.WithMaxSeries(0)}, "want at least 1"},
		{"tally and latency", []otel.Option{otel.WithTally(tl), otel.WithLatency()}, "WithLatency with WithTally"},
		{"tally and max series", []otel.Option{otel.WithMaxSeries(5), otel.WithTally(tl)}, "tally.WithMaxSeries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := otel.New(append([]otel.Option{otel.WithMeterProvider(mp)}, tc.opts...)...)
			assert.Nil(t, o)
			require.Error(t, err)
			assert.True(t, errors.Is(err, admit.ErrInvalidOption), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestCollectWhileChecking: Checks racing collections are each counted
// once, and no collection sees a count decrease.
func TestCollectWhileChecking(t *testing.T) {
	goroutines, each := 4, 2000
	if testing.Short() {
		each = 200
	}
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp), otel.WithLatency())
	s, _ := service(t, "default = token-bucket,100,1h\napi./b = fixed-window,50,1h\n", o)
	var wg sync.WaitGroup
	var done atomic.Bool
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				api := "/a"
				if i%2 == 1 {
					api = "/b"
				}
				s.Check(fmt.Sprintf("u%d", (g*each+i)%16), api)
			}
		}()
	}
	collected := make(chan int)
	go func() {
		last := map[string]int64{}
		n := 0
		for !done.Load() {
			got, err := decisions(r)
			if err != nil {
				t.Error(err)
				break
			}
			for k, v := range got {
				if v < last[k] {
					t.Errorf("%s went from %d to %d", k, last[k], v)
				}
				last[k] = v
			}
			n++
		}
		collected <- n
	}()
	wg.Wait()
	done.Store(true)
	t.Logf("%d collections while checking", <-collected)
	var total int64
	for _, v := range counter(t, collect(t, r), "admit.decisions") {
		total += v
	}
	assert.Equal(t, int64(goroutines*each), total)
}

// decisions is counter(…, "admit.decisions") for a goroutine other than the
// test's, which must not stop the test: it returns an error instead.
func decisions(r *sdkmetric.ManualReader) (map[string]int64, error) {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "admit.decisions" {
				continue
			}
			s, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				return nil, fmt.Errorf("admit.decisions is a %T", m.Data)
			}
			for _, p := range s.DataPoints {
				out[attrs(p.Attributes)] = p.Value
			}
		}
	}
	return out, nil
}
