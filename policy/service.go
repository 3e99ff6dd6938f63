package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/sharded"
)

// Service applies a [Book] to requests: [Service.Check] admits or denies a
// request from a user to an API under the rule the book gives the pair, and
// keeps one independent budget per (user, API) pair. Alice cannot use up
// Bob's limit; a user with a user rule has that rule on every API, with a
// separate budget on each (vip-1 on /login and vip-1 on /orders are two
// counters); unknown APIs get the default rule, each with budgets of its own.
//
// A Service is safe for concurrent use. Check on a pair it has seen before
// allocates nothing and takes no lock shared by all pairs: it reads an atomic
// snapshot and lock-free maps, then the pair's limiter decides (under one
// shard's mutex with the default, sharded). [Service.Reload] swaps in a new
// book atomically while Checks go on; [Service.Reset] gives one pair a fresh
// budget.
//
// # Memory
//
// Budgets are created on first use and kept for the life of the Service (or
// until a Reload drops their rule): one keyed limiter per (rule, API) in use,
// holding one state per user. An API costs one keyed limiter: about 3.9 KiB
// with the default, sharded, at GOMAXPROCS=2 (it grows with GOMAXPROCS,
// through its padded shards); a pair costs its user name's copy, its state
// and its share of the keyed limiter: with 12-byte names about 51 bytes for a
// token bucket, 68 for a fixed window, 79 for a sliding counter, and about
// 100 bytes plus 8 per unit of Limit for a sliding log (measured by
// BenchmarkPairBytes). The limiters drop idle pairs as they go (a pair whose
// state equals a fresh one's, so no decision changes), but a limiter, once
// built for an API, stays. API names come from requests: pass
// the route ("/users/{id}"), not the raw path, or every distinct path that
// reaches Check costs a limiter, and keep names that are not routes away from
// Check. See docs/configuration.md.
type Service struct {
	build builder
	mu    sync.Mutex // serializes Reload; Check never takes it
	cur   atomic.Pointer[snapshot]
}

// builder makes the keyed limiters of a Service. It is immutable after
// NewService.
type builder struct {
	factory Factory        // from WithFactory; nil: defaultFactory
	opts    []admit.Option // passed on to the factory: the caller's, less WithFactory
}

// Factory builds a keyed limiter for a rule: the New function of a variant
// package, such as sharded.New or locked.New.
type Factory func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error)

// WithFactory makes [NewService] build its limiters with f, for example
// WithFactory(locked.New), instead of the default, sharded.New. It is an
// option of NewService only: the variants' own constructors build one
// limiter each and refuse it with an error wrapping [admit.ErrUnsupported].
func WithFactory(f Factory) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithFactory(nil); pass a variant's New, such as sharded.New or locked.New", admit.ErrInvalidOption)
		}
		s.Factory = f
		return nil
	}).(admit.Option)
}

// defaultFactory is the variant a Service uses when no [WithFactory] option
// chooses one: sharded.New, the keyed store for many keys (a Service keeps
// one budget per user of each API), for every algorithm. It holds states
// inline, so a Check allocates nothing for any rule, and it has the fewest
// bytes per key (docs/design.md, "Which package to import").
func defaultFactory(admit.Algorithm) Factory { return sharded.New }

// newLimiter builds a keyed limiter for r.
func (b *builder) newLimiter(r admit.Rule) (admit.KeyedLimiter, error) {
	f := b.factory
	if f == nil {
		f = defaultFactory(r.Algorithm)
	}
	lim, err := f(r, b.opts...)
	if err == nil && lim == nil {
		err = errors.New("the factory returned a nil limiter and no error")
	}
	return lim, err
}

// snapshot is a book compiled for Check. It is immutable once published,
// except for the groups' lazily filled maps of limiters, which are safe for
// concurrent use.
type snapshot struct {
	book   *Book                         // a private copy, for Book()
	def    *group                        // the default rule
	apis   map[string]admit.KeyedLimiter // an API rule's limiter for its API, keyed by user (it is also in its group)
	users  map[string]*group             // a user rule's group, keyed by user name
	groups map[admit.Rule]*group         // every group above, by rule: what Reload may reuse
}

// group holds the state of every pair whose rule is rule: one keyed limiter
// per API, keyed by user within it. Pairs are identified by (rule, API, user),
// which is what lets a Reload keep the state of every pair whose rule did not
// change: the new snapshot reuses the group of each rule it shares with the old.
type group struct {
	rule  admit.Rule
	build *builder
	// byAPI maps an API name to its *apiLimiter. Entries are added on first
	// use and never removed; the group lives as long as a snapshot uses its rule.
	byAPI sync.Map
}

// apiLimiter boxes a keyed limiter, so that a value loaded from a sync.Map is
// a concrete pointer (a cheap type assertion, no interface conversion).
type apiLimiter struct{ lim admit.KeyedLimiter }

