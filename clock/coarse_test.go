package clock

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package if a coarse clock's goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The coarse clock's goroutine and ticker run inside a synctest bubble, where
// time is fake and advances only when every goroutine in the bubble is blocked:
// the tests are exact and take no real time.

func TestCoarseTicksAtResolution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		src := func() time.Duration { return time.Since(start) }
		c, err := newCoarse(src, time.Millisecond)
		require.NoError(t, err)
		defer c.Stop()
		assert.Equal(t, time.Duration(0), c.Now())

		time.Sleep(999 * time.Microsecond) // the bubble's fake time: no real wait
		synctest.Wait()
		assert.Equal(t, time.Duration(0), c.Now(), "no tick yet: the reading lags")

		time.Sleep(time.Microsecond)
		synctest.Wait()
		assert.Equal(t, time.Millisecond, c.Now(), "one tick")

		time.Sleep(5*time.Millisecond + 500*time.Microsecond)
		synctest.Wait()
		assert.Equal(t, 6*time.Millisecond, c.Now(), "readings move in steps of the resolution")
	})
}

func TestCoarseStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c, err := newCoarse(func() time.Duration { return time.Since(start) }, time.Millisecond)
		require.NoError(t, err)
		time.Sleep(3 * time.Millisecond)
		synctest.Wait()
		c.Stop()
		c.Stop() // idempotent
		time.Sleep(1500 * time.Microsecond)
		assert.Equal(t, 4500*time.Microsecond, c.Now(), "after Stop, Now reads the source directly")
		// synctest.Test fails if the clock's goroutine is still running here.
	})
}

func TestCoarseRejectsBadResolution(t *testing.T) {
	for _, r := range []time.Duration{0, -time.Millisecond} {
		c, err := Coarse(r)
		assert.Nil(t, c)
		assert.ErrorContains(t, err, "resolution must be positive", "Coarse(%v)", r)
	}
}

func TestCoarseSystem(t *testing.T) {
	c, err := Coarse(time.Millisecond)
	require.NoError(t, err)
	defer c.Stop()
	first := c.Now()
	assert.GreaterOrEqual(t, first, time.Duration(0))
	assert.LessOrEqual(t, first, System().Now(), "a coarse reading never runs ahead of the system clock")
}

// TestCoarseZeroValue: a zero CoarseClock is a stopped one. It reads the
// system clock directly, starts no goroutine, and Stop does nothing.
func TestCoarseZeroValue(t *testing.T) {
	var c CoarseClock
	for i := range 2 {
		before := System().Now()
		got := c.Now()
		after := System().Now()
		assert.True(t, before <= got && got <= after, "step %d: zero CoarseClock.Now() = %v, want a System reading between %v and %v", i, got, before, after)
		assert.NotPanics(t, c.Stop, "step %d: Stop of a zero CoarseClock", i)
	}
	// Stop from many goroutines at once, as on a clock that runs, inside a
	// bubble: a Stop that waited for a goroutine that never started would be
	// reported as a deadlock rather than hang.
	var z CoarseClock
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(z.Stop)
		}
		wg.Wait()
	})
	before := System().Now()
	assert.LessOrEqual(t, before, z.Now(), "after Stop, the zero CoarseClock still reads System")
}
