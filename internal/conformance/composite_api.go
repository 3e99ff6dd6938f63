package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// The constructors: what they refuse, a Limits of one rule, and the
// interfaces of what they return.

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
// admit.CompositeStore (a remote variant: Limits and
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
