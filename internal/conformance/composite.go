package conformance

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// CompositeVariant describes one variant's constructors of composite limits
// (admit.Limits) under test: the same suite for every store, with
// kernel.Composite as its oracle.
type CompositeVariant struct {
	Name string
	// NewLimits and NewLimitsLimiter are the variant's constructors.
	// NewLimitsLimiter may be nil for a variant that offers only keyed
	// limiters.
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
// variant's is an admit.CompositeStore and an admit.Resetter as well.
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

func testCompositeErrors(t *testing.T, v CompositeVariant) {
	one := mustLimits(t, "token-bucket,5,10s")
	pair := issueExample(t, v)
	factory := withFactory(func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error) { return nil, nil })
	for name, ctor := range constructors(t, v) {
		assert.ErrorIs(t, ctor(admit.Limits{}), admit.ErrInvalidRule, "%s(the zero Limits)", name)
		assert.ErrorIs(t, ctor(admit.Limits{}, admit.WithClock(clock.NewFake())), admit.ErrInvalidRule, "%s(the zero Limits, WithClock)", name)
		for _, l := range []admit.Limits{one, pair} {
			assert.ErrorIs(t, ctor(l, admit.WithClock(nil)), admit.ErrInvalidOption, "%s(%v, WithClock(nil))", name, l)
			assert.ErrorIs(t, ctor(l, nil), admit.ErrInvalidOption, "%s(%v, nil)", name, l)
			assert.ErrorIs(t, ctor(l, factory), admit.ErrUnsupported, "%s(%v, policy.WithFactory): only policy.NewService takes a factory", name, l)
			assert.NoError(t, ctor(l, admit.WithClock(clock.NewFake())), "%s(%v, WithClock)", name, l)
		}
		for _, alg := range Algorithms {
			if v.Supports(alg) {
				continue
			}
			r := admit.Rule{Algorithm: alg, Limit: 5, Window: time.Second}
			for _, rules := range [][]admit.Rule{{r}, {one.At(0), r}, {r, one.At(0)}} {
				l, err := admit.NewLimits(rules...)
				require.NoError(t, err)
				assert.ErrorIs(t, ctor(l), admit.ErrUnsupported, "%s(%v)", name, l)
			}
		}
	}
	// The store options: a local keyed store checks and takes them; a
	// remote one and a single-key limiter have no store and refuse them,
	// naming them.
	storeOpts := map[string]admit.Option{"WithShards": admit.WithShards(4), "WithMaxKeys": admit.WithMaxKeys(10), "WithHashedKeys": admit.WithHashedKeys()}
	for _, l := range []admit.Limits{one, pair} {
		ctors := constructors(t, v)
		if v.Remote {
			for opt, o := range storeOpts {
				err := ctors["NewLimits"](l, o)
				assert.ErrorIs(t, err, admit.ErrUnsupported, "NewLimits(%v, %s): a remote variant has no local store", l, opt)
				assert.ErrorContains(t, err, opt)
			}
		} else {
			for _, bad := range []admit.Option{admit.WithShards(0), admit.WithShards(3), admit.WithMaxKeys(0), admit.WithMaxKeys(-1)} {
				assert.ErrorIs(t, ctors["NewLimits"](l, bad), admit.ErrInvalidOption, "NewLimits(%v) with a bad store option", l)
			}
			assert.NoError(t, ctors["NewLimits"](l, admit.WithShards(1), admit.WithMaxKeys(1), admit.WithClock(clock.NewFake())), "NewLimits(%v) with store options", l)
		}
		if single, ok := ctors["NewLimitsLimiter"]; ok {
			for opt, o := range storeOpts {
				err := single(l, o)
				assert.ErrorIs(t, err, admit.ErrUnsupported, "NewLimitsLimiter(%v, %s): a single-key limiter has no store", l, opt)
				assert.ErrorContains(t, err, opt)
			}
		}
	}
	// The most rules a Limits holds.
	var rules []admit.Rule
	for i := range admit.MaxLimits {
		rules = append(rules, admit.Rule{Algorithm: admit.TokenBucket, Limit: 2 + i, Window: time.Duration(1+i) * time.Second})
	}
	eight, err := admit.NewLimits(rules...)
	require.NoError(t, err)
	lim, err := v.NewLimits(eight, admit.WithClock(clock.NewFake()))
	require.NoError(t, err, "NewLimits(%v)", eight)
	assert.True(t, lim.AllowN("k", 2).Allowed)
	assert.False(t, lim.Allow("k").Allowed, "%v: the first rule is spent", eight)
}

