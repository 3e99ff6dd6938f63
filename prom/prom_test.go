package prom_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/prom"
	"github.com/admit-go/admit/sharded"
	"github.com/admit-go/admit/tally"
)

// observeBook gives /login one limiter for two scopes: vip's rule equals
// /login's, so vip on /login is decided by the (fixed-window,1,1m, /login)
// limiter, as alice is.
const observeBook = `
default    = token-bucket,2,1m
api./login = fixed-window,1,1m
user.vip   = fixed-window,1,1m
`

func parse(t *testing.T, text string) *policy.Book {
	t.Helper()
	b, err := policy.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("policy.Parse: %v", err)
	}
	return b
}

func newCollector(t testing.TB, opts ...prom.Option) *prom.Collector {
	t.Helper()
	c, err := prom.New(opts...)
	if err != nil {
		t.Fatalf("prom.New: %v", err)
	}
	return c
}

// pedantic returns a pedantic registry with c registered: it checks every
// collected metric against c's Describe.
func pedantic(t testing.TB, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

func newService(t testing.TB, book *policy.Book, opts ...admit.Option) *policy.Service {
	t.Helper()
	s, err := policy.NewService(book, opts...)
	if err != nil {
		t.Fatalf("policy.NewService: %v", err)
	}
	return s
}

// meta is the HELP and TYPE of each metric, with the default namespace.
var meta = map[string][2]string{
	"admit_decisions_total":           {"Decisions of admit's limiters, by outcome (a decision about n requests counts once).", "counter"},
	"admit_decision_duration_seconds": {"Time admit's limiters took to decide.", "histogram"},
	"admit_store_keys":                {"Keys held by the keyed store behind a limiter.", "gauge"},
	"admit_store_max_keys":            {"Bound of keys of the keyed store behind a limiter (WithMaxKeys); absent when it has none.", "gauge"},
	"admit_store_evictions_total":     {"Keys evicted from the keyed store behind a limiter.", "counter"},
	"admit_store_full_denials_total":  {"Requests for new keys denied because the keyed store behind a limiter was full.", "counter"},
	"admit_observer_folds_total": {`Times a set of labels was counted under the name "_other" because the bound of series was reached: once for each limiter built under such labels.`,
		"counter"},
}

// expect compares the samples of the named metric in reg with samples (text
// exposition lines, without HELP and TYPE).
func expect(t *testing.T, reg prometheus.Gatherer, metric string, samples ...string) {
	t.Helper()
	m, ok := meta[metric]
	if !ok {
		t.Fatalf("no HELP and TYPE for %s", metric)
	}
	text := fmt.Sprintf("# HELP %s %s\n# TYPE %s %s\n%s\n", metric, m[0], metric, m[1], strings.Join(samples, "\n"))
	if len(samples) == 0 {
		text = ""
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(text), metric); err != nil {
		t.Errorf("%s: %v", metric, err)
	}
}

// TestDecisionsFromService: every Check of a Service is counted once,
// under its API, the scope of the entry that decided it and its limits;
// the store behind each limiter is reported once.
func TestDecisionsFromService(t *testing.T) {
	c := newCollector(t)
	reg := pedantic(t, c)
	s := newService(t, parse(t, observeBook), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="admitted",scope="api",source="policy"} 0`,
		`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="denied",scope="api",source="policy"} 0`,
	)
	for range 3 {
		s.Check("alice", "/orders")
		s.Check("alice", "/login")
		s.Check("vip", "/login")
		s.Check("vip", "/orders")
	}
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="admitted",scope="api",source="policy"} 1`,
		`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="denied",scope="api",source="policy"} 2`,
		`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="admitted",scope="user",source="policy"} 1`,
		`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="denied",scope="user",source="policy"} 2`,
		`admit_decisions_total{limits="fixed-window,1,1m",name="/orders",outcome="admitted",scope="user",source="policy"} 1`,
		`admit_decisions_total{limits="fixed-window,1,1m",name="/orders",outcome="denied",scope="user",source="policy"} 2`,
		`admit_decisions_total{limits="token-bucket,2,1m",name="/orders",outcome="admitted",scope="default",source="policy"} 2`,
		`admit_decisions_total{limits="token-bucket,2,1m",name="/orders",outcome="denied",scope="default",source="policy"} 1`,
	)
	expect(t, reg, "admit_store_keys",
		`admit_store_keys{limits="fixed-window,1,1m",name="/login",source="policy"} 2`,
		`admit_store_keys{limits="fixed-window,1,1m",name="/orders",source="policy"} 1`,
		`admit_store_keys{limits="token-bucket,2,1m",name="/orders",source="policy"} 1`,
	)
	expect(t, reg, "admit_store_max_keys") // no WithMaxKeys: absent
	expect(t, reg, "admit_decision_duration_seconds")
	expect(t, reg, "admit_observer_folds_total", "admit_observer_folds_total 0")
}

