package atomic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/keyed"
)

// TestSlidingCounterSnapshot: a sliding counter whose limit does not pack
// (2^16 and above: a snapshot cell) saves its admissions in the single-key
// limiter, and New refuses it, naming sharded.New; 2^16-1, the largest
// packed limit (with a window long enough for its counts), is checked
// alongside, and New's table takes it: its keys are evicted once idle, and
// only then.
func TestSlidingCounterSnapshot(t *testing.T) {
	for _, limit := range []int{1<<16 - 1, 1 << 16, 1 << 20} {
		rule := admit.Rule{Algorithm: admit.SlidingCounter, Limit: limit, Window: time.Hour}
		fake := clock.NewFake()
		fake.Set(time.Hour)

		single, err := NewLimiter(rule, admit.WithClock(fake))
		require.NoError(t, err)
		require.True(t, single.AllowN(limit).Allowed, "%v: AllowN(%d) on a fresh limiter", rule, limit)
		assert.False(t, single.Allow().Allowed, "%v: Allow after AllowN(%d)", rule, limit)

		lim, err := New(rule, admit.WithClock(fake))
		if limit > 1<<16-1 {
			assert.ErrorIs(t, err, admit.ErrUnsupported, "New(%v)", rule)
			assert.ErrorContains(t, err, "sharded.New", "New(%v)", rule)
			continue
		}
		require.NoError(t, err)
		store := lim.(admit.Store)
		require.True(t, lim.AllowN("k", limit).Allowed, "%v: AllowN(k, %d) on a new key", rule, limit)
		assert.False(t, lim.Allow("k").Allowed, "%v: Allow(k) after AllowN(k, %d)", rule, limit)
		assert.True(t, lim.Allow("other").Allowed, "%v: another key has its own budget", rule)

		// Both windows must roll out, and the sweep judges at its reading
		// minus the slack: 2h + slack after the admissions, not 1ns sooner.
		fake.Advance(2*rule.Window + keyed.Slack - 1)
		assert.Zero(t, store.Sweep(), "%v: a key whose counts have not rolled out is not evicted", rule)
		assert.Equal(t, 2, store.Len())
		fake.Advance(1)
		assert.Equal(t, 2, store.Sweep(), "%v: idle keys are evicted", rule)
		assert.Zero(t, store.Len())
		require.True(t, lim.AllowN("k", limit).Allowed, "%v: AllowN(k, %d) on the evicted key", rule, limit)
		assert.False(t, lim.Allow("k").Allowed, "%v: Allow(k) after AllowN(k, %d) on the evicted key", rule, limit)
	}
}
