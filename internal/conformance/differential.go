package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// The differential check: every variant against the pure kernels (Oracle),
// on generated rules, readings and requests.

// Oracle is the pure kernel of an algorithm with one state per key, stepped
// sequentially: the executable specification a variant must match.
type Oracle interface {
	Allow(key string, now time.Duration, n int) admit.Decision
}

type kernelOracle[S any, K kernel.Kernel[S]] struct {
	k      K
	states map[string]*S
}

func (o *kernelOracle[S, K]) Allow(key string, now time.Duration, n int) admit.Decision {
	s := o.states[key]
	if s == nil {
		s = new(S)
		o.states[key] = s
	}
	return o.k.Allow(s, now, n)
}

// forget drops key's state: its next call is a fresh key's.
func (o *kernelOracle[S, K]) forget(key string) { delete(o.states, key) }

// NewOracle returns the Oracle of rule, which must be valid: every key
// starts fresh and is never evicted.
func NewOracle(rule admit.Rule) Oracle {
	switch rule.Algorithm {
	case admit.TokenBucket:
		return &kernelOracle[kernel.TokenBucketState, *kernel.TokenBucket]{kernel.NewTokenBucket(rule), map[string]*kernel.TokenBucketState{}}
	case admit.FixedWindow:
		return &kernelOracle[kernel.FixedWindowState, *kernel.FixedWindow]{kernel.NewFixedWindow(rule), map[string]*kernel.FixedWindowState{}}
	case admit.SlidingLog:
		return &kernelOracle[kernel.Log, *kernel.SlidingLog]{kernel.NewSlidingLog(rule), map[string]*kernel.Log{}}
	default:
		return &kernelOracle[kernel.SlidingCounterState, *kernel.SlidingCounter]{kernel.NewSlidingCounter(rule), map[string]*kernel.SlidingCounterState{}}
	}
}

// drawRule draws a valid rule of algorithm alg with a small limit.
func drawRule(rt *rapid.T, alg admit.Algorithm) admit.Rule {
	limit := rapid.IntRange(1, 12).Draw(rt, "limit")
	window := time.Duration(rapid.Int64Range(int64(limit), int64(10*time.Second)).Draw(rt, "window"))
	return admit.Rule{Algorithm: alg, Limit: limit, Window: window}
}

// takes reports whether v's New takes rule (see Variant.Takes).
func (v Variant) takes(rule admit.Rule) bool { return v.Takes == nil || v.Takes(rule) }

// drawTaken draws a rule as drawRule does, among those v's New takes.
func drawTaken(rt *rapid.T, v Variant, alg admit.Algorithm) admit.Rule {
	if v.Takes == nil {
		return drawRule(rt, alg)
	}
	return rapid.Custom(func(rt *rapid.T) admit.Rule { return drawRule(rt, alg) }).Filter(v.Takes).Draw(rt, "rule")
}

// newTaken builds v's keyed limiter of rule, or, for a rule v's New does
// not take, checks that New refuses it with admit.ErrUnsupported and
// returns nil.
func newTaken(t require.TestingT, v Variant, rule admit.Rule, opts ...admit.Option) admit.KeyedLimiter {
	lim, err := v.New(rule, opts...)
	if !v.takes(rule) {
		require.ErrorIs(t, err, admit.ErrUnsupported, "New(%v): a rule the variant does not take", rule)
		return nil
	}
	require.NoError(t, err, "New(%v)", rule)
	return lim
}

// testDifferential drives the variant and the kernel oracle with the same
// generated sequence of calls, keys and clock moves (forwards by small and huge
// steps, and backwards), sequentially, and requires identical Decisions.
func testDifferential(t *testing.T, v Variant, alg admit.Algorithm) {
	rapid.Check(t, func(rt *rapid.T) {
		rule := drawRule(rt, alg)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		keyed := newTaken(rt, v, rule, admit.WithClock(fake)) // nil: a rule New refuses, for the single key alone
		var single admit.Limiter
		if v.NewLimiter != nil {
			var err error
			single, err = v.NewLimiter(rule, admit.WithClock(fake))
			require.NoError(rt, err)
		}
		want := NewOracle(rule)
		keys := []string{"a", "b", "c"}
		ops := rapid.IntRange(1, 60).Draw(rt, "ops")
		for i := range ops {
			if moveClock(rt, fake, rule.Window) {
				continue
			}
			n := rapid.IntRange(-1, rule.Limit+1).Draw(rt, "n")
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			now := fake.Now()
			exp := want.Allow(key, now, n)
			if keyed != nil {
				if got := keyed.AllowN(key, n); got != exp {
					rt.Fatalf("%s op %d: keyed AllowN(t=%v, %q, %d) = %+v, want %+v", rule, i, now, key, n, got, exp)
				}
			}
			if single != nil && key == "a" {
				// The single limiter mirrors key "a" of the keyed one.
				if got := single.AllowN(n); got != exp {
					rt.Fatalf("%s op %d: AllowN(t=%v, %d) = %+v, want %+v", rule, i, now, n, got, exp)
				}
			}
		}
	})
}

// moveClock moves fake as the differential checks do, by the window w:
// forwards by up to two windows, by a few nanoseconds, or back by up to one
// window (the next readings are stale). It reports whether it moved the
// clock; otherwise the caller makes a call.
func moveClock(rt *rapid.T, fake *clock.Fake, w time.Duration) bool {
	switch rapid.IntRange(0, 9).Draw(rt, "op") {
	case 0, 1:
		fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*w)).Draw(rt, "advance")))
	case 2:
		fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
	case 3:
		fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, int64(w)).Draw(rt, "back")))
	default:
		return false
	}
	return true
}
