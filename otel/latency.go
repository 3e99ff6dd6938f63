package otel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/admit-go/admit/observe"
)

// timedInstrument is the instrument of a timed Observer ([WithLatency]):
// it counts in the Tally's instrument, and records the latency in the
// Observer's histogram with the series' attributes, precomputed for each
// outcome so that Observe builds no attribute set. The options are held in
// slices passed on with `...`, so that a call does not build a variadic
// slice either (it would escape through the interface call, and allocate).
type timedInstrument struct {
	o    *Observer
	in   observe.Instrument // the Tally's
	opts [observe.NumOutcomes][]metric.RecordOption
}

func newTimed(o *Observer, in observe.Instrument, l observe.Labels) *timedInstrument {
	w := &timedInstrument{o: o, in: in}
	for oc := observe.Admitted; int(oc) < observe.NumOutcomes; oc++ {
		w.opts[oc] = []metric.RecordOption{metric.WithAttributeSet(outcomeSet(l, oc))}
	}
	return w
}

// Observe implements [observe.Instrument]: it counts the decision in the
// Tally and records latency, in seconds, in admit.decision.duration, unless
// the Observer was unregistered. An outcome admit does not define is
// counted nowhere, as the Tally does. The recording carries no context
// (Observe has none), so the provider attaches no trace exemplar to it.
func (w *timedInstrument) Observe(o observe.Outcome, n int, latency time.Duration) {
	w.in.Observe(o, n, latency)
	if o == 0 || int(o) >= observe.NumOutcomes || w.o.closed.Load() {
		return
	}
	w.o.duration.Record(context.Background(), latency.Seconds(), w.opts[o]...)
}

// Timed implements [observe.Instrument]: true, the callers measure each
// decision for the histogram.
func (w *timedInstrument) Timed() bool { return true }
