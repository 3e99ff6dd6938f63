package tally_test

import (
	"testing"
	"time"

	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/tally"
)

// TestObserveAllocs: counting a decision allocates nothing, timed or not.
func TestObserveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	for _, timed := range []bool{false, true} {
		var opts []tally.Option
		if timed {
			opts = append(opts, tally.WithLatency())
		}
		in := newTally(t, opts...).Instrument(labels("/a"))
		if n := testing.AllocsPerRun(1000, func() { in.Observe(observe.Admitted, 1, time.Microsecond) }); n != 0 {
			t.Errorf("timed=%v: %v allocations per Observe, want 0", timed, n)
		}
	}
}
