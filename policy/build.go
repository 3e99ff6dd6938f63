package policy

// The build path: the factories that make a Service's limiters, and
// compile, which turns a book into the snapshot Check reads (at NewService
// and at each Reload).

import (
	"errors"
	"fmt"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/table"
	"github.com/admit-go/admit/sharded"
)

// builder makes the keyed limiters of a Service. It is immutable after
// NewService.
type builder struct {
	svc     *Service       // the Service whose limiters it builds, for their hooks
	factory Factory        // from WithFactory; nil: defaultFactory
	limits  LimitsFactory  // from WithLimitsFactory; nil: defaultLimitsFactory, unless factory is set
	opts    []admit.Option // passed on to the factories: the caller's, less WithFactory and WithLimitsFactory
	target  LimiterFactory // from WithLimiterFactory; nil: factory and limits build the limiters
}

// Factory builds a keyed limiter for a rule: the New function of a variant
// package, such as sharded.New or locked.New, with its result seen as an
// [admit.KeyedLimiter], the form [WithFactory] keeps whatever the type its
// argument returns.
type Factory func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error)

// LimitsFactory builds a keyed limiter for a composite, Limits of two or
// more rules: the NewLimits function of a variant package, such as
// sharded.NewLimits or locked.NewLimits. The limiter it returns must have
// [admit.CompositeStore]'s AllowNWhich, which [Service.CheckNWhich] calls;
// the variants' NewLimits return a CompositeStore. It is the form
// [WithLimitsFactory] keeps, as Factory is [WithFactory]'s.
type LimitsFactory func(admit.Limits, ...admit.Option) (admit.KeyedLimiter, error)

// WithFactory makes [NewService] build the limiters of single rules with f,
// for example WithFactory(locked.New), instead of the default (atomic.New
// for the rules its table takes, sharded.New for the others).
// A book with a composite also needs [WithLimitsFactory], such as
// WithLimitsFactory(locked.NewLimits) beside WithFactory(locked.New):
// without it NewService and Reload refuse the composite rather than build it
// with a variant other than f's. It is an option of NewService only: the
// variants' own constructors build one limiter each and refuse it with an
// error wrapping [admit.ErrUnsupported].
//
// WithFactory is generic over f's result, so that a variant's New, which
// returns an [admit.Store], and a factory of limiters of another kind (a
// Redis store's, an [admit.KeyedLimiter]) are both passed as they are.
func WithFactory[L admit.KeyedLimiter](f func(admit.Rule, ...admit.Option) (L, error)) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithFactory(nil); pass a variant's New, such as sharded.New or locked.New", admit.ErrInvalidOption)
		}
		s.Factory = factoryOf(f)
		return nil
	})
}

// factoryOf returns f as a Factory: its result seen as an
// admit.KeyedLimiter (a nil interface stays nil, which newLimiter refuses).
func factoryOf[L admit.KeyedLimiter](f func(admit.Rule, ...admit.Option) (L, error)) Factory {
	return func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		lim, err := f(r, opts...)
		return lim, err
	}
}

// limitsFactoryOf is factoryOf for a LimitsFactory.
func limitsFactoryOf[L admit.KeyedLimiter](f func(admit.Limits, ...admit.Option) (L, error)) LimitsFactory {
	return func(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
		lim, err := f(l, opts...)
		return lim, err
	}
}

// WithLimitsFactory makes [NewService] build the limiters of composites (the
// entries of two or more rules) with f, for example
// WithLimitsFactory(locked.NewLimits), instead of the default,
// sharded.NewLimits. The entries of one rule are still built by the
// [WithFactory] factory, or the default. It is an option of NewService only:
// the variants' own constructors refuse it with an error wrapping
// [admit.ErrUnsupported]. It is generic over f's result, as [WithFactory]
// is.
func WithLimitsFactory[L admit.KeyedLimiter](f func(admit.Limits, ...admit.Option) (L, error)) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithLimitsFactory(nil); pass a variant's NewLimits, such as sharded.NewLimits or locked.NewLimits", admit.ErrInvalidOption)
		}
		s.LimitsFactory = limitsFactoryOf(f)
		return nil
	})
}

// defaultFactory is the variant a Service uses for rule when no
// [WithFactory] option chooses one. A Service's limiters are keyed by user,
// so it is a keyed store: atomic.New, the lock-free table, for the rules
// whose state packs in its word (table.Packs, the test atomic.New makes),
// and sharded.New for the others, the sliding log and the sliding counters
// that do not pack (docs/design.md, "Which package to import").
func defaultFactory(rule admit.Rule) Factory {
	if table.Packs(rule) {
		return atomicNew
	}
	return shardedNew
}

// atomicNew, shardedNew and shardedNewLimits are the variants'
// constructors as factories, made once.
var (
	atomicNew        = factoryOf(atomic.New)
	shardedNew       = factoryOf(sharded.New)
	shardedNewLimits = limitsFactoryOf(sharded.NewLimits)
)

// defaultLimitsFactory is the variant a Service uses for composites when
// neither [WithLimitsFactory] nor [WithFactory] chooses one: sharded's,
// the map store, which holds every rule's state of a key in one state
// (atomic has no keyed composite).
var defaultLimitsFactory = shardedNewLimits

// whicher is what Service.CheckNWhich calls on a composite's limiter:
// admit.CompositeStore's AllowNWhich.
type whicher interface {
	AllowNWhich(key string, n int) (admit.Decision, int)
}

