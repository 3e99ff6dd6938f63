package atomic

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// funcClock is a clock whose dynamic type is not comparable: == on two
// interfaces holding it would panic.
type funcClock struct{ f func() time.Duration }

func (c funcClock) Now() time.Duration { return c.f() }

// TestClockRef: the system clock is recognised and read directly; every
// other clock, comparable or not, is called through its interface.
func TestClockRef(t *testing.T) {
	assert.True(t, newClockRef(clock.System()).sys)
	fake := clock.NewFake()
	fake.Set(42)
	r := newClockRef(fake)
	assert.False(t, r.sys)
	assert.Equal(t, time.Duration(42), r.now())
	r = newClockRef(funcClock{func() time.Duration { return 7 }})
	assert.False(t, r.sys)
	assert.Equal(t, time.Duration(7), r.now())
	coarse := new(clock.CoarseClock) // stopped: reads the system clock, through its own Now
	r = newClockRef(coarse)
	assert.False(t, r.sys)
	assert.Same(t, coarse, r.coarse)
	assert.Positive(t, r.now())
}

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
