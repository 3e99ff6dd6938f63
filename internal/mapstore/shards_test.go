package mapstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/plumb"
)

// TestShardsSpreadKeys: 16 shards hold 1,000 keys between them all, with
// full and with hashed keys, for a token bucket (packed states) and a
// sliding log (a ring per key). Each shard's share is binomial (mean 62.5,
// deviation 7.7), so the bounds [20, 125] are more than five deviations
// away; a store that used half its shards, or one, breaks them.
func TestShardsSpreadKeys(t *testing.T) {
	const keys, shards = 1000, 16
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.SlidingLog} {
		for _, hashed := range []bool{false, true} {
			set := plumb.Settings{Clock: clock.NewFake(), Shards: shards, HashedKeys: hashed}
			lim := New(admit.Rule{Algorithm: alg, Limit: 1, Window: time.Second}, set)
			for i := range keys {
				require.True(t, lim.Allow("user-"+strconv.Itoa(i)).Allowed)
			}
			lens := lim.(interface{ shardLens() []int }).shardLens()
			require.Len(t, lens, shards)
			total := 0
			for i, n := range lens {
				total += n
				if n < 20 || n > 125 {
					t.Errorf("%v, hashed keys %v: shard %d holds %d of %d keys, want 20 to 125 (all: %v)", alg, hashed, i, n, keys, lens)
				}
			}
			require.Equal(t, keys, total)
		}
	}
}

// shardLens returns how many keys each shard holds.
func (l *store[KT, S]) shardLens() []int {
	lens := make([]int, len(l.shards))
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		lens[i] = len(sh.m)
		sh.mu.Unlock()
	}
	return lens
}
