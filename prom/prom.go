package prom

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/tally"
)

// DefaultNamespace is the prefix of every metric name of a Collector built
// without [WithNamespace].
const DefaultNamespace = "admit"

// Option configures a [Collector].
type Option func(*config) error

type config struct {
	tally      *tally.Tally
	tallyOpts  []tally.Option
	latency    bool // WithLatency was given
	maxSeries  bool // WithMaxSeries was given
	namespace  string
	namespaced bool // WithNamespace was given
}

// WithTally makes the Collector export t instead of a Tally of its own, so
// that one Tally, attached once to a policy.Service or a middleware, can be
// exported by several exporters (this module and admit/otel, or two
// registries). t's own options then decide the histogram and the bound of
// series: WithTally refuses [WithLatency] and [WithMaxSeries] beside it.
func WithTally(t *tally.Tally) Option {
	return func(c *config) error {
		if t == nil {
			return fmt.Errorf("%w: prom.WithTally(nil); pass a *tally.Tally from tally.New, or leave the option out for a Tally of the Collector's own", admit.ErrInvalidOption)
		}
		c.tally = t
		return nil
	}
}

// WithLatency makes the Collector's Tally time decisions and export them as
// the histogram admit_decision_duration_seconds, with buckets of the given
// upper bounds (ascending and positive, at most 64; [tally.DefaultBounds],
// 100ns to 1s, when none is given), as [tally.WithLatency] does: callers
// then read the clock twice per decision. Without it no clock is read for
// observing and no histogram is exported.
func WithLatency(bounds ...time.Duration) Option {
	return func(c *config) error {
		c.tallyOpts = append(c.tallyOpts, tally.WithLatency(bounds...))
		c.latency = true
		return nil
	}
}

// WithMaxSeries bounds the series of the Collector's Tally to n (at least
// 1; [tally.DefaultMaxSeries] without this option): label sets past the
// bound are counted under the name "_other" ([tally.OtherName]), and the
// counter admit_observer_folds_total says how many times that happened.
func WithMaxSeries(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: prom.WithMaxSeries(%d); want at least 1, or leave the option out for %d", admit.ErrInvalidOption, n, tally.DefaultMaxSeries)
		}
		c.tallyOpts = append(c.tallyOpts, tally.WithMaxSeries(n))
		c.maxSeries = true
		return nil
	}
}

// WithNamespace makes ns, instead of [DefaultNamespace], the prefix of every
// metric name: ns_decisions_total and so on. ns must be a valid metric name
// of letters, digits and underscores, not starting with a digit.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if !validNamespace(ns) {
			return fmt.Errorf("%w: prom.WithNamespace(%q); want letters, digits and underscores, not starting with a digit, such as %q", admit.ErrInvalidOption, ns, DefaultNamespace)
		}
		c.namespace, c.namespaced = ns, true
		return nil
	}
}

