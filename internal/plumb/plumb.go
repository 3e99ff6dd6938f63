// Package plumb is what package admit shares with its variant packages and
// no one else: the resolved form of the options, and the making of
// reservations. Users never see it; package admit keeps [admit.Option] and
// [admit.Reservation] opaque and lends their insides here, at init.
package plumb

import (
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
	// Observer is policy.WithObserver's, an admit.Observer; nil for none.
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

// Hooks that package admit sets in its init, so that this package needs no
// import of it (which would be a cycle). They are never nil once any
// package of admit's is loaded, since every importer of plumb imports admit.
var (
	// Apply applies the admit.Option o, the i-th of a list, to s.
	Apply func(i int, o any, s *Settings) error
	// NewOption returns an admit.Option that applies f.
	NewOption func(f func(*Settings) error) any
	// NewReservation is a func(delay time.Duration, n int, ticket uint64)
	// admit.Reservation: a reservation of n tokens due after delay,
	// cancellable with ticket (0: it cannot be cancelled).
	NewReservation any
	// Ticket is a func(admit.Reservation) uint64: a reservation's ticket.
	Ticket any
)

// Resolve applies opts, in order, over the defaults: the system clock, the
// default number of shards (recorded as 0), no bound on the keys, full keys,
// no factory. O is admit.Option; the variant packages call it with their
// opts as they are.
func Resolve[O any](opts []O) (Settings, error) {
	s := Settings{Clock: clock.System()}
	for i, o := range opts {
		if err := Apply(i, o, &s); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

// ErrUnsupported is admit.ErrUnsupported, set by package admit.
var ErrUnsupported error

// ResolveLimiter is Resolve for the constructors of package pkg (a variant):
// policy.WithFactory, policy.WithLimitsFactory, policy.WithLimiterFactory
// and policy.WithObserver, which only policy.NewService reads, are errors
// there, never silently ignored.
func ResolveLimiter[O any](pkg string, opts []O) (Settings, error) {
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
