package otel

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/tally"
)

// ScopeName is the name of the Meter an [Observer] creates its instruments
// with: the instrumentation scope its metrics are reported under.
const ScopeName = "github.com/admit-go/admit/otel"

// The instruments' names (the package doc's table describes them).
const (
	nameDecisions   = "admit.decisions"
	nameDuration    = "admit.decision.duration"
	nameKeys        = "admit.store.keys"
	nameMaxKeys     = "admit.store.max_keys"
	nameEvictions   = "admit.store.evictions"
	nameFullDenials = "admit.store.full_denials"
	nameFolded      = "admit.observer.folds"
)

// Option configures an [Observer].
type Option func(*config) error

type config struct {
	mp        metric.MeterProvider // nil: the global provider
	tally     *tally.Tally         // nil: New builds one
	timed     bool
	bounds    []time.Duration
	maxSeries int // 0: not given
}

// WithMeterProvider makes the Observer create its instruments with mp's
// Meter. Without it, New uses the global provider,
// go.opentelemetry.io/otel.GetMeterProvider(), as it is when New is called,
// as OpenTelemetry's instrumentation libraries do: if no provider has been
// registered yet, the instruments move to the first one registered with
// SetMeterProvider (a later change of the global provider is not followed).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: otel.WithMeterProvider(nil); pass a metric.MeterProvider, such as an sdkmetric.NewMeterProvider, or drop the option to use the global provider", admit.ErrInvalidOption)
		}
		c.mp = mp
		return nil
	}
}

// WithTally makes the Observer export t, a Tally built with tally.New,
// instead of one of its own, so that one count of the decisions can be
// exported to OpenTelemetry and elsewhere (the admit/prom module, a log
// line): attach either t or the Observer to the limiters, as the Observer's
// Instrument is t's. The Observer exports t's counts, its store statistics
// and its folds, but not a latency histogram t keeps
// (tally.WithLatency), as OpenTelemetry has no asynchronous histogram to
// report it with. Build one Observer per Tally and provider: two over one
// Tally on one provider would report each count twice, as the provider sums
// what its callbacks observe. It cannot be combined with [WithMaxSeries]
// (pass tally.WithMaxSeries to tally.New), nor with [WithLatency], whose
// histogram is recorded by the instruments of the Observer's own Tally.
func WithTally(t *tally.Tally) Option {
	return func(c *config) error {
		if t == nil {
			return fmt.Errorf("%w: otel.WithTally(nil); pass a *tally.Tally from tally.New, or drop the option for the Observer to count in its own", admit.ErrInvalidOption)
		}
		c.tally = t
		return nil
	}
}

// WithLatency makes the Observer's instruments timed: the callers measure
// each decision (two clock reads) and the Observer records its latency, in
// seconds, in the synchronous histogram admit.decision.duration, with
// buckets of the given upper bounds, ascending and positive, or
// tally.DefaultBounds (100ns to 1s) when none is given. Without this option
// no clock is read for observing and no histogram is created. It cannot be
// combined with [WithTally].
func WithLatency(bounds ...time.Duration) Option {
	return func(c *config) error {
		if len(bounds) == 0 {
			bounds = tally.DefaultBounds
		}
		for i, b := range bounds {
			if b <= 0 || (i > 0 && b <= bounds[i-1]) {
				return fmt.Errorf("%w: otel.WithLatency: bound %d is %v; want positive bounds in ascending order, such as 1µs, 10µs, 100µs", admit.ErrInvalidOption, i, b)
			}
		}
		c.timed, c.bounds = true, slices.Clone(bounds)
		return nil
	}
}

// WithMaxSeries bounds the series the Observer's Tally keeps to n (at least
// 1; tally.DefaultMaxSeries, 1000, without this option): past the bound, a
// new set of labels is counted under the Name "_other" (tally.OtherName),
// and admit.observer.folds counts it. It cannot be combined
// with [WithTally]: pass tally.WithMaxSeries to tally.New instead.
func WithMaxSeries(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: otel.WithMaxSeries(%d); want at least 1", admit.ErrInvalidOption, n)
		}
		c.maxSeries = n
		return nil
	}
}

