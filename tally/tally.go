// Package tally counts the decisions of admit's limiters by name, never by
// key, for an exporter to read: a [Tally] is an [observe.Observer] whose
// instruments add to striped counters, with an opt-in latency histogram.
// The modules github.com/admit-go/admit/prom and
// github.com/admit-go/admit/otel export a Tally to Prometheus and to
// OpenTelemetry; anything else (expvar, a log line per minute) can read
// [Tally.Snapshot] itself.
//
//	t, err := tally.New()
//	svc, err := policy.NewService(book, policy.WithObserver(t))
//	// later, at a scrape:
//	for _, s := range t.Snapshot() { … s.Labels.Name, s.Decisions[observe.Denied] … }
//
// # Cost
//
// A decision adds one to one counter: a counter is striped over cache lines
// (about four per processor), and a goroutine adds to a stripe chosen by
// the address of its own stack, so that goroutines running at once on
// different processors do not pass one cache line back and forth (when two
// meet on a stripe, every goroutine counting in that series moves to
// another). No
// allocation, no lock, no map lookup: the instrument of a set of labels is
// resolved once, when the limiter behind them is built. With the latency
// histogram, the caller reads the clock twice per decision and the
// instrument adds to one bucket, a count and a sum more.
//
// Memory: a series holds 4 × GOMAXPROCS stripes (rounded up to a power of
// two, at most 256) of 128 bytes: 1 KiB with 2 processors, 32 KiB with 64
// or more; with the latency histogram, (len(bounds) + 18) × 8 bytes more
// per stripe (80 KiB more with the 22 [DefaultBounds] and 256 stripes). So
// the default bound of 1000 series is at most about 31 MiB of counters,
// 109 MiB with the histogram, on a machine of 64 processors;
// [WithMaxSeries] lowers it.
//
// # Series
//
// A series is one set of [observe.Labels] less its Store: (Source, Name,
// Scope, Limits). Instruments asked for the same labels share one series,
// so counts carry on across a policy.Service's Reload. The labels never
// hold a key, so the series are bounded by the limiters built: for a
// policy.Service, at most (the APIs that reached Check) × (the scopes and
// limits that decide them). API names come from requests; [WithMaxSeries]
// bounds the series (1000 by default): past the bound, a new set of labels
// is counted under the Name "_other" ([OtherName]), and [Tally.Folded]
// says how many times that happened.
package tally

import (
	"fmt"
	"math/bits"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/observe"
)

// OtherName is the Name under which a Tally counts the label sets past its
// bound of series ([WithMaxSeries]).
const OtherName = "_other"

// DefaultMaxSeries is the bound of series of a Tally built without
// [WithMaxSeries].
const DefaultMaxSeries = 1000

// DefaultBounds are the upper bounds of the latency histogram's buckets when
// [WithLatency] is given none: from 100ns to 1s, about three per decade, for
// decisions from an in-memory limiter (tens of nanoseconds) to a Redis round
// trip (hundreds of microseconds) and its timeouts.
var DefaultBounds = []time.Duration{
	100 * time.Nanosecond, 250 * time.Nanosecond, 500 * time.Nanosecond,
	time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond,
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second,
}

// maxBounds bounds the buckets of a histogram.
const maxBounds = 64

// Option configures a [Tally].
type Option func(*config) error

type config struct {
	timed     bool
	bounds    []time.Duration
	maxSeries int
}

// WithLatency makes the Tally's instruments timed: callers measure each
// decision (two clock reads) and the Tally counts it in a histogram with
// buckets of the given upper bounds, ascending and positive (at most 64), or
// [DefaultBounds] when none is given. Without this option no clock is read
// for observing.
func WithLatency(bounds ...time.Duration) Option {
	return func(c *config) error {
		if len(bounds) == 0 {
			bounds = DefaultBounds
		}
		if len(bounds) > maxBounds {
			return fmt.Errorf("%w: tally.WithLatency: %d bounds; want at most %d", admit.ErrInvalidOption, len(bounds), maxBounds)
		}
		for i, b := range bounds {
			if b <= 0 || (i > 0 && b <= bounds[i-1]) {
				return fmt.Errorf("%w: tally.WithLatency: bound %d is %v; want positive bounds in ascending order, such as 1µs, 10µs, 100µs", admit.ErrInvalidOption, i, b)
			}
		}
		c.timed, c.bounds = true, slices.Clone(bounds)
		return nil
	}
}

// WithMaxSeries bounds the series the Tally keeps to n (at least 1): a set
// of labels that would make one more series is counted under the Name
// [OtherName] instead, with its other labels. The series of OtherName do
// not count against the bound (there is at most one per Source, Scope and
// Limits).
func WithMaxSeries(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: tally.WithMaxSeries(%d); want at least 1", admit.ErrInvalidOption, n)
		}
		c.maxSeries = n
		return nil
	}
}

