package otel_test

import (
	"testing"
	"time"

	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/otel"
)

// TestCheckAllocs: a Service's Check on a pair it has seen allocates
// nothing with an Observer attached, untimed or timed (WithLatency), before
// and after collections (a collection only reads the Tally).
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	for _, timed := range []bool{false, true} {
		mp, r := provider(t)
		opts := []otel.Option{otel.WithMeterProvider(mp)}
		if timed {
			opts = append(opts, otel.WithLatency())
		}
		s, _ := service(t, observeBook, newObserver(t, opts...))
		s.Check("alice", "/orders")
		s.Check("vip", "/login")
		for i := range 2 {
			if n := testing.AllocsPerRun(1000, func() { s.Check("alice", "/orders"); s.Check("vip", "/login") }); n != 0 {
				t.Errorf("timed=%v, after %d collections: %v allocations per two Checks, want 0", timed, i, n)
			}
			collect(t, r)
		}
	}
}

// TestTimedObserveAllocs: the latency histogram's recording, on the SDK's
// histogram, allocates nothing: its attribute set and the options that
// carry it are built when the instrument is.
func TestTimedObserveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	mp, r := provider(t)
	o := newObserver(t, otel.WithMeterProvider(mp), otel.WithLatency())
	in := o.Instrument(labels(t, "/a"))
	in.Observe(observe.Admitted, 1, time.Microsecond)
	in.Observe(observe.Denied, 1, time.Microsecond)
	for i := range 2 {
		n := testing.AllocsPerRun(1000, func() {
			in.Observe(observe.Admitted, 1, time.Microsecond)
			in.Observe(observe.Denied, 1, time.Millisecond)
		})
		if n != 0 {
			t.Errorf("after %d collections: %v allocations per two timed Observes, want 0", i, n)
		}
		collect(t, r)
	}
}