// testCompositeOneRule: for a Limits of one rule the constructors return
// the rule's own limiter, which decides exactly as the rule.
func testCompositeOneRule(t *testing.T, v CompositeVariant) {
	for _, alg := range Algorithms {
		if !v.Supports(alg) {
			continue
		}
		rule := admit.Rule{Algorithm: alg, Limit: 3, Window: 10 * time.Second}
		l, err := admit.NewLimits(rule)
		require.NoError(t, err)
		fake := clock.NewFake()
		fake.Set(time.Hour)
		lim, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err, "NewLimits(%v)", l)
		if c, ok := lim.(compositeKeyed); ok {
			// A limiter may say its Limits whatever their length (redisstore's
			// do): then they are the one rule, which binds every decision.
			assert.Equal(t, l, c.Limits(), "NewLimits(%v).Limits()", l)
			_, which := c.AllowNWhich("probe", 0)
			assert.Zero(t, which, "NewLimits(%v): the one rule binds", l)
		}
		if !v.Remote {
			s, ok := lim.(admit.Store)
			if assert.True(t, ok, "NewLimits(%v) is New's admit.Store", l) {
				assert.Equal(t, rule, s.Rule())
			}
		}
		var single admit.Limiter
		if v.NewLimitsLimiter != nil {
			single, err = v.NewLimitsLimiter(l, admit.WithClock(fake))
			require.NoError(t, err, "NewLimitsLimiter(%v)", l)
			_, composite := single.(admit.CompositeLimiter)
			assert.False(t, composite, "NewLimitsLimiter(%v): a Limits of one rule is that rule, not a composite", l)
		}
		oracle := NewOracle(rule)
		for i, at := range []time.Duration{0, 0, 0, 0, time.Second, 4 * time.Second, 4 * time.Second, 15 * time.Second, 15 * time.Second} {
			fake.Set(time.Hour + at)
			n := 1 + i%2
			want := oracle.Allow("a", fake.Now(), n)
			assert.Equal(t, want, lim.AllowN("a", n), "%v step %d: AllowN(t=%v, %q, %d)", l, i, fake.Now(), "a", n)
			if single != nil {
				assert.Equal(t, want, single.AllowN(n), "%v step %d: AllowN(t=%v, %d)", l, i, fake.Now(), n)
			}
		}
	}
}

// testCompositeInterfaces: for two or more rules, NewLimits returns an
// admit.CompositeStore and an admit.Resetter (a remote variant: Limits and
// AllowNWhich), and NewLimitsLimiter an admit.CompositeLimiter, each
// reporting its Limits.
func testCompositeInterfaces(t *testing.T, v CompositeVariant) {
	texts := []string{"token-bucket,10,1s + token-bucket,1000,1h", "token-bucket,10,1s + fixed-window,1000,1h + sliding-log,5,1s + sliding-counter,20,1m"}
	for _, text := range texts {
		l := mustLimits(t, text)
		if !supportsLimits(v, l) {
			continue
		}
		lim, err := v.NewLimits(l, admit.WithClock(clock.NewFake()))
		require.NoError(t, err, "NewLimits(%v)", l)
		if !v.Remote {
			cs, ok := lim.(admit.CompositeStore)
			if assert.True(t, ok, "NewLimits(%v) is an admit.CompositeStore", l) {
				assert.Equal(t, l, cs.Limits())
				assert.True(t, cs.Allow("k").Allowed)
				assert.Equal(t, 1, cs.Len(), "%v: one key stored", l)
			}
			_, ok = lim.(admit.Resetter)
			assert.True(t, ok, "NewLimits(%v) is an admit.Resetter", l)
		}
		if ck, ok := lim.(compositeKeyed); assert.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l) {
			assert.Equal(t, l, ck.Limits())
		}
		if v.NewLimitsLimiter == nil {
			continue
		}
		single, err := v.NewLimitsLimiter(l, admit.WithClock(clock.NewFake()))
		require.NoError(t, err, "NewLimitsLimiter(%v)", l)
		if cl, ok := single.(admit.CompositeLimiter); assert.True(t, ok, "NewLimitsLimiter(%v) is an admit.CompositeLimiter", l) {
			assert.Equal(t, l, cl.Limits())
		}
	}
}

// compositeStep is one scripted call: at the fake clock's time at,
// AllowNWhich(n) on key, its Decision and the index of the rule that bound
// it.
type compositeStep struct {
	at    time.Duration
	key   string
	n     int
	want  admit.Decision
	which int
}