// TestStoreReleased: a Reload that takes limits out of the book drops the
// store metrics of their limiters from the scrape (the Collector lets the
// stores go); their decisions stay.
func TestStoreReleased(t *testing.T) {
	c := newCollector(t)
	reg := pedantic(t, c)
	s := newService(t, parse(t, "default = token-bucket,2,1m\n"), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
	s.Check("alice", "/orders")
	expect(t, reg, "admit_store_keys", `admit_store_keys{limits="token-bucket,2,1m",name="/orders",source="policy"} 1`)
	if err := s.Reload(parse(t, "default = token-bucket,3,1m\n")); err != nil {
		t.Fatal(err)
	}
	s.Check("bob", "/orders")
	expect(t, reg, "admit_store_keys", `admit_store_keys{limits="token-bucket,3,1m",name="/orders",source="policy"} 2`)
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="token-bucket,2,1m",name="/orders",outcome="admitted",scope="default",source="policy"} 1`,
		`admit_decisions_total{limits="token-bucket,2,1m",name="/orders",outcome="denied",scope="default",source="policy"} 0`,
		`admit_decisions_total{limits="token-bucket,3,1m",name="/orders",outcome="admitted",scope="default",source="policy"} 1`,
		`admit_decisions_total{limits="token-bucket,3,1m",name="/orders",outcome="denied",scope="default",source="policy"} 0`,
	)
}

// TestStoreAcrossScopes: the (fixed-window,1,1m, /login) limiter decides
// for vip under scope user and for the others under scope api; its store
// is reported once, with exact keys, evictions and full-store denials, for
// every variant that can be the Service's factory.
func TestStoreAcrossScopes(t *testing.T) {
	for _, v := range []struct {
		name    string
		factory func(admit.Rule, ...admit.Option) (admit.Store, error)
	}{{"atomic", atomic.New}, {"locked", locked.New}, {"sharded", sharded.New}} {
		t.Run("impl="+v.name, func(t *testing.T) {
			c := newCollector(t)
			reg := pedantic(t, c)
			// One shard: a new key in a full store examines every key
			// (admit.WithMaxKeys), so which keys make room does not hang
			// on the store's hash seed.
			fake := clock.NewFake()
			s := newService(t, parse(t, observeBook), policy.WithObserver(c), policy.WithFactory(v.factory),
				admit.WithClock(fake), admit.WithMaxKeys(2), admit.WithShards(1))
			steps := []struct {
				user    string
				advance time.Duration
				want    bool
			}{
				{"vip", 0, true},
				{"alice", 0, true},
				{"bob", 0, false},                // the store is full of fresh keys: a full-store denial
				{"carol", 2 * time.Minute, true}, // vip and alice are idle now: both evicted
			}
			for i, st := range steps {
				fake.Advance(st.advance)
				if d := s.Check(st.user, "/login"); d.Allowed != st.want {
					t.Fatalf("step %d: Check(%q, /login).Allowed = %v, want %v", i, st.user, d.Allowed, st.want)
				}
			}
			expect(t, reg, "admit_decisions_total",
				`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="admitted",scope="api",source="policy"} 2`,
				`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="denied",scope="api",source="policy"} 1`,
				`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="admitted",scope="user",source="policy"} 1`,
				`admit_decisions_total{limits="fixed-window,1,1m",name="/login",outcome="denied",scope="user",source="policy"} 0`,
			)
			expect(t, reg, "admit_store_keys", `admit_store_keys{limits="fixed-window,1,1m",name="/login",source="policy"} 1`)
			expect(t, reg, "admit_store_max_keys", `admit_store_max_keys{limits="fixed-window,1,1m",name="/login",source="policy"} 2`)
			expect(t, reg, "admit_store_evictions_total", `admit_store_evictions_total{limits="fixed-window,1,1m",name="/login",source="policy"} 2`)
			expect(t, reg, "admit_store_full_denials_total", `admit_store_full_denials_total{limits="fixed-window,1,1m",name="/login",source="policy"} 1`)
		})
	}
}

// fakeStore is a StatsReporter with set statistics.
type fakeStore struct{ st admit.StoreStats }

func (f *fakeStore) Stats() admit.StoreStats { return f.st }

// TestStoreStats: each field of StoreStats reaches its metric, max_keys
// only when the store has a bound, and a series without a Store reports no
// store metrics.
func TestStoreStats(t *testing.T) {
	c := newCollector(t)
	reg := pedantic(t, c)
	c.Instrument(observe.Labels{Source: "http", Name: "bounded", Store: &fakeStore{admit.StoreStats{Keys: 7, MaxKeys: 100, Evictions: 1 << 40, FullDenials: 3}}})
	c.Instrument(observe.Labels{Source: "http", Name: "unbounded", Store: &fakeStore{admit.StoreStats{Keys: 9}}})
	c.Instrument(observe.Labels{Source: "http", Name: "nostore"})
	expect(t, reg, "admit_store_keys",
		`admit_store_keys{limits="",name="bounded",source="http"} 7`,
		`admit_store_keys{limits="",name="unbounded",source="http"} 9`,
	)
	expect(t, reg, "admit_store_max_keys", `admit_store_max_keys{limits="",name="bounded",source="http"} 100`)
	expect(t, reg, "admit_store_evictions_total",
		`admit_store_evictions_total{limits="",name="bounded",source="http"} 1.099511627776e+12`,
		`admit_store_evictions_total{limits="",name="unbounded",source="http"} 0`,
	)
	expect(t, reg, "admit_store_full_denials_total",
		`admit_store_full_denials_total{limits="",name="bounded",source="http"} 3`,
		`admit_store_full_denials_total{limits="",name="unbounded",source="http"} 0`,
	)
}

// TestOutcomes: admitted and denied are reported from the start, every
// other outcome from its first count, each under its name.
func TestOutcomes(t *testing.T) {
	c := newCollector(t)
	reg := pedantic(t, c)
	limits, err := admit.NewLimits(admit.Rule{Algorithm: admit.SlidingCounter, Limit: 10, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in := c.Instrument(observe.Labels{Source: "redis", Name: "rl:", Limits: limits})
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="sliding-counter,10,1s",name="rl:",outcome="admitted",scope="",source="redis"} 0`,
		`admit_decisions_total{limits="sliding-counter,10,1s",name="rl:",outcome="denied",scope="",source="redis"} 0`,
	)
	in.Observe(observe.TimedOut, 1, 0)
	in.Observe(observe.FellBack, 1, 0)
	in.Observe(observe.FellBack, 1, 0)
	in.Observe(observe.Admitted, 5, 0) // a decision about 5 requests counts once
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="sliding-counter,10,1s",name="rl:",outcome="admitted",scope="",source="redis"} 1`,
		`admit_decisions_total{limits="sliding-counter,10,1s",name="rl:",outcome="denied",scope="",source="redis"} 0`,
		`admit_decisions_total{limits="sliding-counter,10,1s",name="rl:",outcome="timed_out",scope="",source="redis"} 1`,
		`admit_decisions_total{limits="sliding-counter,10,1s",name="rl:",outcome="fell_back",scope="",source="redis"} 2`,
	)
	in.Observe(observe.Errored, 1, 0)
	in.Observe(observe.ShadowDenied, 1, 0)
	if n, err := testutil.GatherAndCount(reg, "admit_decisions_total"); err != nil || n != observe.NumOutcomes-1 {
		t.Errorf("GatherAndCount = %d, %v; want %d series, one per outcome", n, err, observe.NumOutcomes-1)
	}
	for o := observe.Admitted; int(o) < observe.NumOutcomes; o++ {
		found := false
		for _, m := range gather(t, reg)["admit_decisions_total"].GetMetric() {
			found = found || label(m, "outcome") == o.String()
		}
		if !found {
			t.Errorf("no series with outcome=%q", o)
		}
	}
	expect(t, reg, "admit_store_keys") // no Store: no store metrics
}

// TestLatencyHistogram: the tally's buckets, converted to seconds and made
// cumulative, with the sum in seconds.
func TestLatencyHistogram(t *testing.T) {
	c := newCollector(t, prom.WithLatency(time.Microsecond, 10*time.Microsecond, 100*time.Microsecond))
	reg := pedantic(t, c)
	in := c.Instrument(observe.Labels{Source: "grpc", Name: "default"})
	if !in.Timed() {
		t.Fatal("Timed() = false with WithLatency")
	}
	for _, d := range []time.Duration{500 * time.Nanosecond, time.Microsecond, 3 * time.Microsecond, 40 * time.Microsecond, 2 * time.Millisecond} {
		in.Observe(observe.Admitted, 1, d)
	}
	l := `{limits="",name="default",scope="",source="grpc"`
	expect(t, reg, "admit_decision_duration_seconds",
		`admit_decision_duration_seconds_bucket`+l+`,le="1e-06"} 2`,
		`admit_decision_duration_seconds_bucket`+l+`,le="1e-05"} 3`,
		`admit_decision_duration_seconds_bucket`+l+`,le="0.0001"} 4`,
		`admit_decision_duration_seconds_bucket`+l+`,le="+Inf"} 5`,
		`admit_decision_duration_seconds_sum`+l+`} 0.0020445`,
		`admit_decision_duration_seconds_count`+l+`} 5`,
	)
}

// TestLatencyFromService: with WithLatency every series of a Service has a
// histogram counting each of its decisions; without it, none.
func TestLatencyFromService(t *testing.T) {
	for _, timed := range []bool{false, true} {
		var opts []prom.Option
		if timed {
			opts = append(opts, prom.WithLatency())
		}
		c := newCollector(t, opts...)
		reg := pedantic(t, c)
		s := newService(t, parse(t, observeBook), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
		for range 5 {
			s.Check("alice", "/orders")
			s.Check("vip", "/login")
		}
		fams := gather(t, reg)
		h := fams["admit_decision_duration_seconds"]
		if !timed {
			if h != nil {
				t.Errorf("a histogram without WithLatency: %v", h)
			}
			continue
		}
		// Three series: /login's api scope (resolved, never used), /login's
		// user scope and /orders' default scope.
		if got := len(h.GetMetric()); got != 3 {
			t.Fatalf("%d histograms, want 3", got)
		}
		for _, m := range h.GetMetric() {
			want := uint64(5)
			if label(m, "scope") == "api" {
				want = 0
			}
			hist := m.GetHistogram()
			if hist.GetSampleCount() != want {
				t.Errorf("scope %s: count %d, want %d", label(m, "scope"), hist.GetSampleCount(), want)
			}
			var prev uint64
			for _, b := range hist.GetBucket() {
				if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > hist.GetSampleCount() {
					t.Errorf("scope %s: bucket le=%g holds %d after %d, of %d", label(m, "scope"), b.GetUpperBound(), b.GetCumulativeCount(), prev, hist.GetSampleCount())
				}
				prev = b.GetCumulativeCount()
			}
			if got, want := len(hist.GetBucket()), len(tally.DefaultBounds); got != want {
				t.Errorf("%d buckets, want %d (tally.DefaultBounds)", got, want)
			}
		}
	}
}

// TestFolding: past WithMaxSeries, label sets are counted under
// name="_other" (one series per source, scope and limits), without store
// metrics, and the folds counter counts them.
func TestFolding(t *testing.T) {
	c := newCollector(t, prom.WithMaxSeries(1))
	reg := pedantic(t, c)
	s := newService(t, parse(t, "default = token-bucket,2,1m\n"), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
	for _, api := range []string{"/a", "/b", "/c", "/b"} {
		s.Check("alice", api)
	}
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="token-bucket,2,1m",name="/a",outcome="admitted",scope="default",source="policy"} 1`,
		`admit_decisions_total{limits="token-bucket,2,1m",name="/a",outcome="denied",scope="default",source="policy"} 0`,
		`admit_decisions_total{limits="token-bucket,2,1m",name="_other",outcome="admitted",scope="default",source="policy"} 3`,
		`admit_decisions_total{limits="token-bucket,2,1m",name="_other",outcome="denied",scope="default",source="policy"} 0`,
	)
	expect(t, reg, "admit_observer_folds_total", "admit_observer_folds_total 2")
	expect(t, reg, "admit_store_keys", `admit_store_keys{limits="token-bucket,2,1m",name="/a",source="policy"} 1`)
}

