package sharded

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// TestShardsSpreadKeys: WithShards(16) spreads 1,000 keys over all 16
// shards, with full and with hashed keys. Each shard's share is binomial
// (mean 62.5, deviation 7.7), so the bounds [20, 125] are more than five
// deviations away; a store that used half its shards, or one, breaks them.
func TestShardsSpreadKeys(t *testing.T) {
	const keys, shards = 1000, 16
	for _, hashed := range []bool{false, true} {
		opts := []admit.Option{admit.WithClock(clock.NewFake()), admit.WithShards(shards)}
		if hashed {
			opts = append(opts, admit.WithHashedKeys())
		}
		lim, err := New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}, opts...)
		require.NoError(t, err)
		for i := range keys {
			require.True(t, lim.Allow("user-"+strconv.Itoa(i)).Allowed)
		}
		lens := lim.(interface{ shardLens() []int }).shardLens()
		require.Len(t, lens, shards)
		total := 0
		for i, n := range lens {
			total += n
			if n < 20 || n > 125 {
				t.Errorf("hashed keys %v: shard %d holds %d of %d keys, want 20 to 125 (all: %v)", hashed, i, n, keys, lens)
			}
		}
		require.Equal(t, keys, total)
	}
}