// runCompositeSteps replays steps through the keyed limiter (and, for key
// "a", the single-key one) of l.
func runCompositeSteps(t tester, v CompositeVariant, l admit.Limits, steps []compositeStep) {
	t.Helper()
	fake := clock.NewFake()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err, "NewLimits(%v)", l)
	ck, ok := lim.(compositeKeyed)
	require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
	var single admit.CompositeLimiter
	if v.NewLimitsLimiter != nil {
		s, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(t, err, "NewLimitsLimiter(%v)", l)
		single, ok = s.(admit.CompositeLimiter)
		require.True(t, ok, "NewLimitsLimiter(%v) is an admit.CompositeLimiter", l)
	}
	for i, st := range steps {
		fake.Set(st.at)
		if got, which := ck.AllowNWhich(st.key, st.n); got != st.want || which != st.which {
			t.Errorf("%v step %d: AllowNWhich(t=%v, %q, %d) = %+v, rule %d; want %+v, rule %d", l, i, st.at, st.key, st.n, got, which, st.want, st.which)
		}
		if single != nil && st.key == "a" {
			if got, which := single.AllowNWhich(st.n); got != st.want || which != st.which {
				t.Errorf("%v step %d: AllowNWhich(t=%v, %d) = %+v, rule %d; want %+v, rule %d", l, i, st.at, st.n, got, which, st.want, st.which)
			}
		}
	}
}

// testCompositeWalkthrough: 2 per second and 3 per 10s on one key. The
// Decision's Remaining is the smallest, RetryAfter and ResetAfter the
// largest, and the rule that binds is the one with the smallest Remaining
// on an admission and the largest RetryAfter on a denial, the first on a
// tie.
func testCompositeWalkthrough(t *testing.T, v CompositeVariant) {
	if !v.Supports(admit.FixedWindow) {
		t.Skip("no fixed window")
	}
	s, ms := time.Second, time.Millisecond
	ok := func(limit, remaining int, reset time.Duration) admit.Decision {
		return admit.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
	}
	no := func(limit int, retry, reset time.Duration) admit.Decision {
		return admit.Decision{Limit: limit, RetryAfter: retry, ResetAfter: reset}
	}
	runCompositeSteps(t, v, mustLimits(t, "token-bucket,2,1s + fixed-window,3,10s"), []compositeStep{
		{0, "a", 1, ok(2, 1, 10*s), 0},
		{0, "a", 1, ok(2, 0, 10*s), 0},
		{0, "a", 1, no(2, 500*ms, 10*s), 0}, // the bucket is empty, the window has room: nothing is charged
		{0, "a", 0, ok(2, 0, 10*s), 0},
		{500 * ms, "a", 1, ok(2, 0, 9*s+500*ms), 0}, // both have none left: the first binds
		{s, "a", 1, no(3, 9*s, 9*s), 1},             // a token, but no room in the window
		{s, "a", 0, ok(3, 0, 9*s), 1},
		{s, "b", 2, ok(2, 0, 9*s), 0}, // another key's budget is its own
		{10 * s, "a", 3, no(2, admit.Never, 0), 0},
		{10 * s, "a", -1, no(2, admit.Never, 0), 0},
		{10 * s, "a", 2, ok(2, 0, 10*s), 0},
		{10 * s, "a", 1, no(2, 500*ms, 10*s), 0},
		{10*s + 500*ms, "a", 1, ok(2, 0, 9*s+500*ms), 0},
	})
}

// testCompositeAllOrNothing: a rule that admits is charged only if every
// rule admits. A window (or log, or counter) of 3 per minute and a bucket
// of 1 per second: four requests denied by the bucket at 0 must leave the
// window's count at 1, so that requests at 1s and 2s pass and the one at
// 3s is the window's fourth.
func testCompositeAllOrNothing(t tester, v CompositeVariant) {
	t.Helper()
	for _, first := range []string{"fixed-window,3,1m", "sliding-log,3,1m", "sliding-counter,3,1m"} {
		l := mustLimits(t, first+" + token-bucket,1,1s")
		if !supportsLimits(v, l) {
			continue
		}
		fake := clock.NewFake()
		lim, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err, "NewLimits(%v)", l)
		ck, ok := lim.(compositeKeyed)
		require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
		oracle := NewCompositeOracle(l)
		for i, st := range []struct {
			at      time.Duration
			allowed bool
			which   int
		}{
			{0, true, 1},
			{0, false, 1}, {0, false, 1}, {0, false, 1}, {0, false, 1},
			{time.Second, true, 1},
			{2 * time.Second, true, 0},
			{3 * time.Second, false, 0},
		} {
			fake.Set(st.at)
			want, wantWhich := oracle.Allow("k", st.at, 1)
			got, which := ck.AllowNWhich("k", 1)
			if got.Allowed != st.allowed || which != st.which || got != want || which != wantWhich {
				t.Errorf("%v step %d: AllowNWhich(t=%v, %q, 1) = %+v, rule %d; want %+v, rule %d", l, i, st.at, "k", got, which, want, wantWhich)
			}
		}
	}
}