// TestInvalidUTF8: names that are not valid UTF-8 are reported with
// U+FFFD, and names that become equal are one series, summed: the scrape
// never fails.
func TestInvalidUTF8(t *testing.T) {
	c := newCollector(t, prom.WithLatency(time.Second))
	reg := pedantic(t, c)
	for _, name := range []string{"/a\xff", "/a\xfe", "/a\uFFFD"} {
		c.Instrument(observe.Labels{Source: "policy", Name: name, Scope: "default", Store: &fakeStore{admit.StoreStats{Keys: 1}}}).Observe(observe.Denied, 1, time.Millisecond)
	}
	expect(t, reg, "admit_decisions_total",
		`admit_decisions_total{limits="",name="/a`+"\uFFFD"+`",outcome="admitted",scope="default",source="policy"} 0`,
		`admit_decisions_total{limits="",name="/a`+"\uFFFD"+`",outcome="denied",scope="default",source="policy"} 3`,
	)
	expect(t, reg, "admit_store_keys", `admit_store_keys{limits="",name="/a`+"\uFFFD"+`",source="policy"} 1`)
	h := gather(t, reg)["admit_decision_duration_seconds"].GetMetric()
	if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 3 {
		t.Errorf("histograms %v, want one of 3 decisions", h)
	}
}

