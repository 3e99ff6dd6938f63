package policy

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/sharded"
)

// TestDefaultFactory pins the variant a Service builds for each rule when
// no WithFactory option chooses one, which NewService's doc, docs/design.md
// and docs/configuration.md state: atomic's table for the rules whose state
// packs in its word, sharded's map store for the others (the sliding log,
// a sliding counter too wide to pack). A one-rule Limits is built by that
// factory.
func TestDefaultFactory(t *testing.T) {
	for _, tc := range []struct {
		rule admit.Rule
		want func(admit.Rule, ...admit.Option) (admit.Store, error)
	}{
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Minute}, admitatomic.New},
		{admit.Rule{Algorithm: admit.FixedWindow, Limit: 10, Window: time.Minute}, admitatomic.New},
		{admit.Rule{Algorithm: admit.SlidingCounter, Limit: 10, Window: time.Minute}, admitatomic.New},
		{admit.Rule{Algorithm: admit.SlidingCounter, Limit: 70000, Window: time.Minute}, sharded.New},
		{admit.Rule{Algorithm: admit.SlidingLog, Limit: 10, Window: time.Minute}, sharded.New},
	} {
		rule := tc.rule
		lim, err := defaultFactory(rule)(rule)
		require.NoError(t, err, "defaultFactory(%v)", rule)
		want, err := tc.want(rule)
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(want), reflect.TypeOf(lim), "%v: the default variant builds a %T, not a %T", rule, lim, want)

		// And a Service without WithFactory builds that variant.
		limits, err := admit.NewLimits(rule)
		require.NoError(t, err)
		s, err := NewService(&Book{def: limits})
		require.NoError(t, err)
		got, which, err := s.build.newLimiter(limits)
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(lim), reflect.TypeOf(got), "%v: a Service without WithFactory", rule)
		assert.Nil(t, which, "%v: one rule has no AllowNWhich to call", rule)
	}
}

// TestDefaultLimitsFactory pins the variant a Service builds for a composite
// when neither WithLimitsFactory nor WithFactory chooses one: sharded's
// NewLimits, whose store is an admit.CompositeStore.
func TestDefaultLimitsFactory(t *testing.T) {
	limits, err := admit.ParseLimits("token-bucket,10,1s + fixed-window,1000,1h + sliding-log,20,1m")
	require.NoError(t, err)
	want, err := sharded.NewLimits(limits)
	require.NoError(t, err)
	require.Implements(t, (*admit.CompositeStore)(nil), want)
	s, err := NewService(&Book{def: limits})
	require.NoError(t, err)
	got, which, err := s.build.newLimiter(limits)
	require.NoError(t, err)
	assert.Equal(t, reflect.TypeOf(want), reflect.TypeOf(got), "a Service without WithLimitsFactory builds a %T, not sharded's composite store", got)
	assert.NotNil(t, which)
}