// Observer is an [observe.Observer] that exports the decisions of admit's
// limiters, counted by name and never by key, as OpenTelemetry metrics.
// It counts in a [tally.Tally] (its own, or the one of [WithTally]) and
// reads the Tally in one callback when a reader collects, so a decision
// costs what the Tally's counting costs and nothing of OpenTelemetry's;
// only the opt-in latency histogram ([WithLatency]) records on the decision
// path, OpenTelemetry having no asynchronous histogram.
//
// Build one with [New], attach it with policy.WithObserver,
// httplimit.WithObserver or redisstore.WithObserver, and call
// [Observer.Unregister] when its metrics should no longer be reported. Its
// methods are safe for concurrent use.
type Observer struct {
	tally  *tally.Tally
	reg    metric.Registration
	closed atomic.Bool // set by Unregister

	decisions   metric.Int64ObservableCounter
	keys        metric.Int64ObservableUpDownCounter
	maxKeys     metric.Int64ObservableUpDownCounter
	evictions   metric.Int64ObservableCounter
	fullDenials metric.Int64ObservableCounter
	folded      metric.Int64ObservableCounter

	// duration is the latency histogram: nil without WithLatency. own
	// tells that the Observer built its Tally, so that no one else calls
	// the Tally's Instrument (Instrument relies on it to see a fold).
	duration metric.Float64Histogram
	own      bool

	// instMu serializes Instrument when the Observer is timed, and guards
	// timedBy.
	instMu  sync.Mutex
	timedBy map[observe.Instrument]*timedInstrument // by the Tally's instrument

	// mu serializes the callback (readers may collect concurrently), and
	// guards the caches below.
	mu     sync.Mutex
	gen    uint64 // collections so far: marks the stores reported in one
	series map[seriesKey]*seriesAttrs
	stores map[storeKey]*storeAttrs
}

// New returns an Observer whose instruments are created with the Meter
// named [ScopeName] of the provider of [WithMeterProvider] (or of the global
// provider), and registers the callback that reports them. An invalid
// option, or options that contradict each other, is an error wrapping
// [admit.ErrInvalidOption]; an error of the provider's is returned wrapped.
func New(opts ...Option) (*Observer, error) {
	var cfg config
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: otel.New: option %d is nil", admit.ErrInvalidOption, i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.tally != nil && cfg.timed {
		return nil, fmt.Errorf("%w: otel.New: WithLatency with WithTally; the latency histogram is recorded by instruments of the Observer's own Tally: drop WithTally, or drop WithLatency and build the Tally with tally.WithLatency for an exporter that reads its histogram (the admit/prom module)", admit.ErrInvalidOption)
	}
	if cfg.tally != nil && cfg.maxSeries != 0 {
		return nil, fmt.Errorf("%w: otel.New: WithMaxSeries with WithTally; the bound of series is the Tally's: pass tally.WithMaxSeries to tally.New instead", admit.ErrInvalidOption)
	}
	o := &Observer{tally: cfg.tally, series: map[seriesKey]*seriesAttrs{}, stores: map[storeKey]*storeAttrs{}}
	if o.tally == nil {
		var topts []tally.Option
		if cfg.maxSeries != 0 {
			topts = append(topts, tally.WithMaxSeries(cfg.maxSeries))
		}
		t, err := tally.New(topts...)
		if err != nil {
			return nil, err
		}
		o.tally, o.own = t, true
	}
	mp := cfg.mp
	if mp == nil {
		mp = otelapi.GetMeterProvider()
	}
	if err := o.register(mp.Meter(ScopeName), cfg); err != nil {
		return nil, err
	}
	return o, nil
}