// limiter returns the group's limiter for api, building it on first use. Two
// callers racing to build it agree on one: LoadOrStore keeps the first stored,
// and a limiter is used only once stored, so no pair ever starts twice.
func (g *group) limiter(api string) (admit.KeyedLimiter, error) {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).lim, nil
	}
	lim, err := g.build.newLimiter(g.rule)
	if err != nil {
		return nil, err
	}
	// Our own copy of the name: the caller may reuse the memory behind api.
	v, _ := g.byAPI.LoadOrStore(strings.Clone(api), &apiLimiter{lim})
	return v.(*apiLimiter).lim, nil
}

// allowN is the hot path for a pair of the group: a lookup and the limiter's
// AllowN, without allocating once the API's limiter exists.
func (g *group) allowN(api, user string, n int) admit.Decision {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).lim.AllowN(user, n)
	}
	return g.allowNSlow(api, user, n)
}

// allowNSlow builds the API's limiter, outlined so that allowN stays small.
func (g *group) allowNSlow(api, user string, n int) admit.Decision {
	lim, err := g.limiter(api)
	if err != nil {
		// The factory built this rule's limiters at start-up and fails now:
		// fail closed, and try again on the next request.
		return admit.Decision{Limit: g.rule.Limit, RetryAfter: g.rule.Window}
	}
	return lim.AllowN(user, n)
}

// NewService returns a Service that checks requests against book. It builds
// a limiter for every rule of the book up front, so a rule or an option its
// variant rejects fails here, not at the first request.
//
// The limiters are built by the factory given with [WithFactory], such as
// WithFactory(locked.New); without one, by [sharded.New], for every
// algorithm. Every other option is passed on to the factory: WithClock(fake)
// makes every limiter read the fake clock. A nil book, a book without a
// default rule (the zero Book), an invalid option and a factory error are
// errors.
func NewService(book *Book, opts ...admit.Option) (*Service, error) {
	if book == nil {
		return nil, errors.New("policy: NewService(nil): want a *Book from Parse, ParseJSON or Load")
	}
	set, err := plumb.Resolve(opts)
	if err != nil {
		return nil, err // already "admit: invalid option: …"
	}
	factory, _ := set.Factory.(Factory)
	passed := opts
	if factory != nil {
		// The factory's limiters get every other option as resolved, and
		// not the factory, which they would refuse.
		set.Factory = nil
		passed = []admit.Option{plumb.NewOption(func(s *plumb.Settings) error { *s = set; return nil }).(admit.Option)}
	}
	s := &Service{build: builder{factory: factory, opts: slices.Clone(passed)}}
	snap, err := s.compile(book, nil)
	if err != nil {
		return nil, err
	}
	s.cur.Store(snap)
	return s, nil
}

// Check is CheckN(user, api, 1): it asks to admit one request from user to
// api.
func (s *Service) Check(user, api string) admit.Decision { return s.CheckN(user, api, 1) }

// CheckN asks to admit n requests at once from user to api, all or nothing,
// under the rule the current book gives the pair (see [Book.RuleFor]), with
// the semantics of [admit.KeyedLimiter.AllowN]; the Decision's Limit is that
// rule's Limit. Each call uses exactly one book, even when it races a Reload.
//
// On a pair seen before, CheckN makes no allocation. The first request of a
// pair stores a copy of its names; the first request to an API under a rule
// builds that (rule, API)'s limiter. Should the factory fail then, although it
// built the same rule's limiters at start-up (no variant of admit does), the
// request is denied with RetryAfter equal to the rule's Window, and the next
// request tries again.
func (s *Service) CheckN(user, api string, n int) admit.Decision {
	snap := s.cur.Load()
	if g := snap.users[user]; g != nil {
		return g.allowN(api, user, n)
	}
	if lim := snap.apis[api]; lim != nil {
		return lim.AllowN(user, n)
	}
	return snap.def.allowN(api, user, n)
}

// Reset forgets the state of the pair (user, api) under the rule the
// current book gives it (see [Book.RuleFor]), as [admit.Resetter] does for a
// key: the pair's next Check sees a fresh budget at its own reading, a
// Check of the pair concurrent with Reset is ordered before or after it,
// never lost or counted twice, and every other pair's budget is untouched,
// another API's for the same user included. It uses exactly one book, even
// when it races a Reload; state the pair keeps under another rule (one a
// Reload may return to) is not reset.
//
// A pair whose (rule, API) limiter was never built has nothing to reset,
// and Reset returns nil. If that limiter has no Reset (one built by a
// [WithFactory] factory of your own), Reset returns an error wrapping
// [admit.ErrUnsupported] and resets nothing. Reset builds nothing, and it
// takes no lock shared by all pairs.
func (s *Service) Reset(user, api string) error {
	snap := s.cur.Load()
	var lim admit.KeyedLimiter
	if g := snap.users[user]; g != nil {
		lim = g.built(api)
	} else if l := snap.apis[api]; l != nil {
		lim = l
	} else {
		lim = snap.def.built(api)
	}
	if lim == nil {
		return nil // never checked under this rule: fresh
	}
	r, ok := lim.(admit.Resetter)
	if !ok {
		return fmt.Errorf("%w: policy: Service.Reset(%q, %q): the factory's limiter, a %T, has no Reset(key string); build limiters with a variant's New (sharded.New, locked.New, atomic.New), whose stores all have it",
			admit.ErrUnsupported, user, api, lim)
	}
	r.Reset(user)
	return nil
}

