package policy

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
)

// TestDefaultFactory pins the variant a Service builds for each algorithm
// when no WithFactory option chooses one, which NewService's doc,
// docs/design.md and docs/configuration.md state: sharded, for every
// algorithm.
func TestDefaultFactory(t *testing.T) {
	for alg, want := range map[admit.Algorithm]string{
		admit.TokenBucket:    "github.com/admit-go/admit/sharded",
		admit.FixedWindow:    "github.com/admit-go/admit/sharded",
		admit.SlidingCounter: "github.com/admit-go/admit/sharded",
		admit.SlidingLog:     "github.com/admit-go/admit/sharded",
	} {
		rule := admit.Rule{Algorithm: alg, Limit: 10, Window: time.Minute}
		lim, err := defaultFactory(alg)(rule)
		require.NoError(t, err, "defaultFactory(%v)(%v)", alg, rule)
		typ := reflect.TypeOf(lim)
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		assert.Equal(t, want, typ.PkgPath(), "%v: the default variant builds a %v", alg, typ)

		// And a Service without WithFactory builds that variant.
		s, err := NewService(&Book{def: rule})
		require.NoError(t, err)
		got, err := s.build.newLimiter(rule)
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(lim), reflect.TypeOf(got), "%v: a Service without WithFactory", alg)
	}
}