// TestNamespace: WithNamespace renames every metric.
func TestNamespace(t *testing.T) {
	c := newCollector(t, prom.WithNamespace("edge_rl"), prom.WithLatency())
	reg := pedantic(t, c)
	c.Instrument(observe.Labels{Source: "http", Name: "default", Store: &fakeStore{admit.StoreStats{MaxKeys: 1}}}).Observe(observe.Admitted, 1, time.Microsecond)
	var names []string
	for name := range gather(t, reg) {
		names = append(names, name)
	}
	want := []string{
		"edge_rl_decision_duration_seconds", "edge_rl_decisions_total", "edge_rl_observer_folds_total",
		"edge_rl_store_evictions_total", "edge_rl_store_full_denials_total", "edge_rl_store_keys", "edge_rl_store_max_keys",
	}
	if fmt.Sprint(slices.Sorted(slices.Values(names))) != fmt.Sprint(want) {
		t.Errorf("metrics %v, want %v", slices.Sorted(slices.Values(names)), want)
	}
}

// TestDescribe: Describe sends the seven metrics' descriptions, and two
// Collectors of one namespace cannot share a registry.
func TestDescribe(t *testing.T) {
	c := newCollector(t)
	ch := make(chan *prometheus.Desc, 16)
	c.Describe(ch)
	close(ch)
	var got []string
	for d := range ch {
		got = append(got, d.String())
	}
	if len(got) != 7 {
		t.Errorf("Describe sent %d descriptions, want 7: %v", len(got), got)
	}
	reg := pedantic(t, c)
	if err := reg.Register(newCollector(t)); err == nil {
		t.Error("a second Collector of the same namespace registered without error")
	}
	if err := reg.Register(newCollector(t, prom.WithNamespace("other"))); err != nil {
		t.Errorf("a Collector of another namespace: %v", err)
	}
}