// testCompositeAboveLimit: n above the smallest Limit, or negative, is
// denied with RetryAfter admit.Never, bound by the rule with the smallest
// Limit (the first on a tie), and charges nothing.
func testCompositeAboveLimit(t *testing.T, v CompositeVariant) {
	ex := issueExample(t, v) // 10 per second first
	swapped, err := admit.NewLimits(ex.At(1), ex.At(0))
	require.NoError(t, err)
	for _, l := range []admit.Limits{ex, swapped} {
		fake := clock.NewFake()
		lim, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err, "NewLimits(%v)", l)
		ck, ok := lim.(compositeKeyed)
		require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
		var single admit.CompositeLimiter
		if v.NewLimitsLimiter != nil {
			s, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
			require.NoError(t, err)
			single, ok = s.(admit.CompositeLimiter)
			require.True(t, ok, "NewLimitsLimiter(%v) is an admit.CompositeLimiter", l)
		}
		for _, n := range []int{11, 1000, 1001, -1} {
			which := 0 // the first rule that can never admit n binds
			for n >= 0 && l.At(which).Limit >= n {
				which++
			}
			want := admit.Decision{Limit: l.At(which).Limit, RetryAfter: admit.Never}
			got, w := ck.AllowNWhich("k", n)
			assert.True(t, got == want && w == which, "%v: AllowNWhich(%q, %d) = %+v, rule %d; want %+v, rule %d", l, "k", n, got, w, want, which)
			if single != nil {
				got, w := single.AllowNWhich(n)
				assert.True(t, got == want && w == which, "%v: AllowNWhich(%d) = %+v, rule %d; want %+v, rule %d", l, n, got, w, want, which)
			}
		}
		assert.True(t, lim.AllowN("k", 10).Allowed, "%v: AllowN(10) after the refusals: nothing was charged", l)
		if single != nil {
			assert.True(t, single.AllowN(10).Allowed, "%v: AllowN(10) after the refusals: nothing was charged", l)
		}
	}
}

// drawLimits draws Limits of lo to hi rules of the algorithms v supports
// (only token buckets if tbOnly), with small limits.
func drawLimits(rt *rapid.T, v CompositeVariant, lo, hi int, tbOnly bool) admit.Limits {
	var algs []admit.Algorithm
	for _, a := range Algorithms {
		if v.Supports(a) && (!tbOnly || a == admit.TokenBucket) {
			algs = append(algs, a)
		}
	}
	var rules []admit.Rule
	for range rapid.IntRange(lo, hi).Draw(rt, "rules") {
		r := drawRule(rt, rapid.SampledFrom(algs).Draw(rt, "algorithm"))
		for slices.Contains(rules, r) {
			r.Window++ // the same rule twice is not Limits
		}
		rules = append(rules, r)
	}
	l, err := admit.NewLimits(rules...)
	require.NoError(rt, err)
	return l
}

// largestLimit is the largest Limit of l's rules.
func largestLimit(l admit.Limits) int {
	m := 0
	for _, r := range l.Rules() {
		m = max(m, r.Limit)
	}
	return m
}

// moveClock moves fake as testDifferential does, by the window of one of
// l's rules: forwards by up to two windows, by a few nanoseconds, or back
// by up to one window (the next readings are stale). It reports whether it
// moved the clock; otherwise the caller makes a call.
func moveClock(rt *rapid.T, fake *clock.Fake, l admit.Limits) bool {
	w := int64(l.At(rapid.IntRange(0, l.Len()-1).Draw(rt, "rule")).Window)
	switch rapid.IntRange(0, 9).Draw(rt, "op") {
	case 0, 1:
		fake.Advance(time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "advance")))
	case 2:
		fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
	case 3:
		fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, w).Draw(rt, "back")))
	default:
		return false
	}
	return true
}