// built returns the group's limiter for api, or nil if none was built.
func (g *group) built(api string) admit.KeyedLimiter {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).lim
	}
	return nil
}

// Book returns the book the Service currently applies. It is a copy of the
// one given to NewService or Reload, and must not be modified.
func (s *Service) Book() *Book { return s.cur.Load().book }

// Reload makes the Service apply book from now on, atomically: every Check
// uses either the old book or the new one, never a mix. It builds the
// limiters the new book needs before the swap; if that fails, or book is nil
// or has no default rule, Reload returns the error and the old book stays in
// force.
//
// A pair whose rule is the same in both books (the same Algorithm, Limit and
// Window, wherever the rule comes from) keeps its state: a reload never hands
// out a fresh budget (a full bucket, an empty window) to a pair whose rule did
// not change. A pair whose rule changed continues under the new rule with the
// state it has under that rule: fresh, unless it ran under that same rule
// before and the rule stayed in use in between, in which case it resumes
// that earlier state. State kept for rules no longer in the book is released.
//
// Reloads are serialized with each other; Checks go on during a Reload.
func (s *Service) Reload(book *Book) error {
	if book == nil {
		return errors.New("policy: Reload(nil): want a *Book from Parse, ParseJSON or Load; the current book stays in force")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.compile(book, s.cur.Load())
	if err != nil {
		return err
	}
	s.cur.Store(snap)
	return nil
}

// compile builds the snapshot of book, reusing the groups of old (nil at
// start-up) whose rule it keeps. It touches no shared state until every
// limiter it needs is built, so a failure leaves old as it was.
func (s *Service) compile(book *Book, old *snapshot) (*snapshot, error) {
	if err := book.validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	book = book.clone()
	snap := &snapshot{
		book:   book,
		apis:   make(map[string]admit.KeyedLimiter, len(book.apis)),
		users:  make(map[string]*group, len(book.users)),
		groups: map[admit.Rule]*group{},
	}
	fresh := map[*group]bool{} // groups new in this snapshot, whose rule no limiter has proven yet
	groupFor := func(r admit.Rule) *group {
		if g := snap.groups[r]; g != nil {
			return g
		}
		g := old.group(r)
		if g == nil {
			g = &group{rule: r, build: &s.build}
			fresh[g] = true
		}
		snap.groups[r] = g
		return g
	}
	type pending struct {
		g   *group
		api string
		lim admit.KeyedLimiter
	}
	var built []pending
	for _, e := range book.Rules() {
		g := groupFor(e.Rule)
		switch e.Scope {
		case Default:
			snap.def = g
		case User:
			snap.users[e.Name] = g
		case API:
			if v, ok := g.byAPI.Load(e.Name); ok {
				// The API ran under this rule already (as an API rule, or by
				// default): its users keep their state.
				snap.apis[e.Name] = v.(*apiLimiter).lim
				continue
			}
			lim, err := s.build.newLimiter(e.Rule)
			if err != nil {
				return nil, fmt.Errorf("policy: building the limiter of %s: %w", e, err)
			}
			built = append(built, pending{g, e.Name, lim})
			delete(fresh, g)
		}
	}
	// Prove the factory on the rules no API limiter was built for, so that a
	// rule it rejects fails now rather than at the first request.
	for _, e := range book.Rules() {
		if g := snap.groups[e.Rule]; fresh[g] {
			if _, err := s.build.newLimiter(g.rule); err != nil {
				return nil, fmt.Errorf("policy: building the limiter of %s: %w", e, err)
			}
			delete(fresh, g)
		}
	}
	// Nothing can fail from here on.
	for _, p := range built {
		v, _ := p.g.byAPI.LoadOrStore(p.api, &apiLimiter{p.lim})
		snap.apis[p.api] = v.(*apiLimiter).lim
	}
	return snap, nil
}

// group returns the snapshot's group for r, or nil; s may be nil.
func (s *snapshot) group(r admit.Rule) *group {
	if s == nil {
		return nil
	}
	return s.groups[r]
}