// register creates the instruments with m and registers the callback.
func (o *Observer) register(m metric.Meter, cfg config) error {
	var err error
	wrap := func(name string, e error) error {
		return fmt.Errorf("otel.New: instrument %s: %w", name, e)
	}
	if o.decisions, err = m.Int64ObservableCounter(nameDecisions, metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of admit's limiters, by limiter and outcome.")); err != nil {
		return wrap(nameDecisions, err)
	}
	if o.keys, err = m.Int64ObservableUpDownCounter(nameKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys held by a keyed store of admit's now.")); err != nil {
		return wrap(nameKeys, err)
	}
	if o.maxKeys, err = m.Int64ObservableUpDownCounter(nameMaxKeys, metric.WithUnit("{key}"),
		metric.WithDescription("The bound on the keys of a keyed store of admit's (WithMaxKeys), for stores that have one.")); err != nil {
		return wrap(nameMaxKeys, err)
	}
	if o.evictions, err = m.Int64ObservableCounter(nameEvictions, metric.WithUnit("{key}"),
		metric.WithDescription("Keys a keyed store of admit's evicted since it was built.")); err != nil {
		return wrap(nameEvictions, err)
	}
	if o.fullDenials, err = m.Int64ObservableCounter(nameFullDenials, metric.WithUnit("{request}"),
		metric.WithDescription("Requests for new keys a keyed store of admit's denied because it was full.")); err != nil {
		return wrap(nameFullDenials, err)
	}
	if o.folded, err = m.Int64ObservableCounter(nameFolded, metric.WithUnit("{fold}"),
		metric.WithDescription(`Times a set of labels was counted under the name "_other" because the bound of series was reached: once for each limiter built under such labels.`)); err != nil {
		return wrap(nameFolded, err)
	}
	if cfg.timed {
		bounds := make([]float64, len(cfg.bounds))
		for i, b := range cfg.bounds {
			bounds[i] = b.Seconds()
		}
		if o.duration, err = m.Float64Histogram(nameDuration, metric.WithUnit("s"),
			metric.WithDescription("Time admit's limiters took to decide."),
			metric.WithExplicitBucketBoundaries(bounds...)); err != nil {
			return wrap(nameDuration, err)
		}
		o.timedBy = map[observe.Instrument]*timedInstrument{}
	}
	o.reg, err = m.RegisterCallback(o.collect, o.decisions, o.keys, o.maxKeys, o.evictions, o.fullDenials, o.folded)
	if err != nil {
		return fmt.Errorf("otel.New: registering the callback: %w", err)
	}
	return nil
}

// Instrument implements [observe.Observer]: it returns the Tally's
// instrument for labels, which counts the decisions that the callback
// reports at the next collection. With [WithLatency] it returns an
// instrument that also records each decision's latency in
// admit.decision.duration, with the attributes of the labels' series
// (their Name is "_other" when the Tally folded them), computed here once.
// Like every Observer's, it is meant to be called when a limiter is built,
// not per decision.
func (o *Observer) Instrument(l observe.Labels) observe.Instrument {
	if o.duration == nil {
		return o.tally.Instrument(l)
	}
	o.instMu.Lock()
	defer o.instMu.Unlock()
	// Only this method calls the Observer's own Tally's Instrument, and
	// under instMu: a change of Folded across the call is this call's fold.
	folded := o.tally.Folded()
	in := o.tally.Instrument(l)
	if w := o.timedBy[in]; w != nil {
		return w
	}
	if o.tally.Folded() != folded {
		l.Name = tally.OtherName
	}
	w := newTimed(o, in, l)
	o.timedBy[in] = w
	return w
}

var _ observe.Releaser = (*Observer)(nil)

// Release implements [observe.Releaser]: the Observer's Tally lets go of the
// store of l (see [tally.Tally.Release]), which the next collection no
// longer reports; the decisions stay.
func (o *Observer) Release(l observe.Labels) { o.tally.Release(l) }

// Unregister unregisters the Observer's callback: from then on its
// instruments report nothing at a collection, and the latency histogram of
// [WithLatency] records nothing more (the instruments already handed to
// limiters keep counting in the Tally, which [WithTally]'s other readers
// still see). The Observer cannot be registered again: build another with
// [New]. Unregister is safe to call more than once; calls after the first
// return nil. It leaves the provider as it is: shutting the provider down
// is its owner's business.
func (o *Observer) Unregister() error {
	if !o.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := o.reg.Unregister(); err != nil {
		return fmt.Errorf("otel: Unregister: %w", err)
	}
	return nil
}
