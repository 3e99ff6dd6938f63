package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// CompositeVariant describes one variant's constructors of composite limits
// (admit.Limits) under test: the same suite for every store, with
// kernel.Composite as its oracle.
type CompositeVariant struct {
	Name string
	// NewLimits and NewLimitsLimiter are the variant's constructors.
	// NewLimitsLimiter may be nil for a variant that offers only keyed
	// limiters. NewLimits is erased as Variant.New is: pass a local
	// variant's as KeyedLimits(locked.NewLimits).
	NewLimits        func(admit.Limits, ...admit.Option) (admit.KeyedLimiter, error)
	NewLimitsLimiter func(admit.Limits, ...admit.Option) (admit.Limiter, error)
	// Supports reports whether the variant implements an algorithm; Limits
	// with a rule of any other must be refused with an error wrapping
	// admit.ErrUnsupported.
	Supports func(admit.Algorithm) bool
	// AllowAllocs is the most allocations one admitted Allow of the Limits
	// "token-bucket,10,1s + fixed-window,1000,1h" on an existing key may
	// make; a denied one may make none, as for a single rule.
	AllowAllocs float64
	// Remote marks a variant whose state lives in another process, as
	// Variant.Remote does: its allocations are not counted, it refuses the
	// keyed-store options, and its keyed limiter of two or more rules need
	// not have admit.CompositeStore's Len and Sweep, nor Reset.
	Remote bool
}

// RunComposite runs the composite suite against v: bad input refused with
// the right error; a Limits of one rule is that rule's limiter; the
// interfaces of a composite; scripted walks; all or nothing; n above the
// smallest Limit; a differential check against kernel.Composite over
// generated calls on several keys with the clock moving both ways; Reset;
// allocations; and, for a variant that reserves, reservations that take
// and give back in every rule.
func RunComposite(t *testing.T, v CompositeVariant) {
	t.Run("Errors", func(t *testing.T) { testCompositeErrors(t, v) })
	t.Run("OneRule", func(t *testing.T) { testCompositeOneRule(t, v) })
	t.Run("Interfaces", func(t *testing.T) { testCompositeInterfaces(t, v) })
	t.Run("Walkthrough", func(t *testing.T) { testCompositeWalkthrough(t, v) })
	t.Run("AllOrNothing", func(t *testing.T) { testCompositeAllOrNothing(t, v) })
	t.Run("AboveLimit", func(t *testing.T) { testCompositeAboveLimit(t, v) })
	t.Run("Differential", func(t *testing.T) { rapid.Check(t, compositeDifferential(v)) })
	t.Run("Reset", func(t *testing.T) { testCompositeReset(t, v) })
	t.Run("Allocs", func(t *testing.T) { testCompositeAllocs(t, v) })
	t.Run("Reserve", func(t *testing.T) { testCompositeReserve(t, v) })
}

// tester is what the scripted composite checks need of a *testing.T. A
// check that takes one runs against a recorder too: that is how this
// package's own tests show that a check fails on a broken variant.
type tester interface {
	require.TestingT
	Helper()
	Skip(args ...any)
}

// compositeKeyed is what the keyed limiter of two or more rules of every
// variant offers: admit.CompositeStore's Limits and AllowNWhich. A local
// variant's is an admit.CompositeStore as well.
type compositeKeyed interface {
	admit.KeyedLimiter
	Limits() admit.Limits
	AllowNWhich(key string, n int) (admit.Decision, int)
}

// CompositeOracle is kernel.Composite with one state and one
// kernel.CompositeHold per key, stepped sequentially, the hold shown every
// reading as the kernel's doc asks of a limiter: the executable
// specification a composite limiter must match, here and in the stores'
// own tests. Every key starts fresh and is never evicted.
type CompositeOracle struct {
	k      *kernel.Composite
	states map[string][]kernel.PartState
	holds  map[string]*kernel.CompositeHold
}

