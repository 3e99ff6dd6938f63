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
// algorithm.
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
		got, err := s.build.newLimiter(rule)
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(lim), reflect.TypeOf(got), "%v: a Service without WithFactory", alg)
	}
}
