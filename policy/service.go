package policy

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/observe"
)

// Service applies a [Book] to requests: [Service.Check] admits or denies a
// request from a user to an API under the limits the book gives the pair
// (one rule, or a composite whose rules all apply at once), and keeps one
// independent budget per (user, API) pair. Alice cannot use up Bob's limit;
// a user with a user rule has that rule on every API, with a separate budget
// on each (vip-1 on /login and vip-1 on /orders are two counters); unknown
// APIs get the default rule, each with budgets of its own.
//
// A Service is safe for concurrent use. Check on a pair it has seen before
// allocates nothing and takes no lock shared by all pairs: it reads an atomic
// snapshot and lock-free maps, then the pair's limiter decides. With the
// default factories, a token bucket, a fixed window or a sliding counter
// whose state packs in a word decides by one CompareAndSwap on the pair's
// word in atomic's lock-free table; a sliding log, a wider sliding counter
// and a composite decide under one shard's mutex of sharded's map store.
// [Service.Reload] swaps in a new book atomically while Checks go on;
// [Service.Reset] gives one pair a fresh budget.
//
// # Memory
//
// Budgets are created on first use and kept for the life of the Service (or
// until a Reload drops their limits): one keyed limiter per (limits, API) in
// use, holding one state per user. An API costs one keyed limiter: about 3.9
// KiB with the default table, at GOMAXPROCS=2 (it grows with GOMAXPROCS,
// through its padded shards); a pair costs its user name's copy, its state
// and its share of the keyed limiter: with 12-byte names about 39 bytes for
// a token bucket, a fixed window or a packed sliding counter (a slot of
// atomic's table, the name inline), about 100 bytes plus 8 per unit of
// Limit for a sliding log, and about 115 bytes for a composite of a token
// bucket and a fixed window, whose pair holds both states (measured by
// BenchmarkPairBytes). The limiters drop idle pairs as they go (a pair
// whose state equals a fresh one's, so no decision changes), but a limiter,
// once built for an API, stays. API names come from requests: pass
// the route ("/users/{id}"), not the raw path, or every distinct path that
// reaches Check costs a limiter, and keep names that are not routes away from
// Check. See docs/configuration.md.
type Service struct {
	build builder
	mu    sync.Mutex // serializes Reload; Check never takes it
	cur   atomic.Pointer[snapshot]

	// clock is the clock given with WithClock, or the system clock: the
	// reading at which a Reload converts a moving pair's state.
	clock clock.Clock

	// moveMu is the migration mutex (carry.go): it serializes the moves of
	// keys between limiters, and is taken before any limiter's own mutex.
	moveMu sync.Mutex

	// moving is the Reload whose keys are moving (nil outside a Reload's
	// migration window).
	moving atomic.Pointer[migration]

	// epoch is the Epoch of the last Reload that moved keys. Guarded by mu.
	epoch keyed.Epoch

	// obs is WithObserver's observer, or nil.
	obs observe.Observer
}

// snapshot is a book compiled for Check. It is immutable once published,
// except for the groups' lazily filled maps of limiters, which are safe for
// concurrent use.
type snapshot struct {
	book   *Book                   // a private copy, for Book()
	def    *group                  // the default limits
	apis   map[string]*apiLimiter  // an API entry's limiter for its API, keyed by user (it is also in its group)
	users  map[string]*group       // a user entry's group, keyed by user name
	groups map[admit.Limits]*group // every group above, by limits: what Reload may reuse
	mig    *migration              // the Reload that published the snapshot and moved keys; nil if none did
	sealed []*apiLimiter           // the old limiters canCarry sealed, which open unseals once the snapshot is published
}

