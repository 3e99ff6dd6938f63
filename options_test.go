package admit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/plumb"
)

func TestResolveDefaultsToSystemClock(t *testing.T) {
	for name, opts := range map[string][]admit.Option{
		"no options":    nil,
		"empty options": {},
	} {
		s, err := resolve(opts...)
		require.NoErrorf(t, err, "%s: resolve()", name)
		assert.Equalf(t, clock.System(), s.Clock, "%s: resolve().Clock, want clock.System()", name)
	}
}

func TestWithClockIsApplied(t *testing.T) {
	fake := clock.NewFake()
	s, err := resolve(admit.WithClock(fake))
	require.NoError(t, err, "resolve(WithClock(clock.NewFake()))")
	assert.Same(t, fake, s.Clock, "resolve(WithClock(fake)).Clock is the fake itself")

	fake.Advance(3 * time.Second)
	assert.Equal(t, 3*time.Second, s.Clock.Now(), "the settings read the fake the test moves")
}

func TestWithClockLastOneWins(t *testing.T) {
	first, second := clock.NewFake(), clock.NewFake()
	s, err := resolve(admit.WithClock(first), admit.WithClock(second))
	require.NoError(t, err, "resolve(WithClock(first), WithClock(second))")
	assert.Same(t, second, s.Clock, "options apply in order")

	s, err = resolve(admit.WithClock(first), admit.WithClock(clock.System()))
	require.NoError(t, err, "resolve(WithClock(fake), WithClock(clock.System()))")
	assert.Equal(t, clock.System(), s.Clock, "WithClock(clock.System()) restores the default")
}

// stepClock is a Clock that is neither clock.System nor a clock.Fake: WithClock
// accepts any implementation.
type stepClock struct{ now time.Duration }

func (c *stepClock) Now() time.Duration { c.now += time.Millisecond; return c.now }

func TestWithClockAcceptsAnyClock(t *testing.T) {
	c := &stepClock{}
	s, err := resolve(admit.WithClock(c))
	require.NoError(t, err, "resolve(WithClock(&stepClock{}))")
	assert.Same(t, c, s.Clock)
}

func TestResolveRejectsBadOptions(t *testing.T) {
	var nilOption admit.Option
	var nilClock clock.Clock
	var nilFake *clock.Fake
	tests := []struct {
		name string
		opts []admit.Option
		want string // a part of the message
	}{
		{"WithClock(nil)", []admit.Option{admit.WithClock(nil)}, "WithClock(nil)"},
		{"WithClock(nil interface)", []admit.Option{admit.WithClock(nilClock)}, "WithClock(nil)"},
		{"WithClock((*clock.Fake)(nil))", []admit.Option{admit.WithClock(nilFake)}, "WithClock(nil)"},
		{"nil Option", []admit.Option{nil}, "option 0 is nil"},
		{"nil Option variable", []admit.Option{nilOption}, "option 0 is nil"},
		{"nil Option after a good one", []admit.Option{admit.WithClock(clock.NewFake()), nil}, "option 1 is nil"},
		{"WithClock(nil) after a good one", []admit.Option{admit.WithClock(clock.NewFake()), admit.WithClock(nil)}, "WithClock(nil)"},
		{"good one after WithClock(nil)", []admit.Option{admit.WithClock(nil), admit.WithClock(clock.NewFake())}, "WithClock(nil)"},
	}
	for _, tc := range tests {
		var (
			s   plumb.Settings
			err error
		)
		if !assert.NotPanicsf(t, func() { s, err = resolve(tc.opts...) }, "resolve(%s)", tc.name) {
			continue
		}
		if !assert.Errorf(t, err, "resolve(%s) = %+v, want an error", tc.name, s) {
			continue
		}
		assert.Truef(t, errors.Is(err, admit.ErrInvalidOption), "resolve(%s) error %q does not wrap ErrInvalidOption", tc.name, err)
		assert.Falsef(t, errors.Is(err, admit.ErrInvalidRule), "resolve(%s) error %q wraps ErrInvalidRule", tc.name, err)
		assert.Containsf(t, err.Error(), tc.want, "resolve(%s) error", tc.name)
		assert.Equalf(t, plumb.Settings{}, s, "resolve(%s) returned settings with its error", tc.name)
	}
}

func TestWithClockNilSaysWhatIsAccepted(t *testing.T) {
	_, err := resolve(admit.WithClock(nil))
	require.Error(t, err, "resolve(WithClock(nil))")
	assert.Contains(t, err.Error(), "clock.System()", "the error names the clocks to pass instead")
	assert.Contains(t, err.Error(), "clock.NewFake()", "the error names the clocks to pass instead")
}

func TestResolveReturnsAnOptionsError(t *testing.T) {
	errCustom := errors.New("custom option failed")
	failing := plumb.NewOption(func(*plumb.Settings) error { return errCustom })
	called := false
	after := plumb.NewOption(func(*plumb.Settings) error { called = true; return nil })

	s, err := resolve(failing, after)
	assert.Same(t, errCustom, err, "resolve returns the failing option's error as is")
	assert.False(t, called, "options after a failing one are not applied")
	assert.Equal(t, plumb.Settings{}, s)
}

// resolve is how the variant packages resolve options (internal/plumb).
func resolve(opts ...admit.Option) (plumb.Settings, error) { return plumb.Resolve(opts) }
