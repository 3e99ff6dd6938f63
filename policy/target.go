package policy

import (
	"errors"
	"fmt"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/plumb"
)

// Target is what a [LimiterFactory] builds a limiter for: the limits of one
// (limits, API) limiter of a [Service], the API it serves, and how it
// converts a user's state written under other limits.
type Target struct {
	// API is the API whose users the limiter decides for: its key space.
	// Two APIs of equal limits get two limiters, which must keep separate
	// budgets.
	API string
	// Limits are the rules the limiter enforces on every user: one rule,
	// or a composite of two or more, whose limiter must have
	// AllowNWhich(key string, n int) (admit.Decision, int).
	Limits admit.Limits
	// Carry is how the limiter converts a user's state written under other
	// limits, the first time it meets it: the strategy of the Reload in
	// force ([WithCarry]'s, by default CarryConsumed), and
	// CarryConsumed for the limiters a Service builds before any
	// Reload (see [WithLimiterFactory]).
	Carry Carry
	// Proof is true when the Service only checks that the factory accepts
	// Limits, before any API reached them (see WithLimiterFactory): API is
	// then "", and the limiter is discarded unused, so it should register
	// nothing (no observer's series, say).
	Proof bool
}

// LimiterFactory builds the limiter of a [Target] for a [Service] given
// [WithLimiterFactory]: a limiter whose state lives outside the process,
// such as redisstore's, which redisstore.NewService passes.
type LimiterFactory func(Target) (admit.KeyedLimiter, error)

// WithLimiterFactory makes [NewService] build every limiter of the Service
// with f, one-rule entries and composites alike: for limiters whose state
// lives outside the process (in Redis, say), which the Service cannot move
// between limiters and which f must keep apart per API. The Service calls f
// once per (limits, API) limiter it builds: at NewService for the API
// entries of the book, at the first Check of an API otherwise, and at a
// Reload for limits new in the book; and, to prove that f accepts some
// limits before any API reaches them, once with Target.Proof set (and an
// API of "") for each limits no API entry has, whose limiter it discards. Limiters of limits a
// Reload keeps are kept, unless the Reload's [WithCarry] strategy differs
// from the one they were built with: then f builds them again, so that
// every limiter of the Service converts as the Reload in force says.
//
// Target.Carry tells the limiter how to convert a user's state written
// under other limits when it first meets it: the Reload's strategy, and
// CarryConsumed at NewService, so that a process started with a
// changed book converts the states written under the old one as a Reload
// would. A Reload moves no state itself (the limiters hold none in the
// process): each user's state converts on its first Check under the new
// limits, in the limiter, so the Reload returns at once, and its
// WithCarry(c) is the c the limiters of its new limits are built with.
// With CarryNothing a user whose limits change starts afresh. A
// Check that read the book just before a Reload published the new one is
// decided by the limiter of the old limits, which may convert the pair's
// state back to them (and the pair's next Check forward again): unlike the
// Service's own limiters, these are not told that a pair moved.
//
// f must be safe to call from concurrent Checks. A limiter it returns for a
// composite (Target.Limits of two or more rules) must have
// AllowNWhich(key string, n int) (admit.Decision, int), which
// [Service.CheckNWhich] calls; [Service.Reset] needs Reset(key string)
// (as an [admit.Store] has), and returns an error wrapping
// [admit.ErrUnsupported] otherwise.
//
// It is an option of NewService only (the variants' constructors refuse it
// with an error wrapping [admit.ErrUnsupported]), and it replaces
// [WithFactory] and [WithLimitsFactory], which NewService refuses beside it
// with an error wrapping [admit.ErrInvalidOption]. The options of a keyed
// store of this process (admit.WithShards, WithMaxKeys, WithHashedKeys) and
// admit.WithClock are errors beside it, wrapping [admit.ErrUnsupported]:
// f's limiters take their options, and their clock, from f. A nil f is an
// error wrapping [admit.ErrInvalidOption].
func WithLimiterFactory(f LimiterFactory) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithLimiterFactory(nil); pass a func(policy.Target) (admit.KeyedLimiter, error), or leave the option out for the limiters of this process", admit.ErrInvalidOption)
		}
		s.LimiterFactory = f
		return nil
	})
}

// limiterFor builds the limiter of g's limits for api: with the
// LimiterFactory if there is one, else with newLimiter. For a composite it
// also returns the limiter's AllowNWhich.
// A proof's limiter is built only to check the limits, and discarded.
func (b *builder) limiterFor(g *group, api string, proof bool) (admit.KeyedLimiter, whicher, error) {
	if b.target == nil {
		return b.newLimiter(g.limits)
	}
	lim, err := b.target(Target{API: api, Limits: g.limits, Carry: g.carry, Proof: proof})
	if err != nil {
		return nil, nil, err
	}
	if lim == nil {
		return nil, nil, errors.New("the limiter factory returned a nil limiter and no error")
	}
	if g.limits.Len() == 1 {
		return lim, nil, nil
	}
	w, ok := lim.(whicher)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the limiter factory's limiter for a composite, a %T, has no AllowNWhich(key string, n int) (admit.Decision, int), which Service.CheckNWhich calls",
			admit.ErrUnsupported, lim)
	}
	return lim, w, nil
}

// targetOptions checks the options resolved beside a LimiterFactory: no
// other factory, no option of a keyed store of this process, no clock.
func targetOptions(set plumb.Settings, system bool) error {
	switch {
	case set.Factory != nil || set.LimitsFactory != nil:
		return fmt.Errorf("%w: policy: WithLimiterFactory builds every limiter of the Service, and WithFactory or WithLimitsFactory would build them too; pass one or the other", admit.ErrInvalidOption)
	case set.StoreOptions() != "":
		return fmt.Errorf("%w: policy: %s configure a keyed store of this process, and WithLimiterFactory's factory builds the Service's limiters; give their options to the factory", admit.ErrUnsupported, set.StoreOptions())
	case !system:
		return fmt.Errorf("%w: policy: admit.WithClock sets the clock of the limiters a Service builds, and WithLimiterFactory's factory builds them; give the clock to the factory's limiters (redisstore.WithClock, say)", admit.ErrUnsupported)
	}
	return nil
}