// compositeDifferential drives the variant and the kernel oracle with the
// same generated calls, keys and clock moves (forwards and backwards),
// sequentially, on Limits of one to four rules, and requires identical
// Decisions and, through AllowNWhich, the same binding rule.
func compositeDifferential(v CompositeVariant) func(*rapid.T) {
	return func(rt *rapid.T) {
		l := drawLimits(rt, v, 1, 4, false)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		keyed, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(rt, err)
		ck, composite := keyed.(compositeKeyed)
		if l.Len() > 1 && !composite {
			rt.Fatalf("NewLimits(%v) has no AllowNWhich", l)
		}
		var single admit.Limiter
		if v.NewLimitsLimiter != nil {
			single, err = v.NewLimitsLimiter(l, admit.WithClock(fake))
			require.NoError(rt, err)
		}
		cl, _ := single.(admit.CompositeLimiter)
		oracle := NewCompositeOracle(l)
		keys := []string{"a", "b", "c"}
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			if moveClock(rt, fake, l) {
				continue
			}
			n := rapid.IntRange(-1, largestLimit(l)+1).Draw(rt, "n")
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			now := fake.Now()
			want, wantWhich := oracle.Allow(key, now, n)
			which := wantWhich
			var got admit.Decision
			switch {
			case composite && rapid.Bool().Draw(rt, "which"):
				got, which = ck.AllowNWhich(key, n)
			case n == 1 && rapid.Bool().Draw(rt, "allow"):
				got = keyed.Allow(key)
			default:
				got = keyed.AllowN(key, n)
			}
			if got != want || which != wantWhich {
				rt.Fatalf("%v op %d: keyed AllowN(t=%v, %q, %d) = %+v, rule %d; want %+v, rule %d", l, i, now, key, n, got, which, want, wantWhich)
			}
			if single == nil || key != "a" {
				continue // the single limiter mirrors key "a" of the keyed one
			}
			if cl != nil && rapid.Bool().Draw(rt, "single-which") {
				got, which = cl.AllowNWhich(n)
			} else {
				got = single.AllowN(n)
			}
			if got != want || which != wantWhich {
				rt.Fatalf("%v op %d: AllowN(t=%v, %d) = %+v, rule %d; want %+v, rule %d", l, i, now, n, got, which, want, wantWhich)
			}
		}
	}
}

// testCompositeReset checks Reset on a composite store that offers it: a
// reset key has one fresh budget in every rule at the same reading, other
// keys keep theirs, a reservation made before a reset cannot be cancelled
// after it, and over random operations the store equals the kernel with a
// reset replaced by a fresh state.
func testCompositeReset(t *testing.T, v CompositeVariant) {
	lim, err := v.NewLimits(issueExample(t, v))
	require.NoError(t, err)
	if !implements[resetter](lim) {
		t.Skip("no Reset")
	}
	t.Run("Fresh", func(t *testing.T) {
		// 10 per second and 15 per hour: after a second, a key that spent
		// 10 has 5 left, in the hour's rule.
		l := mustLimits(t, "token-bucket,10,1s + token-bucket,15,1h")
		if v.Supports(admit.FixedWindow) {
			l = mustLimits(t, "token-bucket,10,1s + fixed-window,15,1h")
		}
		fake := clock.NewFake()
		fake.Set(time.Hour)
		lim, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err)
		r := lim.(resetter)
		oracle := NewCompositeOracle(l)
		call := func(key string, n int, allowed bool) {
			t.Helper()
			want, _ := oracle.Allow(key, fake.Now(), n)
			got := lim.AllowN(key, n)
			assert.Equal(t, want, got, "%v: AllowN(t=%v, %q, %d)", l, fake.Now(), key, n)
			assert.Equal(t, allowed, got.Allowed, "%v: AllowN(t=%v, %q, %d)", l, fake.Now(), key, n)
		}
		for _, k := range []string{"a", "b"} {
			call(k, 10, true)
			call(k, 1, false)
		}
		fake.Advance(time.Second)
		for _, k := range []string{"a", "b"} {
			call(k, 5, true)
			call(k, 1, false) // 15 spent in the hour
		}
		r.Reset("a")
		oracle.Reset("a")
		r.Reset("never-seen")
		call("a", 10, true) // a fresh budget in every rule
		call("a", 1, false)
		call("b", 1, false) // Reset of a leaves b alone
		fake.Advance(time.Second)
		call("a", 5, true)
		call("a", 1, false) // one fresh budget, not more
		call("b", 1, false)
		call("never-seen", 10, true)
	})
	t.Run("Reservation", func(t *testing.T) {
		tbs := mustLimits(t, "token-bucket,3,10s + token-bucket,5,1h")
		lim, err := v.NewLimits(tbs, admit.WithClock(clock.NewFake()))
		require.NoError(t, err)
		res, ok := lim.(admit.KeyedReserver)
		if !ok {
			t.Skip("not an admit.KeyedReserver")
		}
		require.True(t, lim.AllowN("w", 3).Allowed)
		rv, ok := res.ReserveN("w", 1, time.Minute)
		require.True(t, ok)
		require.Positive(t, rv.Delay, "the reservation waits")
		lim.(resetter).Reset("w")
		assert.False(t, res.CancelReservation("w", rv), "a reservation made before a reset cannot be cancelled after it")
		assert.True(t, lim.AllowN("w", 3).Allowed, "after Reset: a fresh budget in every rule")
		assert.False(t, lim.Allow("w").Allowed)
	})
	t.Run("Differential", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			l := drawLimits(rt, v, 2, 3, false)
			fake := clock.NewFake()
			fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
			lim, err := v.NewLimits(l, admit.WithClock(fake))
			require.NoError(rt, err)
			r := lim.(resetter)
			oracle := NewCompositeOracle(l)
			keys := []string{"a", "b"}
			for i := range rapid.IntRange(1, 50).Draw(rt, "ops") {
				if moveClock(rt, fake, l) {
					continue
				}
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				if rapid.IntRange(0, 3).Draw(rt, "reset") == 0 {
					r.Reset(key)
					oracle.Reset(key)
					continue
				}
				n := rapid.IntRange(0, l.Limit()).Draw(rt, "n")
				want, _ := oracle.Allow(key, fake.Now(), n)
				if got := lim.AllowN(key, n); got != want {
					rt.Fatalf("%v op %d: AllowN(t=%v, %q, %d) = %+v, kernel %+v", l, i, fake.Now(), key, n, got, want)
				}
			}
		})
	})
}