// newLimiter builds a keyed limiter for l: a one-rule l with the Factory,
// a composite with the LimitsFactory. For a composite it also returns the
// limiter's AllowNWhich.
func (b *builder) newLimiter(l admit.Limits) (admit.KeyedLimiter, whicher, error) {
	if l.Len() == 1 {
		r := l.At(0)
		f := b.factory
		if f == nil {
			f = defaultFactory(r)
		}
		lim, err := f(r, b.opts...)
		if err == nil && lim == nil {
			err = errors.New("the factory returned a nil limiter and no error")
		}
		return lim, nil, err
	}
	f := b.limits
	if f == nil {
		if b.factory != nil {
			return nil, nil, fmt.Errorf("%w: WithFactory builds the limiters of single rules, and this is a composite of %d; pass WithLimitsFactory too, such as WithLimitsFactory(locked.NewLimits) beside WithFactory(locked.New)",
				admit.ErrUnsupported, l.Len())
		}
		f = defaultLimitsFactory
	}
	lim, err := f(l, b.opts...)
	if err != nil {
		return nil, nil, err
	}
	if lim == nil {
		return nil, nil, errors.New("the limits factory returned a nil limiter and no error")
	}
	w, ok := lim.(whicher)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the limits factory's limiter, a %T, has no AllowNWhich(key string, n int) (admit.Decision, int), which Service.CheckNWhich calls; build composites with a variant's NewLimits (sharded.NewLimits, locked.NewLimits), which return an admit.CompositeStore",
			admit.ErrUnsupported, lim)
	}
	return lim, w, nil
}

// compile builds the snapshot of book, reusing the groups of old (nil at
// start-up) whose limits it keeps. It touches no shared state until every
// limiter it needs is built and, for a carry other than CarryNothing, every
// limiter whose pairs change limits can carry their state (canCarry), so a
// failure leaves old as it was.
func (s *Service) compile(book *Book, old *snapshot, carry Carry) (*snapshot, error) {
	if err := book.validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	book = book.clone()
	snap := &snapshot{
		book:   book,
		apis:   make(map[string]*apiLimiter, len(book.apis)),
		users:  make(map[string]*group, len(book.users)),
		groups: map[admit.Limits]*group{},
	}
	fresh := map[*group]bool{} // groups new in this snapshot, whose limits no limiter has proven yet
	// The Carry of the limiters a LimiterFactory builds: the Reload's, and
	// CarryConsumed at start-up (target.go).
	tc := carry
	if old == nil {
		tc = CarryConsumed
	}
	groupFor := func(l admit.Limits) *group {
		if g := snap.groups[l]; g != nil {
			return g
		}
		g := old.group(l)
		if g != nil && s.build.target != nil && g.carry != tc {
			g = nil // built to convert as another Reload said: build anew
		}
		if g == nil {
			g = &group{limits: l, build: &s.build, kern: kernel.NewComposite(l), carry: tc}
			fresh[g] = true
		}
		snap.groups[l] = g
		return g
	}
	type pending struct {
		api string
		a   *apiLimiter
	}
	var built []pending
	for _, e := range book.Rules() {
		g := groupFor(e.Limits)
		switch e.Scope {
		case Default:
			snap.def = g
		case User:
			snap.users[e.Name] = g
		case API:
			if v, ok := g.byAPI.Load(e.Name); ok {
				// The API ran under these limits already (as an API entry,
				// or by default): its users keep their state.
				snap.apis[e.Name] = v.(*apiLimiter)
				continue
			}
			lim, which, err := s.build.limiterFor(g, e.Name, false)
			if err != nil {
				return nil, fmt.Errorf("policy: building the limiter of %s: %w", e, err)
			}
			built = append(built, pending{e.Name, s.newAPILimiter(g, e.Name, lim, which)})
			if fresh[g] {
				g.proto = protocolOf(lim)
				delete(fresh, g)
			}
		}
	}
	// Prove the factory on the limits no API limiter was built for, so that
	// limits it rejects fail now rather than at the first request.
	for _, e := range book.Rules() {
		if g := snap.groups[e.Limits]; fresh[g] {
			lim, _, err := s.build.limiterFor(g, "", true)
			if err != nil {
				return nil, fmt.Errorf("policy: building the limiter of %s: %w", e, err)
			}
			g.proto = protocolOf(lim)
			delete(fresh, g)
		}
	}
	if carry != CarryNothing && s.build.target == nil {
		sealed, err := old.canCarry(snap, carry)
		if err != nil {
			return nil, err
		}
		snap.sealed = sealed
	}
	// Nothing can fail from here on.
	for _, p := range built {
		v, _ := p.a.g.byAPI.LoadOrStore(p.api, p.a)
		snap.apis[p.api] = v.(*apiLimiter)
	}
	if s.obs != nil {
		// The instruments of the API entries, resolved now rather than at
		// their first Check (those of limiters built at first use are
		// resolved then, with the limiter).
		for _, e := range book.Rules() {
			if e.Scope == API {
				snap.apis[e.Name].instrument(API)
			}
		}
	}
	return snap, nil
}

// group returns the snapshot's group for l, or nil; s may be nil.
func (s *snapshot) group(l admit.Limits) *group {
	if s == nil {
		return nil
	}
	return s.groups[l]
}
