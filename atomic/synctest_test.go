package atomic

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
)

// TestSystemClockInSynctest: a limiter on the system clock, read directly,
// still reads a testing/synctest bubble's fake time.
func TestSystemClockInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, r := range []admit.Rule{
			{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second},
			{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Second},
			{Algorithm: admit.SlidingCounter, Limit: 1, Window: time.Second},
		} {
			lim, err := NewLimiter(r)
			require.NoError(t, err)
			require.True(t, lim.Allow().Allowed, "%v", r)
			d := lim.Allow()
			require.False(t, d.Allowed, "%v", r)
			time.Sleep(2 * time.Second) // the bubble's fake time: no real wait
			assert.True(t, lim.Allow().Allowed, "%v: two seconds later, in the bubble's time", r)
		}
	})
}