// testCompositeAllocs: an admitted Allow of the issue's Limits on an
// existing key, with the clock moving on, makes at most v.AllowAllocs
// allocations, keyed or single-key; a denied one makes none.
func testCompositeAllocs(t *testing.T, v CompositeVariant) {
	if v.Remote {
		t.Skip("a remote variant's allocations are its network client's")
	}
	if raceEnabled {
		t.Skip("the race detector's runtime allocates of its own")
	}
	l := issueExample(t, v) // 10 per second and 1,000 per hour
	fake := clock.NewFake()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	allow := map[string]func() admit.Decision{"keyed": func() admit.Decision { return lim.Allow("hot") }}
	if v.NewLimitsLimiter != nil {
		single, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(t, err)
		allow["single"] = single.Allow
	}
	for name, call := range allow {
		call() // create the key
		// A token every 100ms: 201 admissions, within the hour's 1,000.
		allocs := testing.AllocsPerRun(200, func() {
			fake.Advance(100 * time.Millisecond)
			if !call().Allowed {
				panic("a token comes every 100ms")
			}
		})
		assert.LessOrEqual(t, allocs, v.AllowAllocs, "%v: allocations per admitted Allow on an existing key (%s)", l, name)
		for call().Allowed {
		}
		assert.Zero(t, testing.AllocsPerRun(100, func() {
			if call().Allowed {
				panic("the bucket is empty")
			}
		}), "%v: allocations per denied Allow (%s)", l, name)
	}
}

// reserverOf returns, for a key, the calls of a reserving limiter on it:
// reserve n with no bound on the wait, cancel a reservation, and AllowN
// with the binding rule.
type reserverOf func(key string) (reserve func(n int) admit.Reservation, cancel func(admit.Reservation) bool, allow func(n int) (admit.Decision, int))

// compositeReservers returns v's reserving limiters of l (all token
// buckets), by name: "keyed" if NewLimits' is an admit.KeyedReserver, and
// "single" if NewLimitsLimiter's is an admit.Reserver, where each key is a
// limiter of its own.
func compositeReservers(t tester, v CompositeVariant, l admit.Limits, fake *clock.Fake) map[string]reserverOf {
	out := map[string]reserverOf{}
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	if kr, ok := lim.(admit.KeyedReserver); ok {
		ck, ok := lim.(compositeKeyed)
		require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
		out["keyed"] = func(key string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) (admit.Decision, int)) {
			return func(n int) admit.Reservation {
					r, ok := kr.ReserveN(key, n, admit.Never)
					require.True(t, ok, "ReserveN(%q, %d)", key, n)
					return r
				}, func(r admit.Reservation) bool { return kr.CancelReservation(key, r) },
				func(n int) (admit.Decision, int) { return ck.AllowNWhich(key, n) }
		}
	}
	if v.NewLimitsLimiter != nil {
		probe, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(t, err)
		if _, ok := probe.(admit.Reserver); ok {
			singles := map[string]admit.Limiter{}
			out["single"] = func(key string) (func(int) admit.Reservation, func(admit.Reservation) bool, func(int) (admit.Decision, int)) {
				lim, ok := singles[key]
				if !ok {
					made, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
					require.NoError(t, err)
					lim, singles[key] = made, made
				}
				r := lim.(admit.Reserver)
				cl, ok := lim.(admit.CompositeLimiter)
				require.True(t, ok, "NewLimitsLimiter(%v) is an admit.CompositeLimiter", l)
				return func(n int) admit.Reservation {
					res, ok := r.ReserveN(n, admit.Never)
					require.True(t, ok, "ReserveN(%d)", n)
					return res
				}, r.CancelReservation, cl.AllowNWhich
			}
		}
	}
	return out
}