// group holds the state of every pair whose limits are limits: one keyed
// limiter per API, keyed by user within it. Pairs are identified by (limits,
// API, user), which is what lets a Reload keep the state of every pair whose
// limits did not change: the new snapshot reuses the group of each Limits it
// shares with the old.
type group struct {
	limits admit.Limits
	build  *builder
	kern   *kernel.Composite // the kernel of limits, for kernel.Convert
	proto  protocol          // what the limiters of limits offer a Reload that moves their keys
	carry  Carry             // Target.Carry of the limiters a LimiterFactory builds (target.go)
	// byAPI maps an API name to its *apiLimiter. Entries are added on first
	// use and never removed; the group lives as long as a snapshot uses its
	// limits.
	byAPI sync.Map
}

// apiLimiter boxes a keyed limiter, so that a value loaded from a sync.Map is
// a concrete pointer (a cheap type assertion, no interface conversion).
type apiLimiter struct {
	lim   admit.KeyedLimiter
	which whicher // lim's AllowNWhich for a composite; nil for one rule
	g     *group  // the group the limiter belongs to, for its limits
	api   string  // the API the limiter serves
	mig   keyed.Mover
	fast  keyed.Mover     // mig when the Service has no observer, else nil: allowN's one test on its common path
	hooks [2]*keyed.Hooks // mig's hooks: Keep and Redirect; with Adopt too (carry.go)
	use   atomic.Uint32   // unused, used or sealed: whether mig may hold a pair (carry.go, mark)

	// obs is the Service's observer, or nil; insts holds the instrument
	// resolved for each scope that has decided through the limiter (nil
	// until then), indexed by Scope. resolving guards resolving an
	// instrument and retired, set once a Reload has dropped the limiter
	// and released its store (release): from then on an instrument is
	// resolved without it, so that the observer is never given the store
	// again.
	obs       observe.Observer
	insts     [User + 1]atomic.Pointer[instrument]
	resolving sync.Mutex
	retired   bool
}

// NewService returns a Service that checks requests against book. It builds
// a limiter for every entry of the book up front, so a rule or an option its
// variant rejects fails here, not at the first request.
//
// The limiters of one-rule entries are built by the factory given with
// [WithFactory], such as WithFactory(locked.New); without one, by
// [atomic.New] for the rules whose state packs in its table's word and by
// [sharded.New] for the others. The limiters of composites are built
// by the factory given with [WithLimitsFactory], such as
// WithLimitsFactory(locked.NewLimits); without one, by [sharded.NewLimits],
// unless WithFactory was given: then a composite in the book is an error
// wrapping [admit.ErrUnsupported] that asks for WithLimitsFactory, rather
// than limiters of two variants. Every other option is passed on to the
// factories: WithClock(fake) makes every limiter read the fake clock.
// [WithLimiterFactory] replaces both factories with one that builds
// limiters whose state lives outside the process (redisstore.NewService
// passes one). A nil book, a book without a default rule (the zero Book),
// an invalid option and a factory error are errors.
func NewService(book *Book, opts ...admit.Option) (*Service, error) {
	if book == nil {
		return nil, errors.New("policy: NewService(nil): want a *Book from Parse, ParseJSON or Load")
	}
	set, err := plumb.Resolve(opts)
	if err != nil {
		return nil, err // already "admit: invalid option: …"
	}
	factory, _ := set.Factory.(Factory)
	limits, _ := set.LimitsFactory.(LimitsFactory)
	obs, _ := set.Observer.(observe.Observer)
	target, _ := set.LimiterFactory.(LimiterFactory)
	if target != nil {
		if err := targetOptions(set, set.Clock == clock.System()); err != nil {
			return nil, err
		}
	}
	passed := opts
	if factory != nil || limits != nil || obs != nil {
		// The factories' limiters get every other option as resolved, and
		// not the factories or the observer, which they would refuse.
		set.Factory, set.LimitsFactory, set.Observer = nil, nil, nil
		passed = []admit.Option{plumb.NewOption(func(s *plumb.Settings) error { *s = set; return nil })}
	}
	s := &Service{clock: set.Clock, obs: obs}
	s.build = builder{svc: s, factory: factory, limits: limits, opts: slices.Clone(passed), target: target}
	snap, err := s.compile(book, nil, CarryNothing)
	if err != nil {
		return nil, err
	}
	s.cur.Store(snap)
	return s, nil
}

