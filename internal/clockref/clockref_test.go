package clockref

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/admit-go/admit/clock"
)

// funcClock is a clock whose dynamic type is not comparable: == on two
// interfaces holding it would panic.
type funcClock struct{ f func() time.Duration }

func (c funcClock) Now() time.Duration { return c.f() }

// TestClockRef: the system clock is recognised and read directly; every
// other clock, comparable or not, is called through its interface.
func TestClockRef(t *testing.T) {
	assert.True(t, New(clock.System()).Sys)
	fake := clock.NewFake()
	fake.Set(42)
	r := New(fake)
	assert.False(t, r.Sys)
	assert.Equal(t, time.Duration(42), r.Now())
	r = New(funcClock{func() time.Duration { return 7 }})
	assert.False(t, r.Sys)
	assert.Equal(t, time.Duration(7), r.Now())
	coarse := new(clock.CoarseClock) // stopped: reads the system clock, through its own Now
	r = New(coarse)
	assert.False(t, r.Sys)
	assert.Same(t, coarse, r.Coarse)
	assert.Positive(t, r.Now())
}
