package locked

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// TestStripesSpreadKeys: WithShards(16) spreads 1,000 keys over all 16
// stripes. Each stripe's share is binomial (mean 62.5, deviation 7.7), so
// the bounds [20, 125] are more than five deviations away; a store that
// used half its stripes, or one, breaks them.
func TestStripesSpreadKeys(t *testing.T) {
	const keys, stripes = 1000, 16
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.SlidingLog} {
		lim, err := New(admit.Rule{Algorithm: alg, Limit: 1, Window: time.Second}, admit.WithClock(clock.NewFake()), admit.WithShards(stripes))
		require.NoError(t, err)
		for i := range keys {
			require.True(t, lim.Allow("user-"+strconv.Itoa(i)).Allowed)
		}
		lens := lim.(interface{ stripeLens() []int }).stripeLens()
		require.Len(t, lens, stripes)
		total := 0
		for i, n := range lens {
			total += n
			if n < 20 || n > 125 {
				t.Errorf("%v: stripe %d holds %d of %d keys, want 20 to 125 (all: %v)", alg, i, n, keys, lens)
			}
		}
		require.Equal(t, keys, total)
	}
}