// Tally is an [observe.Observer] that counts decisions per series. Its
// methods are safe for concurrent use.
type Tally struct {
	cfg     config
	stripes int // counter stripes per series, a power of two

	mu     sync.Mutex
	byKey  map[seriesKey]*series
	order  []*series // in order of creation, for Snapshot
	own    int       // series counted against the bound (not OtherName's)
	folded int
}

var (
	_ observe.Observer = (*Tally)(nil)
	_ observe.Releaser = (*Tally)(nil)
)

// seriesKey is what identifies a series: the labels less the Store.
type seriesKey struct {
	source, name, scope string
	limits              admit.Limits
}

// New returns an empty Tally. An invalid option is an error wrapping
// [admit.ErrInvalidOption].
func New(opts ...Option) (*Tally, error) {
	cfg := config{maxSeries: DefaultMaxSeries}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: tally.New: option %d is nil", admit.ErrInvalidOption, i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	n := 4 * runtime.GOMAXPROCS(0)
	n = 1 << bits.Len(uint(n-1)) // a power of two
	return &Tally{cfg: cfg, stripes: min(n, 256), byKey: map[seriesKey]*series{}}, nil
}

// Instrument implements [observe.Observer]: it returns the instrument of the
// series of labels (less their Store), creating the series on first use
// (or counting under [OtherName] past the bound of series). A non-nil Store
// replaces the series' previous one, so that the most recent limiter built
// for the labels is the one whose statistics [Tally.Snapshot] reports.
func (t *Tally) Instrument(l observe.Labels) observe.Instrument {
	k := seriesKey{l.Source, l.Name, l.Scope, l.Limits}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byKey[k]
	if s == nil && t.own >= t.cfg.maxSeries && l.Name != OtherName {
		t.folded++
		k.name, l.Name, l.Store = OtherName, OtherName, nil
		s = t.byKey[k]
	}
	if s == nil {
		s = t.newSeries(l)
		t.byKey[k] = s
		t.order = append(t.order, s)
		if l.Name != OtherName {
			t.own++
		}
	}
	if l.Store != nil && s.labels.Name != OtherName {
		s.labels.Store = l.Store
	}
	return s
}

// Release implements [observe.Releaser]: the series of labels (less their
// Store) forgets its Store if it is labels.Store, so that the store a
// policy.Service dropped is let go; its counts are kept. Stores of a type
// that cannot be compared are never the same as another, and stay.
func (t *Tally) Release(l observe.Labels) {
	if l.Store == nil || !reflect.TypeOf(l.Store).Comparable() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byKey[seriesKey{l.Source, l.Name, l.Scope, l.Limits}]
	if s == nil || s.labels.Store == nil || reflect.TypeOf(s.labels.Store) != reflect.TypeOf(l.Store) {
		return
	}
	if s.labels.Store == l.Store {
		s.labels.Store = nil
	}
}

// Folded returns how many times [Tally.Instrument] counted a set of labels
// under [OtherName] because the bound of series was reached: once per call,
// that is once for each limiter built under such labels (a set asked for
// again, when its limiter is built anew, counts again). Counting the
// distinct sets would mean keeping them, which the bound exists not to.
func (t *Tally) Folded() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.folded
}

// Series is one series as [Tally.Snapshot] read it.
type Series struct {
	// Labels are the series' labels, with the most recent Store given for
	// them (nil if none was).
	Labels observe.Labels

	// Decisions counts the decisions of each outcome, indexed by
	// [observe.Outcome] (index 0 is unused).
	Decisions [observe.NumOutcomes]uint64

	// Latency is the histogram of the decisions' latencies: nil unless the
	// Tally was built with [WithLatency].
	Latency *Histogram
}

// Histogram is a latency histogram as [Tally.Snapshot] read it.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending (the Tally's; do not
	// modify them).
	Bounds []time.Duration
	// Counts are the decisions per bucket, not cumulative: Counts[i] those
	// of at most Bounds[i] (and more than Bounds[i-1]), and the last,
	// Counts[len(Bounds)], those above every bound.
	Counts []uint64
	// Count is the number of decisions measured, and Sum their total time.
	Count uint64
	Sum   time.Duration
}

// Snapshot returns every series, in the order they were created, with its
// counts at the time of the call. Counts of decisions concurrent with the
// call may or may not be included; a count never decreases from one
// snapshot to the next. It allocates, and is meant for a scrape.
func (t *Tally) Snapshot() []Series {
	t.mu.Lock()
	order := slices.Clone(t.order)
	labels := make([]observe.Labels, len(order))
	for i, s := range order {
		labels[i] = s.labels
	}
	t.mu.Unlock()
	out := make([]Series, len(order))
	for i, s := range order {
		out[i].Labels = labels[i]
		for j := range s.stripes {
			st := &s.stripes[j]
			for o := range st.n {
				out[i].Decisions[o] += st.n[o].Load()
			}
		}
		if s.hist != nil {
			out[i].Latency = s.hist.read()
		}
	}
	return out
}
