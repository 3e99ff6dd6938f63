package prom_test

import (
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/prom"
)

// TestCheckAllocs: with a Collector attached, timed or not, a Check of a
// pair seen before allocates nothing: the Collector adds nothing to the
// decision path but the Tally's counting.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	for _, timed := range []bool{false, true} {
		var opts []prom.Option
		if timed {
			opts = append(opts, prom.WithLatency())
		}
		c := newCollector(t, opts...)
		s := newService(t, parse(t, observeBook), policy.WithObserver(c), admit.WithClock(clock.NewFake()))
		user, api := strings.Clone("alice"), strings.Clone("/orders")
		s.Check(user, api)
		s.Check(user, "/login")
		if n := testing.AllocsPerRun(1000, func() {
			s.Check(user, api)
			s.Check(user, "/login")
		}); n != 0 {
			t.Errorf("timed=%v: %v allocations per observed Check, want 0", timed, n)
		}
	}
}
