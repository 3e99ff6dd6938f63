package atomic

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/evict"
)

// TestSlidingCounterSnapshot: a sliding counter whose limit does not pack
// (2^16 and above: a snapshot cell) saves its admissions, single-key and
// keyed, and its keys are evicted once idle, and only then. 2^16-1, the
// largest packed limit, is checked alongside.
func TestSlidingCounterSnapshot(t *testing.T) {
	for _, limit := range []int{1<<16 - 1, 1 << 16, 1 << 20} {
		rule := admit.Rule{Algorithm: admit.SlidingCounter, Limit: limit, Window: time.Second}
		fake := clock.NewFake()
		fake.Set(time.Hour)

		single, err := NewLimiter(rule, admit.WithClock(fake))
		require.NoError(t, err)
		require.True(t, single.AllowN(limit).Allowed, "%v: AllowN(%d) on a fresh limiter", rule, limit)
		assert.False(t, single.Allow().Allowed, "%v: Allow after AllowN(%d)", rule, limit)

		lim, err := New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		store := lim.(admit.Store)
		require.True(t, lim.AllowN("k", limit).Allowed, "%v: AllowN(k, %d) on a new key", rule, limit)
		assert.False(t, lim.Allow("k").Allowed, "%v: Allow(k) after AllowN(k, %d)", rule, limit)
		assert.True(t, lim.Allow("other").Allowed, "%v: another key has its own budget", rule)

		// Both windows must roll out, and the sweep judges at its reading
		// minus the slack: 2s + slack after the admissions, not 1ns sooner.
		fake.Advance(2*rule.Window + evict.Slack - 1)
		assert.Zero(t, store.Sweep(), "%v: a key whose counts have not rolled out is not evicted", rule)
		assert.Equal(t, 2, store.Len())
		fake.Advance(1)
		assert.Equal(t, 2, store.Sweep(), "%v: idle keys are evicted", rule)
		assert.Zero(t, store.Len())
		require.True(t, lim.AllowN("k", limit).Allowed, "%v: AllowN(k, %d) on the evicted key", rule, limit)
		assert.False(t, lim.Allow("k").Allowed, "%v: Allow(k) after AllowN(k, %d) on the evicted key", rule, limit)
	}
}

// TestRacingCreationCountsOneKey replays, deterministically, the race of two
// calls that both find a key missing in a bounded store: both count a key
// (evict.Counter.Reserve) before creating it, the loser finds the winner's
// cell and must give its count back, or the store would deny new keys while
// it holds fewer than its bound. (The conformance check KeyCount races two
// real calls, which meet this interleaving only by chance.)
func TestRacingCreationCountsOneKey(t *testing.T) {
	for _, rule := range []admit.Rule{
		{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Second},
		{Algorithm: admit.TokenBucket, Limit: 3, Window: time.Second}, // a snapshot cell
		{Algorithm: admit.FixedWindow, Limit: 2, Window: time.Second},
		{Algorithm: admit.SlidingCounter, Limit: 2, Window: time.Second},
	} {
		fake := clock.NewFake()
		fake.Set(time.Hour)
		lim, err := New(rule, admit.WithClock(fake), admit.WithMaxKeys(2), admit.WithShards(1))
		require.NoError(t, err)
		store := lim.(admit.Store)
		require.True(t, lim.Allow("k").Allowed) // the winner creates k
		require.True(t, lim.(interface{ loseCreationRace(string) bool }).loseCreationRace("k"),
			"%v: the loser of the race is handed the winner's cell", rule)
		require.Equal(t, 1, store.Len(), "%v: two calls created one key", rule)
		assert.True(t, lim.Allow("other").Allowed, "%v: one key stored of 2, a new key must pass", rule)
		assert.False(t, lim.Allow("third").Allowed, "%v: two busy keys fill the store", rule)
	}
}

// TestRingsSpreadKeys: WithShards(16) spreads 1,000 keys over all 16 sweep
// rings. Each ring's share is binomial (mean 62.5, deviation 7.7), so the
// bounds [20, 125] are more than five deviations away; a store that used
// half its rings, or one, breaks them.
func TestRingsSpreadKeys(t *testing.T) {
	const keys, rings = 1000, 16
	lim, err := New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}, admit.WithClock(clock.NewFake()), admit.WithShards(rings))
	require.NoError(t, err)
	for i := range keys {
		require.True(t, lim.Allow("user-"+strconv.Itoa(i)).Allowed)
	}
	lens := lim.(interface{ ringLens() []int }).ringLens()
	require.Len(t, lens, rings)
	total := 0
	for i, n := range lens {
		total += n
		if n < 20 || n > 125 {
			t.Errorf("ring %d holds %d of %d keys, want 20 to 125 (all: %v)", i, n, keys, lens)
		}
	}
	require.Equal(t, keys, total)
}
