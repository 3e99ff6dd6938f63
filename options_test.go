package admit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

func TestNewSettingsDefaultsToSystemClock(t *testing.T) {
	for name, opts := range map[string][]admit.Option{
		"no options":    nil,
		"empty options": {},
	} {
		s, err := admit.NewSettings(opts...)
		require.NoErrorf(t, err, "%s: NewSettings()", name)
		assert.Equalf(t, clock.System(), s.Clock, "%s: NewSettings().Clock, want clock.System()", name)
	}
}

func TestWithClockIsApplied(t *testing.T) {
	fake := clock.NewFake()
	s, err := admit.NewSettings(admit.WithClock(fake))
	require.NoError(t, err, "NewSettings(WithClock(clock.NewFake()))")
	assert.Same(t, fake, s.Clock, "NewSettings(WithClock(fake)).Clock is the fake itself")

	fake.Advance(3 * time.Second)
	assert.Equal(t, 3*time.Second, s.Clock.Now(), "the settings read the fake the test moves")
}

func TestWithClockLastOneWins(t *testing.T) {
	first, second := clock.NewFake(), clock.NewFake()
	s, err := admit.NewSettings(admit.WithClock(first), admit.WithClock(second))
	require.NoError(t, err, "NewSettings(WithClock(first), WithClock(second))")
	assert.Same(t, second, s.Clock, "options apply in order")

	s, err = admit.NewSettings(admit.WithClock(first), admit.WithClock(clock.System()))
	require.NoError(t, err, "NewSettings(WithClock(fake), WithClock(clock.System()))")
	assert.Equal(t, clock.System(), s.Clock, "WithClock(clock.System()) restores the default")
}

// stepClock is a Clock that is neither clock.System nor a clock.Fake: WithClock
// accepts any implementation.
type stepClock struct{ now time.Duration }

func (c *stepClock) Now() time.Duration { c.now += time.Millisecond; return c.now }

func TestWithClockAcceptsAnyClock(t *testing.T) {
	c := &stepClock{}
	s, err := admit.NewSettings(admit.WithClock(c))
	require.NoError(t, err, "NewSettings(WithClock(&stepClock{}))")
	assert.Same(t, c, s.Clock)
}

func TestNewSettingsRejectsBadOptions(t *testing.T) {
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
			s   admit.Settings
			err error
		)
		if !assert.NotPanicsf(t, func() { s, err = admit.NewSettings(tc.opts...) }, "NewSettings(%s)", tc.name) {
			continue
		}
		if !assert.Errorf(t, err, "NewSettings(%s) = %+v, want an error", tc.name, s) {
			continue
		}
		assert.Truef(t, errors.Is(err, admit.ErrInvalidOption), "NewSettings(%s) error %q does not wrap ErrInvalidOption", tc.name, err)
		assert.Falsef(t, errors.Is(err, admit.ErrInvalidRule), "NewSettings(%s) error %q wraps ErrInvalidRule", tc.name, err)
		assert.Containsf(t, err.Error(), tc.want, "NewSettings(%s) error", tc.name)
		assert.Equalf(t, admit.Settings{}, s, "NewSettings(%s) returned settings with its error", tc.name)
	}
}

func TestWithClockNilSaysWhatIsAccepted(t *testing.T) {
	_, err := admit.NewSettings(admit.WithClock(nil))
	require.Error(t, err, "NewSettings(WithClock(nil))")
	assert.Contains(t, err.Error(), "clock.System()", "the error names the clocks to pass instead")
	assert.Contains(t, err.Error(), "clock.NewFake()", "the error names the clocks to pass instead")
}

func TestNewSettingsReturnsAnOptionsError(t *testing.T) {
	errCustom := errors.New("custom option failed")
	failing := admit.Option(func(*admit.Settings) error { return errCustom })
	called := false
	after := admit.Option(func(*admit.Settings) error { called = true; return nil })

	s, err := admit.NewSettings(failing, after)
	assert.Same(t, errCustom, err, "NewSettings returns the failing option's error as is")
	assert.False(t, called, "options after a failing one are not applied")
	assert.Equal(t, admit.Settings{}, s)
}
