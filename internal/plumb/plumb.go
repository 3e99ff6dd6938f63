// Package plumb is what package admit shares with its variant packages and
// no one else: the definition of admit.Option (the root package names it by
// an alias of [Option]) and the resolved form of a list of options. Users
// can pass an Option but not implement one: its method is unexported here.
package plumb

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/admit-go/admit/clock"
)

// MaxShards is the largest number of shards admit.WithShards accepts.
const MaxShards = 1 << 16

// Settings is the resolved form of a list of options: the defaults here,
// overridden by each option in turn.
type Settings struct {
	// Clock is the time source; clock.System unless WithClock says otherwise.
	Clock clock.Clock
	// Shards is the number of parts of a keyed store (a power of two in
	// [1, MaxShards]), or 0 for DefaultShards.
	Shards int
	// MaxKeys bounds how many keys a keyed store holds; 0 for no bound.
	MaxKeys int
	// HashedKeys makes a keyed store keep seeded hashes instead of keys.
	HashedKeys bool
	// Factory is policy.WithFactory's, a policy.Factory; nil for none. Only
	// policy.NewService reads it; every other constructor refuses it.
	Factory any
	// LimitsFactory is policy.WithLimitsFactory's, a policy.LimitsFactory;
	// nil for none. Like Factory, only policy.NewService reads it.
	LimitsFactory any
	// Observer is policy.WithObserver's, an observe.Observer; nil for none.
	// Like Factory, only policy.NewService reads it.
	Observer any
	// LimiterFactory is policy.WithLimiterFactory's, a
	// policy.LimiterFactory; nil for none. Like Factory, only
	// policy.NewService reads it.
	LimiterFactory any
}

// DefaultShards is four shards per processor (runtime.GOMAXPROCS at the time
// of the call), rounded up to a power of two, at least 16 and at most
// MaxShards.
func DefaultShards() int {
	n := 16
	for n < 4*runtime.GOMAXPROCS(0) && n < MaxShards {
		n <<= 1
	}
	return n
}

// ShardCount returns the number of shards the settings ask for: Shards, or
// DefaultShards when Shards is 0.
func (s Settings) ShardCount() int {
	if s.Shards == 0 {
		return DefaultShards()
	}
	return s.Shards
}

// StoreOptions returns the names of the keyed-store options that are set
// ("WithShards, WithMaxKeys", for instance), or "" when none is.
func (s Settings) StoreOptions() string {
	var names []string
	if s.Shards != 0 {
		names = append(names, "WithShards")
	}
	if s.MaxKeys != 0 {
		names = append(names, "WithMaxKeys")
	}
	if s.HashedKeys {
		names = append(names, "WithHashedKeys")
	}
	return strings.Join(names, ", ")
}

// Option is admit.Option; its documentation is there.
type Option interface {
	apply(*Settings) error
}

// option is an Option that runs f.
type option func(*Settings) error

func (f option) apply(s *Settings) error { return f(s) }

// NewOption returns an Option that applies f.
func NewOption(f func(*Settings) error) Option { return option(f) }

// Resolve applies opts, in order, over the defaults: the system clock, the
// default number of shards (recorded as 0), no bound on the keys, full keys,
// no factory. A nil option is an error wrapping ErrInvalidOption.
func Resolve(opts []Option) (Settings, error) {
	s := Settings{Clock: clock.System()}
	for i, o := range opts {
		if o == nil {
			return Settings{}, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i)
		}
		if err := o.apply(&s); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

// The errors of options, which package admit exports as its own.
var (
	// ErrUnsupported is admit.ErrUnsupported.
	ErrUnsupported = errors.New("admit: unsupported")
	// ErrInvalidOption is admit.ErrInvalidOption.
	ErrInvalidOption = errors.New("admit: invalid option")
)

// ResolveLimiter is Resolve for the constructors of package pkg (a variant):
// policy.WithFactory, policy.WithLimitsFactory, policy.WithLimiterFactory
// and policy.WithObserver, which only policy.NewService reads, are errors
// there, never silently ignored.
func ResolveLimiter(pkg string, opts []Option) (Settings, error) {
	s, err := Resolve(opts)
	switch {
	case err != nil:
	case s.Factory != nil:
		err = fmt.Errorf("%w: policy.WithFactory chooses the variant of a policy.Service's limiters; pass it to policy.NewService, not to %s's constructors", ErrUnsupported, pkg)
	case s.LimitsFactory != nil:
		err = fmt.Errorf("%w: policy.WithLimitsFactory chooses the variant of a policy.Service's composite limiters; pass it to policy.NewService, not to %s's constructors", ErrUnsupported, pkg)
	case s.LimiterFactory != nil:
		err = fmt.Errorf("%w: policy.WithLimiterFactory builds a policy.Service's limiters; pass it to policy.NewService, not to %s's constructors", ErrUnsupported, pkg)
	case s.Observer != nil:
		err = fmt.Errorf("%w: policy.WithObserver observes a policy.Service's decisions; pass it to policy.NewService, not to %s's constructors (a store reports its statistics through its Stats method)", ErrUnsupported, pkg)
	}
	return s, err
}