// validNamespace reports whether ns matches [a-zA-Z_][a-zA-Z0-9_]*: a valid
// metric name without the colons Prometheus keeps for recording rules.
func validNamespace(ns string) bool {
	if ns == "" {
		return false
	}
	for i := 0; i < len(ns); i++ {
		b := ns[i]
		switch {
		case b == '_', 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z':
		case '0' <= b && b <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Collector exports the decisions counted by a [tally.Tally] to
// Prometheus. It is an [observe.Observer]: attach it with
// policy.WithObserver, httplimit.WithObserver or redisstore.WithObserver,
// and its Tally counts the decisions. It is a [prometheus.Collector]:
// register it on the application's registry, and at each scrape it reads
// [tally.Tally.Snapshot] and the statistics of the stores behind the series,
// and reports them as constant metrics (the package documentation lists
// them; docs/observability.md says what each holds). Nothing but the Tally's counting happens on the decision path. It
// never registers itself anywhere.
//
// Its methods are safe for concurrent use, scrapes concurrent with
// decisions included.
type Collector struct {
	t *tally.Tally

	decisions   *prometheus.Desc
	duration    *prometheus.Desc
	keys        *prometheus.Desc
	maxKeys     *prometheus.Desc
	evictions   *prometheus.Desc
	fullDenials *prometheus.Desc
	folded      *prometheus.Desc
}

// New returns a Collector that exports a new Tally, or the one of
// [WithTally]. An invalid option, or WithTally beside WithLatency or
// WithMaxSeries, is an error wrapping [admit.ErrInvalidOption].
func New(opts ...Option) (*Collector, error) {
	cfg := config{namespace: DefaultNamespace}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: prom.New: option %d is nil", admit.ErrInvalidOption, i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	t := cfg.tally
	if t != nil && (cfg.latency || cfg.maxSeries) {
		opt := "WithLatency"
		if !cfg.latency {
			opt = "WithMaxSeries"
		}
		return nil, fmt.Errorf("%w: prom.New: %s beside WithTally; a Tally's histogram and bound of series are set when it is built: pass tally.%s to tally.New, or leave WithTally out", admit.ErrInvalidOption, opt, opt)
	}
	if t == nil {
		var err error
		if t, err = tally.New(cfg.tallyOpts...); err != nil {
			return nil, fmt.Errorf("prom.New: %w", err) // already wraps admit.ErrInvalidOption
		}
	}
	ns := cfg.namespace
	series := []string{"source", "name", "scope", "limits"}
	store := []string{"source", "name", "limits"}
	return &Collector{
		t: t,
		decisions: prometheus.NewDesc(ns+"_decisions_total",
			"Decisions of admit's limiters, by outcome (a decision about n requests counts once).",
			append(series[:len(series):len(series)], "outcome"), nil),
		duration: prometheus.NewDesc(ns+"_decision_duration_seconds",
			"Time admit's limiters took to decide.", series, nil),
		keys: prometheus.NewDesc(ns+"_store_keys",
			"Keys held by the keyed store behind a limiter.", store, nil),
		maxKeys: prometheus.NewDesc(ns+"_store_max_keys",
			"Bound of keys of the keyed store behind a limiter (WithMaxKeys); absent when it has none.", store, nil),
		evictions: prometheus.NewDesc(ns+"_store_evictions_total",
			"Keys evicted from the keyed store behind a limiter.", store, nil),
		fullDenials: prometheus.NewDesc(ns+"_store_full_denials_total",
			"Requests for new keys denied because the keyed store behind a limiter was full.", store, nil),
		folded: prometheus.NewDesc(ns+"_observer_folds_total",
			`Times a set of labels was counted under the name "_other" because the bound of series was reached: once for each limiter built under such labels.`, nil, nil),
	}, nil
}

// Instrument implements [observe.Observer]: it returns the instrument of the
// Collector's Tally for labels (see [tally.Tally.Instrument]).
func (c *Collector) Instrument(labels observe.Labels) observe.Instrument {
	return c.t.Instrument(labels)
}

var _ observe.Releaser = (*Collector)(nil)

// Release implements [observe.Releaser]: the Collector's Tally lets go of
// the store of labels (see [tally.Tally.Release]), whose metrics then go
// from the scrape; the decisions stay.
func (c *Collector) Release(labels observe.Labels) { c.t.Release(labels) }

// Describe implements [prometheus.Collector]: it sends the descriptions of
// every metric the Collector may report, the histogram's included whether
// or not the Tally is timed.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range [...]*prometheus.Desc{c.decisions, c.duration, c.keys, c.maxKeys, c.evictions, c.fullDenials, c.folded} {
		ch <- d
	}
}

// seriesKey is a series' label values as exported.
type seriesKey struct{ source, name, scope, limits string }

// storeKey is a store's label values as exported.
type storeKey struct{ source, name, limits string }

// merged is what Collect reports for one seriesKey.
type merged struct {
	decisions [observe.NumOutcomes]uint64
	latency   *tally.Histogram
}

// Collect implements [prometheus.Collector]: it reads the Tally's snapshot
// and the stores' statistics, and sends them as constant metrics.
//
// Every series of the Tally reports the outcomes admitted and denied, at 0
// until counted, so that rate() sees the first of each; the other outcomes
// are reported from their first count on. A series, once reported, is
// reported at every later scrape: the Tally never drops a series, and its
// counts never decrease.
//
// Label values that are not valid UTF-8 (an API name taken from a request)
// have each invalid byte sequence replaced by U+FFFD; series whose label
// values become equal are reported as one, with their counts summed, so that
// the registry never sees a series twice.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.t.Snapshot()
	var order []seriesKey
	bySeries := make(map[seriesKey]*merged, len(snap))
	var stores []storeKey
	byStore := map[storeKey]observe.StatsReporter{}
	for i := range snap {
		s := &snap[i]
		l := &s.Labels
		limits := l.Limits.String()
		k := seriesKey{validUTF8(l.Source), validUTF8(l.Name), validUTF8(l.Scope), validUTF8(limits)}
		m := bySeries[k]
		if m == nil {
			m = &merged{}
			bySeries[k] = m
			order = append(order, k)
		}
		for o := range s.Decisions {
			m.decisions[o] += s.Decisions[o]
		}
		m.latency = addHistogram(m.latency, s.Latency)
		if l.Store != nil {
			// One store serves every scope of a policy.Service's (limits,
			// API) limiter: report it once, under the labels without the
			// scope. Should series of one (source, name, limits) name
			// different stores (a limiter a Reload rebuilt, under a scope
			// that has not decided through the new one yet), the store of
			// the series created last is reported.
			sk := storeKey{k.source, k.name, k.limits}
			if _, ok := byStore[sk]; !ok {
				stores = append(stores, sk)
			}
			byStore[sk] = l.Store
		}
	}
	for _, k := range order {
		m := bySeries[k]
		for o := observe.Admitted; int(o) < observe.NumOutcomes; o++ {
			if n := m.decisions[o]; n > 0 || o == observe.Admitted || o == observe.Denied {
				send(ch, c.decisions, prometheus.CounterValue, float64(n), k.source, k.name, k.scope, k.limits, o.String())
			}
		}
		if h := m.latency; h != nil {
			buckets := make(map[float64]uint64, len(h.Bounds))
			var cum uint64
			for i, b := range h.Bounds {
				cum += h.Counts[i]
				buckets[b.Seconds()] = cum
			}
			hm, err := prometheus.NewConstHistogram(c.duration, h.Count, h.Sum.Seconds(), buckets, k.source, k.name, k.scope, k.limits)
			if err != nil {
				hm = prometheus.NewInvalidMetric(c.duration, err)
			}
			ch <- hm
		}
	}
	for _, k := range stores {
		st := byStore[k].Stats()
		send(ch, c.keys, prometheus.GaugeValue, float64(st.Keys), k.source, k.name, k.limits)
		if st.MaxKeys > 0 {
			send(ch, c.maxKeys, prometheus.GaugeValue, float64(st.MaxKeys), k.source, k.name, k.limits)
		}
		send(ch, c.evictions, prometheus.CounterValue, float64(st.Evictions), k.source, k.name, k.limits)
		send(ch, c.fullDenials, prometheus.CounterValue, float64(st.FullDenials), k.source, k.name, k.limits)
	}
	send(ch, c.folded, prometheus.CounterValue, float64(c.t.Folded()))
}

// send sends a constant metric, or, should its label values be refused (as
// they never are: Collect makes them valid), a metric that makes the
// registry report the error instead of a panic in the scrape.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// addHistogram returns the sum of histograms a and b, which come from one
// Tally and so have the same bounds; either may be nil. It may add to a's
// Counts, which Snapshot made for this scrape, and never writes Bounds,
// which are the Tally's.
func addHistogram(a, b *tally.Histogram) *tally.Histogram {
	if a == nil || b == nil {
		if a == nil {
			return b
		}
		return a
	}
	for i := range a.Counts {
		a.Counts[i] += b.Counts[i]
	}
	a.Count += b.Count
	a.Sum += b.Sum
	return a
}

// validUTF8 returns s with each invalid UTF-8 sequence replaced by U+FFFD,
// which Prometheus accepts in a label value; s itself, without allocating,
// when it is valid.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