// TestWithTally: one Tally attached once is exported by two Collectors,
// which report the same counts.
func TestWithTally(t *testing.T) {
	tl, err := tally.New()
	if err != nil {
		t.Fatal(err)
	}
	a := newCollector(t, prom.WithTally(tl))
	b := newCollector(t, prom.WithTally(tl), prom.WithNamespace("b"))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a, b)
	s := newService(t, parse(t, "default = fixed-window,1,1m\n"), policy.WithObserver(tl), admit.WithClock(clock.NewFake()))
	s.Check("alice", "/x")
	s.Check("alice", "/x")
	fams := gather(t, reg)
	for _, name := range []string{"admit_decisions_total", "b_decisions_total"} {
		var got []string
		for _, m := range fams[name].GetMetric() {
			got = append(got, fmt.Sprintf("%s=%g", label(m, "outcome"), m.GetCounter().GetValue()))
		}
		if fmt.Sprint(got) != "[admitted=1 denied=1]" {
			t.Errorf("%s: %v, want [admitted=1 denied=1]", name, got)
		}
	}
}

// TestOptionErrors: each bad option is an error wrapping
// admit.ErrInvalidOption that names what is wrong.
func TestOptionErrors(t *testing.T) {
	tl, err := tally.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts []prom.Option
		want string
	}{
		{[]prom.Option{nil}, "option 0 is nil"},
		{[]prom.Option{prom.WithTally(nil)}, "WithTally(nil)"},
		{[]prom.Option{prom.WithTally(tl), prom.WithLatency()}, "WithLatency beside WithTally"},
		{[]prom.Option{prom.WithLatency(), prom.WithTally(tl)}, "WithLatency beside WithTally"},
		{[]prom.Option{prom.WithTally(tl), prom.WithMaxSeries(5)}, "WithMaxSeries beside WithTally"},
		{[]prom.Option{prom.WithLatency(time.Second, time.Millisecond)}, "ascending"},
		{[]prom.Option{prom.WithLatency(-time.Second)}, "positive"},
		{[]prom.Option{prom.WithMaxSeries(0)}, "prom.WithMaxSeries(0)"},
		{[]prom.Option{prom.WithNamespace("")}, `WithNamespace("")`},
		{[]prom.Option{prom.WithNamespace("9lives")}, "not starting with a digit"},
		{[]prom.Option{prom.WithNamespace("a-b")}, "letters, digits and underscores"},
		{[]prom.Option{prom.WithNamespace("a:b")}, "letters, digits and underscores"},
	} {
		c, err := prom.New(tc.opts...)
		if c != nil || !errors.Is(err, admit.ErrInvalidOption) {
			t.Errorf("New(%d options) = %v, %v; want an error wrapping admit.ErrInvalidOption", len(tc.opts), c, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q does not say %q", err, tc.want)
		}
	}
}

