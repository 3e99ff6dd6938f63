package tally_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/tally"
)

func newTally(t *testing.T, opts ...tally.Option) *tally.Tally {
	t.Helper()
	tl, err := tally.New(opts...)
	require.NoError(t, err)
	return tl
}

func labels(name string) observe.Labels {
	l, err := admit.ParseLimits("token-bucket,10,1s")
	if err != nil {
		panic(err)
	}
	return observe.Labels{Source: "policy", Name: name, Scope: "default", Limits: l}
}

func TestCounts(t *testing.T) {
	tl := newTally(t)
	a := tl.Instrument(labels("/a"))
	b := tl.Instrument(labels("/b"))
	assert.False(t, a.Timed())
	for range 3 {
		a.Observe(observe.Admitted, 1, 0)
	}
	a.Observe(observe.Denied, 5, 0)
	b.Observe(observe.ShadowDenied, 1, 0)
	b.Observe(observe.Outcome(0), 1, 0)  // not an outcome: ignored
	b.Observe(observe.Outcome(99), 1, 0) // likewise
	got := tl.Snapshot()
	require.Len(t, got, 2)
	assert.Equal(t, "/a", got[0].Labels.Name)
	assert.Equal(t, uint64(3), got[0].Decisions[observe.Admitted])
	assert.Equal(t, uint64(1), got[0].Decisions[observe.Denied])
	assert.Equal(t, uint64(1), got[1].Decisions[observe.ShadowDenied])
	var total uint64
	for _, n := range got[1].Decisions {
		total += n
	}
	assert.Equal(t, uint64(1), total)
	assert.Nil(t, got[0].Latency)
}

// TestSameLabelsOneSeries: instruments asked for the same labels count into
// one series (a Service's Reload asks again), and the newest Store wins.
func TestSameLabelsOneSeries(t *testing.T) {
	tl := newTally(t)
	l := labels("/a")
	s1 := stats{keys: 1}
	l.Store = s1
	i1 := tl.Instrument(l)
	s2 := stats{keys: 2}
	l.Store = s2
	i2 := tl.Instrument(l)
	l.Store = nil
	i3 := tl.Instrument(l) // a nil Store keeps the last one
	i1.Observe(observe.Admitted, 1, 0)
	i2.Observe(observe.Admitted, 1, 0)
	i3.Observe(observe.Admitted, 1, 0)
	got := tl.Snapshot()
	require.Len(t, got, 1)
	assert.Equal(t, uint64(3), got[0].Decisions[observe.Admitted])
	assert.Equal(t, s2, got[0].Labels.Store)
}

type stats struct{ keys int }

func (s stats) Stats() admit.StoreStats { return admit.StoreStats{Keys: s.keys} }

func TestMaxSeries(t *testing.T) {
	tl := newTally(t, tally.WithMaxSeries(2))
	tl.Instrument(labels("/a")).Observe(observe.Admitted, 1, 0)
	tl.Instrument(labels("/b")).Observe(observe.Admitted, 1, 0)
	l := labels("/c")
	l.Store = stats{keys: 7}
	tl.Instrument(l).Observe(observe.Denied, 1, 0)
	tl.Instrument(labels("/d")).Observe(observe.Denied, 1, 0)
	tl.Instrument(labels("/a")).Observe(observe.Admitted, 1, 0) // known: not folded
	got := tl.Snapshot()
	require.Len(t, got, 3)
	assert.Equal(t, uint64(2), got[0].Decisions[observe.Admitted])
	assert.Equal(t, tally.OtherName, got[2].Labels.Name)
	assert.Equal(t, uint64(2), got[2].Decisions[observe.Denied])
	assert.Nil(t, got[2].Labels.Store, "a folded series reports no store: it stands for several")
	assert.Equal(t, 2, tl.Folded())
}

