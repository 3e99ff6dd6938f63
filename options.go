package admit

import (
	"fmt"

	"github.com/admit-go/admit/clock"
)

// Option configures a limiter. The same options are accepted by every variant
// (atomic, locked, sharded); a bad option makes the constructor return an error
// wrapping [ErrInvalidOption], never a panic and never a silent default.
type Option func(*Settings) error

// Settings is the resolved form of a list of options. Variant packages call
// [NewSettings] once in their constructors; callers normally never see it.
type Settings struct {
	// Clock is the time source; [clock.System] unless [WithClock] says otherwise.
	Clock clock.Clock

	// Factory builds the keyed limiters of constructors that build limiters
	// for you, such as a policy.Service; nil lets them choose. Variant
	// constructors ignore it. Set it with [WithFactory].
	Factory Factory
}

// Factory builds a keyed limiter for a rule: the New function of a variant
// package, such as locked.New.
type Factory func(Rule, ...Option) (KeyedLimiter, error)

// WithFactory makes constructors that build limiters for you (a policy.Service,
// for one) build them with f, for example WithFactory(locked.New), instead of
// choosing the fastest variant for each rule.
func WithFactory(f Factory) Option {
	return func(s *Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithFactory(nil); pass a variant's New, such as locked.New", ErrInvalidOption)
		}
		s.Factory = f
		return nil
	}
}

// NewSettings applies opts, in order, over the defaults. The defaults live here
// and nowhere else.
func NewSettings(opts ...Option) (Settings, error) {
	s := Settings{Clock: clock.System()}
	for i, opt := range opts {
		if opt == nil {
			return Settings{}, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i)
		}
		if err := opt(&s); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

// WithClock makes the limiter read time from c instead of [clock.System]. Tests
// pass a [clock.Fake] and move it between calls.
func WithClock(c clock.Clock) Option {
	return func(s *Settings) error {
		if f, isFake := c.(*clock.Fake); c == nil || (isFake && f == nil) {
			return fmt.Errorf("%w: WithClock(nil); pass clock.System() or a clock.NewFake()", ErrInvalidOption)
		}
		s.Clock = c
		return nil
	}
}
