package clock_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit/clock"
)

func TestFakeStartsAtZero(t *testing.T) {
	assert.Equal(t, time.Duration(0), clock.NewFake().Now())
	var zero clock.Fake
	assert.Equal(t, time.Duration(0), zero.Now(), "zero value reads 0")
}

func TestFakeAdvanceAndSet(t *testing.T) {
	f := clock.NewFake()
	f.Advance(2 * time.Second)
	assert.Equal(t, 2*time.Second, f.Now())
	f.Advance(0)
	assert.Equal(t, 2*time.Second, f.Now(), "Advance(0) does not move the clock")
	f.Set(-time.Nanosecond)
	assert.Equal(t, -time.Nanosecond, f.Now(), "Set may move backwards, below zero")
	f.Set(time.Hour)
	assert.Equal(t, time.Hour, f.Now())
}

func TestFakeAdvancePanicsOnNegative(t *testing.T) {
	f := clock.NewFake()
	assert.PanicsWithValue(t,
		"clock: Fake.Advance(-1ns): negative step; use Set to move the clock backwards",
		func() { f.Advance(-1) })
	assert.Equal(t, time.Duration(0), f.Now(), "a refused step leaves the clock alone")
}

func TestFakeAdvancePanicsOnOverflow(t *testing.T) {
	f := clock.NewFake()
	f.Set(math.MaxInt64 - 1)
	f.Advance(1) // exactly MaxInt64 is fine
	require.Equal(t, time.Duration(math.MaxInt64), f.Now())
	assert.Panics(t, func() { f.Advance(1) })
	assert.Equal(t, time.Duration(math.MaxInt64), f.Now())
}

// TestFakeConcurrentAdvance checks that concurrent Advance calls lose no step.
func TestFakeConcurrentAdvance(t *testing.T) {
	f := clock.NewFake()
	const goroutines, steps = 8, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range steps {
				f.Advance(time.Nanosecond)
				_ = f.Now()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, time.Duration(goroutines*steps), f.Now())
}

func TestSystemIsMonotonic(t *testing.T) {
	c := clock.System()
	prev := c.Now()
	assert.GreaterOrEqual(t, prev, time.Duration(0), "readings start at the origin")
	for range 1000 {
		now := c.Now()
		require.GreaterOrEqual(t, now, prev, "System went backwards")
		prev = now
	}
}