func TestLatency(t *testing.T) {
	tl := newTally(t, tally.WithLatency(time.Microsecond, time.Millisecond))
	in := tl.Instrument(labels("/a"))
	require.True(t, in.Timed())
	in.Observe(observe.Admitted, 1, 500*time.Nanosecond)
	in.Observe(observe.Admitted, 1, time.Microsecond) // on the bound: that bucket
	in.Observe(observe.Denied, 1, 2*time.Microsecond)
	in.Observe(observe.Denied, 1, time.Second)
	h := tl.Snapshot()[0].Latency
	require.NotNil(t, h)
	assert.Equal(t, []time.Duration{time.Microsecond, time.Millisecond}, h.Bounds)
	assert.Equal(t, []uint64{2, 1, 1}, h.Counts)
	assert.Equal(t, uint64(4), h.Count)
	assert.Equal(t, 500*time.Nanosecond+time.Microsecond+2*time.Microsecond+time.Second, h.Sum)
}

func TestDefaultBounds(t *testing.T) {
	tl := newTally(t, tally.WithLatency())
	h := tl.Instrument(labels("/a"))
	h.Observe(observe.Admitted, 1, 0)
	assert.Equal(t, tally.DefaultBounds, tl.Snapshot()[0].Latency.Bounds)
}

func TestBadOptions(t *testing.T) {
	for name, o := range map[string]tally.Option{
		"nil":        nil,
		"series 0":   tally.WithMaxSeries(0),
		"bound 0":    tally.WithLatency(0),
		"descending": tally.WithLatency(time.Second, time.Millisecond),
		"equal":      tally.WithLatency(time.Second, time.Second),
		"too many":   tally.WithLatency(make65()...),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tally.New(o)
			assert.True(t, errors.Is(err, admit.ErrInvalidOption), "%v", err)
		})
	}
}

func make65() []time.Duration {
	b := make([]time.Duration, 65)
	for i := range b {
		b[i] = time.Duration(i+1) * time.Microsecond
	}
	return b
}

// TestConcurrentExact: counts from many goroutines at once are exact, and a
// snapshot taken meanwhile never goes backwards (run under -race).
func TestConcurrentExact(t *testing.T) {
	tl := newTally(t, tally.WithLatency())
	in := tl.Instrument(labels("/a"))
	const goroutines, each = 8, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Add(1)
	go func() {
		defer snaps.Done()
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := tl.Snapshot()[0].Decisions[observe.Admitted]
			if n < last {
				t.Errorf("count went back from %d to %d", last, n)
				return
			}
			last = n
		}
	}()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				in.Observe(observe.Admitted, 1, time.Microsecond)
			}
		}()
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	s := tl.Snapshot()[0]
	assert.Equal(t, uint64(goroutines*each), s.Decisions[observe.Admitted])
	assert.Equal(t, uint64(goroutines*each), s.Latency.Count)
	assert.Equal(t, time.Duration(goroutines*each)*time.Microsecond, s.Latency.Sum)
}

// bulky is a StatsReporter of a type that cannot be compared.
type bulky struct{ keys []int }

func (b bulky) Stats() admit.StoreStats { return admit.StoreStats{Keys: len(b.keys)} }

// TestRelease: Release forgets a series' Store only if it is the store
// given, keeps the counts, and leaves a store of a type that cannot be
// compared alone (without a panic).
func TestRelease(t *testing.T) {
	tl, err := tally.New()
	require.NoError(t, err)
	a, b := stats{keys: 1}, stats{keys: 2}
	l := labels("/a")
	l.Store = a
	tl.Instrument(l).Observe(observe.Admitted, 1, 0)

	other := l
	other.Store = b
	tl.Release(other)
	require.Len(t, tl.Snapshot(), 1)
	assert.Equal(t, observe.StatsReporter(a), tl.Snapshot()[0].Labels.Store, "another store is not released")

	tl.Release(l)
	got := tl.Snapshot()
	require.Len(t, got, 1)
	assert.Nil(t, got[0].Labels.Store, "the store given is released")
	assert.Equal(t, uint64(1), got[0].Decisions[observe.Admitted], "the counts stay")
	tl.Release(l) // released already: nothing to do

	m := labels("/m")
	m.Store = bulky{keys: []int{1}}
	tl.Instrument(m)
	assert.NotPanics(t, func() { tl.Release(m) })
	for _, s := range tl.Snapshot() {
		if s.Labels.Name == "/m" {
			assert.NotNil(t, s.Labels.Store, "a store that cannot be compared stays")
		}
	}
}