// Book returns the book the Service currently applies. It is a copy of the
// one given to NewService or Reload, and must not be modified.
func (s *Service) Book() *Book { return s.cur.Load().book }

// Reload makes the Service apply book from now on, atomically: every Check
// uses either the old book or the new one, never a mix. It builds the
// limiters the new book needs before the swap; if that fails, or book is nil
// or has no default rule, or an option is invalid, or the pairs whose limits
// change cannot carry their state (below), Reload returns the error and the
// old book stays in force, every pair's state as it was.
//
// A pair whose limits are the same in both books (the same rules, each of the
// same Algorithm, Limit and Window, in the same order, wherever the limits
// come from) keeps its state: a reload never hands out a fresh budget (a full
// bucket, an empty window) to a pair whose limits did not change.
//
// A pair whose limits change carries its state into the new limits as
// [WithCarry] says, by default [CarryConsumed]: what the pair has
// consumed stays consumed, all of it, so that after 7 of 10 a limit raised
// to 20 leaves 13, one lowered to 5 leaves none and keeps the 7, and one
// raised back to 10 leaves 3 (a pair is never admitted more than the
// largest limit it was under, on a clock that does not move). Each pair
// moves from its old limiter to its new one, its state converted at a
// reading of the Service's clock (WithClock's, or the system clock); Checks
// go on meanwhile, and a Check racing the move is counted once, under the
// old limits before the move or under the new ones after it. (A pair that
// still has a state under the new limits, kept from before an earlier
// Reload with CarryNothing, resumes that state instead.) The cost: Reload
// visits every user of every (limits, API) limiter that may hold a pair
// whose limits change. Carrying needs, on
// both sides of such a pair, limiters that can hand over and take their
// users' states (docs/configuration.md, "Changing limits", lists them: not
// a factory's of your own, nor a store of hashed keys, which cannot list
// its users, unless no Check has reached it: an API entry's, built with
// the book); otherwise Reload returns an error wrapping
// [admit.ErrUnsupported] that names the pair, and changes nothing:
// WithCarry(CarryNothing) is the way out.
//
// A Service given [WithLimiterFactory] moves no state: its Reload builds
// the limiters of the new limits with the Reload's strategy as
// Target.Carry, and each pair's state converts in its limiter at its first
// Check under the new limits (see WithLimiterFactory); canCarry's refusal
// does not apply.
//
// With WithCarry(CarryNothing) a pair whose limits change continues
// under the new limits with the state it has under them: fresh, unless it
// ran under those same limits before and they stayed in use in between, in
// which case it resumes that earlier state. State kept for limits no longer
// in the book is released. A composite is one set of limits: changing or
// adding one of its rules changes the pair's limits.
//
// Reloads are serialized with each other; Checks go on during a Reload.
func (s *Service) Reload(book *Book, opts ...ReloadOption) error {
	if book == nil {
		return errors.New("policy: Reload(nil): want a *Book from Parse, ParseJSON or Load; the current book stays in force")
	}
	rs := reloadSettings{carry: CarryConsumed}
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: policy: Reload: a nil ReloadOption; pass one from WithCarry", admit.ErrInvalidOption)
		}
		if err := o.applyReload(&rs); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	snap, err := s.compile(book, old, rs.carry)
	if err != nil {
		return err
	}
	if rs.carry == CarryNothing || s.build.target != nil {
		// Nothing to move: the limiters of a LimiterFactory convert each
		// user's state on its first touch (target.go).
		s.cur.Store(snap)
	} else {
		s.carry(old, snap, rs.carry)
	}
	s.release(old, snap)
	return nil
}