// TestScrapeOverHTTP: a real scrape of /metrics over loopback, parsed as
// Prometheus parses it, has the counts of a Service's decisions and never a
// user name.
func TestScrapeOverHTTP(t *testing.T) {
	c := newCollector(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()

	s := newService(t, parse(t, observeBook), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
	for i := range 50 {
		s.Check(fmt.Sprintf("user-%d", i), "/orders")
		s.Check(fmt.Sprintf("user-%d", i), "/login")
		s.Check(fmt.Sprintf("user-%d", i), "/login")
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	var body strings.Builder
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(teeReader{resp, &body})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if strings.Contains(body.String(), "user-") {
		t.Error("a user name in the scrape")
	}
	got := map[string]float64{}
	for _, m := range fams["admit_decisions_total"].GetMetric() {
		got[label(m, "name")+" "+label(m, "scope")+" "+label(m, "outcome")] = m.GetCounter().GetValue()
	}
	want := map[string]float64{
		"/orders default admitted": 50, "/orders default denied": 0,
		"/login api admitted": 50, "/login api denied": 50,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
	for name, want := range map[string]float64{"admit_store_keys": 50, "admit_store_evictions_total": 0, "admit_store_full_denials_total": 0} {
		for _, m := range fams[name].GetMetric() {
			if v := m.GetGauge().GetValue() + m.GetCounter().GetValue(); v != want {
				t.Errorf("%s{name=%q} = %g, want %g", name, label(m, "name"), v, want)
			}
		}
		if n := len(fams[name].GetMetric()); n != 2 {
			t.Errorf("%s: %d series, want 2 (one per limiter)", name, n)
		}
	}
}

// teeReader copies what its response's body reads into w.
type teeReader struct {
	resp *http.Response
	w    *strings.Builder
}

func (r teeReader) Read(p []byte) (int, error) {
	n, err := r.resp.Body.Read(p)
	r.w.Write(p[:n])
	return n, err
}

// TestScrapeWhileChecking: Checks from several goroutines race scrapes;
// every scrape succeeds, keeps every series of the scrapes before it with
// counts no lower, and the last counts each Check exactly once.
func TestScrapeWhileChecking(t *testing.T) {
	const goroutines = 4
	each := 2000
	if testing.Short() {
		each = 200
	}
	c := newCollector(t, prom.WithLatency())
	reg := pedantic(t, c)
	s := newService(t, parse(t, observeBook), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
	apis := []string{"/orders", "/login", "/search", "/cart"}
	users := []string{"alice", "bob", "vip"}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				s.Check(users[(g+i)%len(users)], apis[i%len(apis)])
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	seen := map[string]float64{}
	scrape := func() {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		now := map[string]float64{}
		for _, f := range fams {
			if f.GetName() != "admit_decisions_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				now[labels(m)] = m.GetCounter().GetValue()
			}
		}
		for k, v := range seen {
			if now[k] < v {
				t.Fatalf("series %s went from %g to %g (or vanished)", k, v, now[k])
			}
		}
		seen = now
	}
	scrapes := 0
	for running := true; running; scrapes++ {
		select {
		case <-done:
			running = false
		default:
		}
		scrape()
	}
	var total float64
	for _, v := range seen {
		total += v
	}
	if total != goroutines*float64(each) {
		t.Errorf("%g decisions counted after %d scrapes, want %d", total, scrapes, goroutines*each)
	}
}

// gather returns reg's metric families by name.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// label returns the value of m's label name, or "".
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// labels returns m's labels as text, to key a series by.
func labels(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		fmt.Fprintf(&b, "%s=%q,", l.GetName(), l.GetValue())
	}
	return b.String()
}