// implements reports whether x is an I.
func implements[I any](x any) bool {
	_, ok := x.(I)
	return ok
}

// testCompositeReserve checks, for a variant whose limiters of token
// buckets reserve, that a reservation takes its tokens in every rule and a
// cancellation gives them back in every rule, at most once, only where it
// was made and never at a reading older than one that saw them due; and
// that ReserveN equals kernel.Composite.Reserve over generated calls.
func testCompositeReserve(t *testing.T, v CompositeVariant) {
	// 1 per second and 3 per minute (a token every 20s).
	l := mustLimits(t, "token-bucket,1,1s + token-bucket,3,1m")
	if len(compositeReservers(t, v, l, clock.NewFake())) == 0 {
		t.Skip("no admit.KeyedReserver or admit.Reserver for a composite of token buckets")
	}
	t.Run("EveryRule", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			fake.Set(0)
			reserve, _, allow := of("k")
			oracle := NewCompositeOracle(l)
			check := func(n int) {
				t.Helper()
				want, wantWhich := oracle.Allow("k", fake.Now(), n)
				got, which := allow(n)
				assert.True(t, got == want && which == wantWhich, "%s: AllowNWhich(t=%v, %d) = %+v, rule %d; want %+v, rule %d", name, fake.Now(), n, got, which, want, wantWhich)
			}
			check(1)
			r := reserve(1)
			d, _, _ := oracle.Reserve("k", 0, 1, admit.Never)
			assert.Equal(t, time.Second, r.Delay, name)
			assert.Equal(t, d, r.Delay, name)
			fake.Set(2 * time.Second)
			check(1)
			// The reservation took a token of the minute's rule too: at 3s
			// the second's has one, the minute's none.
			fake.Set(3 * time.Second)
			check(1)
			got, which := allow(0)
			assert.Equal(t, 0, got.Remaining, "%s: the minute's rule has spent 3 tokens", name)
			assert.Equal(t, 1, which, "%s: and binds", name)
			got, which = allow(1)
			assert.False(t, got.Allowed, "%s: the minute's rule has spent 3 tokens", name)
			assert.Equal(t, 1, which, name)
			assert.Equal(t, 17*time.Second, got.RetryAfter, name)
		}
	})
	t.Run("GivesBackEveryRule", func(t *testing.T) {
		// A key that reserved and cancelled decides from then on as its
		// twin, which did neither.
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			fake.Set(0)
			reserve, cancel, allow := of("r")
			_, _, twin := of("t")
			allow(1)
			twin(1)
			r := reserve(1)
			require.Positive(t, r.Delay, name)
			require.True(t, cancel(r), "%s: the latest reservation, not yet due", name)
			for _, at := range []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 20 * time.Second, 40 * time.Second, 41 * time.Second, time.Minute} {
				fake.Set(at)
				got, which := allow(1)
				want, wantWhich := twin(1)
				assert.True(t, got == want && which == wantWhich, "%s: AllowNWhich(t=%v, 1) = %+v, rule %d after a cancellation; the twin's %+v, rule %d", name, at, got, which, want, wantWhich)
			}
		}
	})
	t.Run("Twice", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			fake.Set(0)
			reserve, cancel, allow := of("k")
			allow(1)
			rA := reserve(1)
			require.Positive(t, rA.Delay, name)
			copyA := rA
			require.True(t, cancel(rA), name)
			rB := reserve(1)
			require.Equal(t, rA.Delay, rB.Delay, name)
			require.False(t, cancel(rA), "%s: A was cancelled already", name)
			require.False(t, cancel(copyA), "%s: a copy of A too", name)
			rC := reserve(1)
			require.GreaterOrEqual(t, rC.Delay, rB.Delay+time.Second, "%s: C waits behind B", name)
		}
	})
	t.Run("OtherKey", func(t *testing.T) {
		fake := clock.NewFake()
		for name, of := range compositeReservers(t, v, l, fake) {
			resX, cancelX, allowX := of("x")
			resY, cancelY, allowY := of("y")
			allowX(1)
			allowY(1)
			rX, rY := resX(1), resY(1)
			require.False(t, cancelY(rX), "%s: x's reservation must not free y's tokens", name)
			require.False(t, cancelX(rY), "%s: nor y's x's", name)
			require.True(t, cancelX(rX), "%s: a reservation presented elsewhere can still be cancelled where it was made", name)
			require.True(t, cancelY(rY), name)
		}
	})
	t.Run("StaleReading", func(t *testing.T) {
		for _, n := range []int{0, 1} {
			fake := clock.NewFake()
			for name, of := range compositeReservers(t, v, l, fake) {
				fake.Set(time.Hour)
				reserve, cancel, allow := of("k")
				allow(1)
				r := reserve(1) // due at 1h+1s
				fake.Set(time.Hour + r.Delay + 500*time.Millisecond)
				allow(n) // sees the tokens due
				fake.Set(time.Hour + r.Delay/2)
				require.False(t, cancel(r), "%s: AllowN(%d) saw the tokens due; a cancel at an older reading is stale", name, n)
				fake.Set(time.Hour + r.Delay + 500*time.Millisecond)
				d, _ := allow(1)
				require.False(t, d.Allowed, "%s: the reservation's token is spent", name)
			}
		}
	})
	t.Run("Differential", func(t *testing.T) {
		if lim, err := v.NewLimits(l); err != nil || !implements[admit.KeyedReserver](lim) {
			t.Skip("not an admit.KeyedReserver")
		}
		rapid.Check(t, func(rt *rapid.T) {
			l := drawLimits(rt, v, 2, 3, true)
			fake := clock.NewFake()
			fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
			lim, err := v.NewLimits(l, admit.WithClock(fake))
			require.NoError(rt, err)
			kr, ok := lim.(admit.KeyedReserver)
			if !ok {
				rt.Fatalf("NewLimits(%v) is not an admit.KeyedReserver, but NewLimits(%v) is", l, mustLimits(rt, "token-bucket,1,1s + token-bucket,3,1m"))
			}
			oracle := NewCompositeOracle(l)
			keys := []string{"a", "b"}
			for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
				if moveClock(rt, fake, l) {
					continue
				}
				n := rapid.IntRange(-1, l.Limit()+1).Draw(rt, "n")
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				now := fake.Now()
				if rapid.Bool().Draw(rt, "reserve") {
					maxWait := rapid.SampledFrom([]time.Duration{0, l.At(0).Window / 2, admit.Never}).Draw(rt, "maxWait")
					d, ok, _ := oracle.Reserve(key, now, n, maxWait)
					if r, got := kr.ReserveN(key, n, maxWait); r.Delay != d || got != ok {
						rt.Fatalf("%v op %d: ReserveN(t=%v, %q, %d, %v) = %v, %t; kernel %v, %t", l, i, now, key, n, maxWait, r.Delay, got, d, ok)
					}
					continue
				}
				want, _ := oracle.Allow(key, now, n)
				if got := kr.AllowN(key, n); got != want {
					rt.Fatalf("%v op %d: AllowN(t=%v, %q, %d) = %+v, kernel %+v", l, i, now, key, n, got, want)
				}
			}
		})
	})
}