// NewCompositeOracle returns the oracle of l, which must be valid.
func NewCompositeOracle(l admit.Limits) *CompositeOracle {
	return &CompositeOracle{k: kernel.NewComposite(l), states: map[string][]kernel.PartState{}, holds: map[string]*kernel.CompositeHold{}}
}

// of returns key's state and hold, fresh on first use.
func (o *CompositeOracle) of(key string) ([]kernel.PartState, *kernel.CompositeHold) {
	if o.states[key] == nil {
		o.states[key] = make([]kernel.PartState, o.k.Len())
		o.holds[key] = new(kernel.CompositeHold)
	}
	return o.states[key], o.holds[key]
}

// Allow decides n for key at reading now, and returns the index of the rule
// that bound the decision.
func (o *CompositeOracle) Allow(key string, now time.Duration, n int) (admit.Decision, int) {
	s, h := o.of(key)
	d, which := o.k.Allow(s, now, n)
	if h.Ticket != 0 && !o.k.Observe(h, s, now) {
		*h = kernel.CompositeHold{}
	}
	return d, which
}

// Reserve reserves n for key at reading now, in every rule (all token
// buckets), if the wait is at most maxWait; it returns the wait, whether it
// reserved, and the ticket a cancellation needs (0 when none can).
func (o *CompositeOracle) Reserve(key string, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool, uint64) {
	s, h := o.of(key)
	return o.k.ReserveHold(s, h, now, n, maxWait)
}

// Cancel cancels the reservation with ticket on key at reading now, and
// reports whether it gave its tokens back.
func (o *CompositeOracle) Cancel(key string, ticket uint64, now time.Duration) bool {
	s, h := o.of(key)
	ok, drop := o.k.CancelHold(s, h, ticket, now)
	if drop {
		*h = kernel.CompositeHold{}
	}
	return ok
}

// Reset drops key's state and hold: its next call is a fresh key's.
func (o *CompositeOracle) Reset(key string) {
	delete(o.states, key)
	delete(o.holds, key)
}

// mustLimits returns the Limits of text, which must be valid.
func mustLimits(t require.TestingT, text string) admit.Limits {
	l, err := admit.ParseLimits(text)
	require.NoError(t, err, text)
	return l
}

// supportsLimits reports whether v implements every rule of l.
func supportsLimits(v CompositeVariant, l admit.Limits) bool {
	for _, r := range l.Rules() {
		if !v.Supports(r.Algorithm) {
			return false
		}
	}
	return true
}

// issueExample is the Limits the composite feature was asked for with:
// 10 per second and 1,000 per hour on one key. For a variant without fixed
// windows, the hour is a token bucket's.
func issueExample(t require.TestingT, v CompositeVariant) admit.Limits {
	if v.Supports(admit.FixedWindow) {
		return mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")
	}
	return mustLimits(t, "token-bucket,10,1s + token-bucket,1000,1h")
}

// build calls a constructor and reports a panic as a failure: bad input is
// an error, never a panic.
func build[L any](t tester, what string, f func() (L, error)) (l L, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", what, p)
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

// constructors returns v's constructors as functions of Limits and options
// that report only their error, by name.
func constructors(t tester, v CompositeVariant) map[string]func(admit.Limits, ...admit.Option) error {
	out := map[string]func(admit.Limits, ...admit.Option) error{
		"NewLimits": func(l admit.Limits, opts ...admit.Option) error {
			_, err := build(t, "NewLimits", func() (admit.KeyedLimiter, error) { return v.NewLimits(l, opts...) })
			return err
		},
	}
	if v.NewLimitsLimiter != nil {
		out["NewLimitsLimiter"] = func(l admit.Limits, opts ...admit.Option) error {
			_, err := build(t, "NewLimitsLimiter", func() (admit.Limiter, error) { return v.NewLimitsLimiter(l, opts...) })
			return err
		}
	}
	return out
}
