package policy

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/sharded"
)

// TestDefaultFactory pins the variant a Service builds for each algorithm
// when no WithFactory option chooses one, which NewService's doc,
// docs/design.md and docs/configuration.md state: sharded, for every
// algorithm. A one-rule Limits is built by that factory.
func TestDefaultFactory(t *testing.T) {
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter, admit.SlidingLog} {
		rule := admit.Rule{Algorithm: alg, Limit: 10, Window: time.Minute}
		lim, err := defaultFactory(alg)(rule)
		require.NoError(t, err, "defaultFactory(%v)(%v)", alg, rule)
		want, err := sharded.New(rule)
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(want), reflect.TypeOf(lim), "%v: the default variant builds a %T, not sharded's store", alg, lim)

		// And a Service without WithFactory builds that variant.
		limits, err := admit.NewLimits(rule)
		require.NoError(t, err)
		s, err := NewService(&Book{def: limits})
		require.NoError(t, err)
		got, which, err := s.build.newLimiter(limits)
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(lim), reflect.TypeOf(got), "%v: a Service without WithFactory", alg)
		assert.Nil(t, which, "%v: one rule has no AllowNWhich to call", alg)
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