// CompositeHeldMemoryReturns is the keyed-store check HeldMemoryReturns
// for v's keyed stores of a composite of token buckets, which must be local
// stores that reserve, as every keyed composite store of packages locked
// and sharded is: each key spends its first bucket and reserves a token due
// later, leaving a hold (or a held cell's record); once the tokens are due
// and a sweep has evicted every key, the memory of the holds must be back.
func CompositeHeldMemoryReturns(t *testing.T, v CompositeVariant) {
	if v.Remote {
		t.Fatalf("conformance.CompositeHeldMemoryReturns(%s): a remote variant has no local store", v.Name)
	}
	n := 20_000 // a composite's hold is about 1 KiB
	switch {
	case raceEnabled:
		n = 5_000
	case testing.Short():
		n = 10_000
	}
	l := mustLimits(t, "token-bucket,5,1s + token-bucket,50,1m")
	fake := clock.NewFake()
	fake.Set(time.Hour)
	base := heapInUse()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	res, ok := lim.(admit.KeyedReserver)
	require.True(t, ok, "%s.NewLimits(%v) is not an admit.KeyedReserver", v.Name, l)
	holds, swept := spendHoldSweep(t, l, lim, res, lim.(admit.CompositeStore), fake, base, n)
	// Each hold is a large record behind a small map entry, so the map that
	// was kept took only 4% of what the holds took: the bound is 1/64.
	assert.LessOrEqual(t, swept, holds/64, "%v: heap kept after evicting all %d held keys, of the %d bytes their holds took", l, n, holds)
	runtime.KeepAlive(lim)
}
