package ratehdr

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// TestUntilWholeBound checks UntilWhole against the kernels, the oracle: on
// random composites driven with time moving forward, after every admission
// the wait it gives for the binding rule is never below that rule's exact
// wait until whole (read by probing its kernel), never above the
// composite's ResetAfter, exact when the binding rule is the last to become
// whole, and, for a token bucket, within one token's refill of exact.
func TestUntilWholeBound(t *testing.T) {
	algorithms := []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter}
	runs, steps := 300, 300
	if testing.Short() {
		runs = 50
	}
	checked := 0
	for seed := range uint64(runs) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var rules []admit.Rule
		for len(rules) < 2+rng.IntN(3) {
			r := admit.Rule{
				Algorithm: algorithms[rng.IntN(len(algorithms))],
				Limit:     1 + rng.IntN(12),
				Window:    time.Duration(1 + rng.Int64N(int64(5*time.Second))),
			}
			if rng.IntN(3) == 0 { // whole seconds, as configured rules mostly are
				r.Window = time.Duration(1+rng.IntN(60)) * time.Second
			}
			rules = append(rules, r)
		}
		limits, err := admit.NewLimits(rules...)
		if err != nil {
			continue // a repeated rule
		}
		c := kernel.NewComposite(limits)
		state := make([]kernel.PartState, c.Len())
		var now time.Duration
		for step := range steps {
			now += time.Duration(rng.Int64N(int64(rules[rng.IntN(len(rules))].Window) / 3))
			d, which := c.Allow(state, now, 1+rng.IntN(2))
			if !d.Allowed {
				continue
			}
			exact := make([]time.Duration, c.Len())
			last := time.Duration(0)
			for i := range exact {
				exact[i] = probe(c, limits.At(i), state, i, now)
				last = max(last, exact[i])
			}
			if last != d.ResetAfter {
				t.Fatalf("seed %d step %d: %v at %v: ResetAfter %v, the parts' largest is %v", seed, step, limits, now, d.ResetAfter, last)
			}
			rule := limits.At(which)
			got := UntilWhole(rule, d)
			call := func(what string) {
				t.Fatalf("seed %d step %d: %v at %v: UntilWhole(%v, Remaining %d, ResetAfter %v) = %v, exact %v: %s",
					seed, step, limits, now, rule, d.Remaining, d.ResetAfter, got, exact[which], what)
			}
			switch {
			case got < exact[which]:
				call("below exact")
			case got > d.ResetAfter:
				call("above the composite's ResetAfter")
			case exact[which] == last && got != last:
				call("the binding rule is the last whole, but the wait is not exact")
			case rule.Algorithm == admit.TokenBucket && got-exact[which] > rule.Window/time.Duration(rule.Limit)+1:
				call("more than one token's refill above exact")
			}
			checked++
		}
	}
	if checked < runs*steps/10 {
		t.Fatalf("only %d admissions checked", checked)
	}
}

// probe returns part i's exact wait until whole at now, from its own kernel.
func probe(c *kernel.Composite, rule admit.Rule, s []kernel.PartState, i int, now time.Duration) time.Duration {
	switch rule.Algorithm {
	case admit.TokenBucket:
		st := s[i].TB()
		return c.TokenBucket(i).Decide(&st, now, 0).ResetAfter
	case admit.FixedWindow:
		st := s[i].FW()
		return c.FixedWindow(i).Decide(&st, now, 0).ResetAfter
	case admit.SlidingCounter:
		st := s[i].SC()
		return c.SlidingCounter(i).Decide(&st, now, 0).ResetAfter
	}
	l := s[i].Log
	if l == nil {
		l = new(kernel.Log)
	}
	return kernel.NewSlidingLog(rule).Decide(l, now, 0).ResetAfter
}

// TestUntilWholeExtremes: the bound neither overflows nor goes negative at
// the edges of a rule and of a Decision from someone else's store.
func TestUntilWholeExtremes(t *testing.T) {
	huge := admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1, Window: admit.MaxLimitTimesWindow}
	for _, tc := range []struct {
		rule admit.Rule
		d    admit.Decision
		want time.Duration
	}{
		{huge, admit.Decision{Allowed: true, ResetAfter: admit.Never}, admit.Never}, // 2×Window saturates
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: admit.MaxLimitTimesWindow}, admit.Decision{Allowed: true, ResetAfter: admit.Never}, admit.MaxLimitTimesWindow},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: 10 * time.Second}, admit.Decision{Allowed: true, Remaining: 2, ResetAfter: time.Hour}, 3333333334},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: 10 * time.Second}, admit.Decision{Allowed: true, Remaining: 7, ResetAfter: time.Hour}, 0},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: 10 * time.Second}, admit.Decision{Allowed: true, Remaining: -4, ResetAfter: time.Hour}, 10 * time.Second},
		{admit.Rule{Algorithm: admit.FixedWindow, Limit: 3, Window: 10 * time.Second}, admit.Decision{Allowed: true, ResetAfter: 4 * time.Second}, 4 * time.Second},
		{admit.Rule{Algorithm: admit.SlidingLog, Limit: 3, Window: 10 * time.Second}, admit.Decision{Allowed: true, ResetAfter: time.Minute}, 10 * time.Second},
	} {
		if got := UntilWhole(tc.rule, tc.d); got != tc.want {
			t.Errorf("UntilWhole(%v, %+v) = %v, want %v", tc.rule, tc.d, got, tc.want)
		}
	}
}
