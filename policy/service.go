package policy

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/migrate"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/sharded"
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
// default, sharded, a token bucket, a fixed window or a sliding counter
// whose state packs in a word decides by one CompareAndSwap on the pair's
// word in a lock-free table; a sliding log, a wider sliding counter and a
// composite decide under one shard's mutex. [Service.Reload] swaps in a new
// book atomically while Checks go on; [Service.Reset] gives one pair a fresh
// budget.
//
// # Memory
//
// Budgets are created on first use and kept for the life of the Service (or
// until a Reload drops their limits): one keyed limiter per (limits, API) in
// use, holding one state per user. An API costs one keyed limiter: about 3.9
// KiB with the default, sharded, at GOMAXPROCS=2 (it grows with GOMAXPROCS,
// through its padded shards); a pair costs its user name's copy, its state
// and its share of the keyed limiter: with 12-byte names about 39 bytes for
// a token bucket, a fixed window or a packed sliding counter (a slot of
// sharded's table, the name inline), about 100 bytes plus 8 per unit of
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
	epoch migrate.Epoch

	// obs is WithObserver's observer, or nil.
	obs admit.Observer
}

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
// package, such as sharded.New or locked.New.
type Factory func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error)

// LimitsFactory builds a keyed limiter for a composite, Limits of two or
// more rules: the NewLimits function of a variant package, such as
// sharded.NewLimits or locked.NewLimits. The limiter it returns must have
// [admit.CompositeStore]'s AllowNWhich, which [Service.CheckNWhich] calls;
// the variants' NewLimits return a CompositeStore for two or more rules.
type LimitsFactory func(admit.Limits, ...admit.Option) (admit.KeyedLimiter, error)

// WithFactory makes [NewService] build the limiters of single rules with f,
// for example WithFactory(locked.New), instead of the default, sharded.New.
// A book with a composite also needs [WithLimitsFactory], such as
// WithLimitsFactory(locked.NewLimits) beside WithFactory(locked.New):
// without it NewService and Reload refuse the composite rather than build it
// with a variant other than f's. It is an option of NewService only: the
// variants' own constructors build one limiter each and refuse it with an
// error wrapping [admit.ErrUnsupported].
func WithFactory(f Factory) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithFactory(nil); pass a variant's New, such as sharded.New or locked.New", admit.ErrInvalidOption)
		}
		s.Factory = f
		return nil
	}).(admit.Option)
}

// WithLimitsFactory makes [NewService] build the limiters of composites (the
// entries of two or more rules) with f, for example
// WithLimitsFactory(locked.NewLimits), instead of the default,
// sharded.NewLimits. The entries of one rule are still built by the
// [WithFactory] factory, or sharded.New. It is an option of NewService only:
// the variants' own constructors refuse it with an error wrapping
// [admit.ErrUnsupported].
func WithLimitsFactory(f LimitsFactory) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithLimitsFactory(nil); pass a variant's NewLimits, such as sharded.NewLimits or locked.NewLimits", admit.ErrInvalidOption)
		}
		s.LimitsFactory = f
		return nil
	}).(admit.Option)
}

// WithObserver makes [NewService] report the Service's decisions to o: for
// each (limits, API) limiter and each scope of entry that decides through
// it, o.Instrument is called once, with Labels{Source: "policy", Name: the
// API, Scope: "default", "api" or "user", Limits: the limits, Store: the
// limiter when it reports [admit.StoreStats]}, and every Check observes
// Admitted or Denied on that instrument (with its latency when the
// instrument is Timed). A Reload resolves the instruments of the limiters
// it builds; limiters it keeps keep theirs. No user name ever reaches o.
//
// Without an observer a Check pays one nil check for it; with one, no
// allocation and no map lookup: the instrument is held by the (limits, API)
// limiter, resolved when the limiter is built for its first scope and when
// another scope first decides through it. The series o sees are bounded by
// the limiters built times three scopes: the APIs that reached Check (pass
// routes, not raw paths; see [Service]) times the limits of the book. It is
// an option of NewService only: the variants' constructors refuse it with
// an error wrapping [admit.ErrUnsupported].
func WithObserver(o admit.Observer) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if o == nil {
			return fmt.Errorf("%w: WithObserver(nil); pass an admit.Observer, such as a *tally.Tally", admit.ErrInvalidOption)
		}
		s.Observer = o
		return nil
	}).(admit.Option)
}

// defaultFactory is the variant a Service uses when no [WithFactory] option
// chooses one: sharded.New, the keyed store for many keys (a Service keeps
// one budget per user of each API), for every algorithm. It holds states
// inline, so a Check allocates nothing for any rule, and it has the fewest
// bytes per key (docs/design.md, "Which package to import").
func defaultFactory(admit.Algorithm) Factory { return sharded.New }

// defaultLimitsFactory is the variant a Service uses for composites when
// neither [WithLimitsFactory] nor [WithFactory] chooses one: sharded's, for
// the reasons of defaultFactory (its composite store, too, holds every
// rule's state of a key inline).
var defaultLimitsFactory LimitsFactory = sharded.NewLimits

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
			f = defaultFactory(r.Algorithm)
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
		return nil, nil, fmt.Errorf("%w: the limits factory's limiter, a %T, has no AllowNWhich(key string, n int) (admit.Decision, int), which Service.CheckNWhich calls; build composites with a variant's NewLimits (sharded.NewLimits, locked.NewLimits, atomic.NewLimits), which return an admit.CompositeStore",
			admit.ErrUnsupported, lim)
	}
	return lim, w, nil
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
	carry  admit.Carry       // Target.Carry of the limiters a LimiterFactory builds (target.go)
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
	mig   migrate.Store
	hooks [2]*migrate.Hooks // mig's hooks: Keep and Redirect; with Adopt too (carry.go)
	use   atomic.Uint32     // unused, used or sealed: whether mig may hold a pair (carry.go, mark)

	// obs is the Service's observer, or nil; insts holds the instrument
	// resolved for each scope that has decided through the limiter (nil
	// until then), indexed by Scope. resolving guards resolving an
	// instrument and retired, set once a Reload has dropped the limiter
	// and released its store (release): from then on an instrument is
	// resolved without it, so that the observer is never given the store
	// again.
	obs       admit.Observer
	insts     [User + 1]atomic.Pointer[instrument]
	resolving sync.Mutex
	retired   bool
}

// instrument is an observer's instrument for one scope of an apiLimiter.
type instrument struct {
	in    admit.Instrument // nil: the observer counts nothing for these labels
	timed bool
}

// instrument returns the limiter's instrument for scope, resolving it on
// the first call for the scope, once: callers racing to resolve it wait on
// resolving, so the observer is asked once per scope, and never after
// release.
func (a *apiLimiter) instrument(sc Scope) *instrument {
	if in := a.insts[sc].Load(); in != nil {
		return in
	}
	return a.resolve(sc)
}

// resolve is instrument's first call for scope, outlined: the paths that
// find the instrument resolved stay a load and a nil check (allowN writes
// that out, as instrument costs just over the inliner's budget).
func (a *apiLimiter) resolve(sc Scope) *instrument {
	a.resolving.Lock()
	defer a.resolving.Unlock()
	if in := a.insts[sc].Load(); in != nil {
		return in
	}
	in := &instrument{in: a.obs.Instrument(a.labels(sc, !a.retired))}
	if in.in != nil {
		in.timed = in.in.Timed()
	}
	a.insts[sc].Store(in)
	return in
}

// labels returns the labels of the limiter's decisions for scope, with the
// limiter as their Store when withStore is true and it reports statistics.
func (a *apiLimiter) labels(sc Scope, withStore bool) admit.Labels {
	l := admit.Labels{Source: "policy", Name: a.api, Scope: sc.String(), Limits: a.g.limits}
	if st, ok := a.lim.(admit.StatsReporter); ok && withStore {
		l.Store = st
	}
	return l
}

// release tells r that the limiter is dropped: Release with the labels of
// each scope whose instrument was resolved with the limiter as its Store.
// Instruments resolved later get no Store.
func (a *apiLimiter) release(r admit.Releaser) {
	a.resolving.Lock()
	defer a.resolving.Unlock()
	if a.retired {
		return
	}
	a.retired = true
	if _, ok := a.lim.(admit.StatsReporter); !ok {
		return
	}
	for sc := range a.insts {
		if a.insts[sc].Load() != nil {
			r.Release(a.labels(Scope(sc), true))
		}
	}
}

// allowN is lim.AllowN, observed when the Service has an observer: the
// decision is made for a pair of scope sc. An untimed instrument, the
// common case, is counted on the shortest path: no clock read, no index of
// the binding rule.
func (a *apiLimiter) allowN(sc Scope, user string, n int) admit.Decision {
	if a.obs == nil {
		return a.lim.AllowN(user, n)
	}
	in := a.insts[sc].Load() // instrument, written out: it does not inline
	if in == nil {
		in = a.resolve(sc)
	}
	if in.timed {
		d, _ := a.timed(in, user, n, false)
		return d
	}
	d := a.lim.AllowN(user, n)
	if in.in != nil && d.Limit >= 0 { // count, written out: it does not inline
		o := admit.Denied
		if d.Allowed {
			o = admit.Admitted
		}
		in.in.Observe(o, n, 0)
	}
	return d
}

// count counts d, a decision about n, on the instrument, with latency. A
// refusal by a moved key (Limit < 0) is not counted: the call is decided
// again under the newer book.
func (in *instrument) count(d *admit.Decision, n int, latency time.Duration) {
	if in.in != nil && d.Limit >= 0 {
		o := admit.Denied
		if d.Allowed {
			o = admit.Admitted
		}
		in.in.Observe(o, n, latency)
	}
}

// timed is allowNWhich (lim.AllowN when which is false), counted on the
// timed instrument in with its latency.
func (a *apiLimiter) timed(in *instrument, user string, n int, which bool) (admit.Decision, int) {
	start := time.Now()
	var d admit.Decision
	var i int
	if which {
		d, i = a.allowNWhich(user, n)
	} else {
		d = a.lim.AllowN(user, n)
	}
	in.count(&d, n, time.Since(start))
	return d, i
}

// allowNWhichObserved is allowNWhich, observed when the Service has an
// observer.
func (a *apiLimiter) allowNWhichObserved(sc Scope, user string, n int) (admit.Decision, int) {
	if a.obs == nil {
		return a.allowNWhich(user, n)
	}
	in := a.instrument(sc)
	if in.timed {
		return a.timed(in, user, n, true)
	}
	d, i := a.allowNWhich(user, n)
	in.count(&d, n, 0)
	return d, i
}

// allowNWhich is lim.AllowNWhich for a composite, and AllowN and index 0 for
// one rule.
func (a *apiLimiter) allowNWhich(user string, n int) (admit.Decision, int) {
	if a.which != nil {
		return a.which.AllowNWhich(user, n)
	}
	return a.lim.AllowN(user, n), 0
}

// limiter returns the group's limiter for api, building it on first use. Two
// callers racing to build it agree on one: LoadOrStore keeps the first stored,
// and a limiter is used only once stored, so no pair ever starts twice.
func (g *group) limiter(api string) (*apiLimiter, error) {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter), nil
	}
	lim, which, err := g.build.limiterFor(g, api, false)
	if err != nil {
		return nil, err
	}
	// Our own copy of the name: the caller may reuse the memory behind api.
	api = strings.Clone(api)
	a := g.build.svc.newAPILimiter(g, api, lim, which)
	v, loaded := g.byAPI.LoadOrStore(api, a)
	if !loaded {
		g.build.svc.stored(a)
	}
	return v.(*apiLimiter), nil
}

// allowN is the hot path for a pair of the group: a lookup and the limiter's
// AllowN, without allocating once the API's limiter exists.
func (g *group) allowN(sc Scope, api, user string, n int) admit.Decision {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).allowN(sc, user, n)
	}
	d, _ := g.allowNSlow(sc, api, user, n)
	return d
}

// allowNWhich is allowN with the index of the rule that bound.
func (g *group) allowNWhich(sc Scope, api, user string, n int) (admit.Decision, int) {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).allowNWhichObserved(sc, user, n)
	}
	return g.allowNSlow(sc, api, user, n)
}

// allowNSlow builds the API's limiter, outlined so that allowN stays small.
func (g *group) allowNSlow(sc Scope, api, user string, n int) (admit.Decision, int) {
	a, err := g.limiter(api)
	if err != nil {
		// The factory built these limits' limiters at start-up and fails
		// now: fail closed, and try again on the next request.
		return g.failClosed()
	}
	return a.allowNWhichObserved(sc, user, n)
}

// failClosed is the denial of a request whose limiter cannot be built: the
// rule with the longest Window binds (the first on a tie), with that Window
// as RetryAfter.
func (g *group) failClosed() (admit.Decision, int) {
	bind := 0
	for i := range g.limits.Len() {
		if g.limits.At(i).Window > g.limits.At(bind).Window {
			bind = i
		}
	}
	r := g.limits.At(bind)
	return admit.Decision{Limit: r.Limit, RetryAfter: r.Window}, bind
}

// NewService returns a Service that checks requests against book. It builds
// a limiter for every entry of the book up front, so a rule or an option its
// variant rejects fails here, not at the first request.
//
// The limiters of one-rule entries are built by the factory given with
// [WithFactory], such as WithFactory(locked.New); without one, by
// [sharded.New], for every algorithm. The limiters of composites are built
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
	obs, _ := set.Observer.(admit.Observer)
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
		passed = []admit.Option{plumb.NewOption(func(s *plumb.Settings) error { *s = set; return nil }).(admit.Option)}
	}
	s := &Service{clock: set.Clock, obs: obs}
	s.build = builder{svc: s, factory: factory, limits: limits, opts: slices.Clone(passed), target: target}
	snap, err := s.compile(book, nil, admit.CarryNothing)
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
// under the limits the current book gives the pair (see [Book.LimitsFor]),
// with the semantics of [admit.KeyedLimiter.AllowN]; the Decision's Limit is
// the rule's Limit, or for a composite the Limit of the rule that bound (see
// [admit.Limits]). Each call uses exactly one book, even when it races a
// Reload.
//
// On a pair seen before, CheckN makes no allocation (for a composite, if the
// WithLimitsFactory limiter makes none: the default's makes none). The first
// request of a pair stores a copy of its names; the first request to an API
// under some limits builds that (limits, API)'s limiter. Should the factory
// fail then, although it built the same limits' limiters at start-up (no
// variant of admit does), the request is denied with RetryAfter equal to the
// Window of the rule (of the composite's rule with the longest Window), and
// the next request tries again.
func (s *Service) CheckN(user, api string, n int) admit.Decision {
	snap := s.cur.Load()
	var d admit.Decision
	if g := snap.users[user]; g != nil {
		d = g.allowN(User, api, user, n)
	} else if a := snap.apis[api]; a != nil {
		d = a.allowN(API, user, n)
	} else {
		d = snap.def.allowN(Default, api, user, n)
	}
	if d.Limit < 0 {
		// The pair's key moved to other limits in a Reload that came after
		// snap was loaded, and the limiter decided nothing (refused, see
		// carry.go): the call is decided under the current book.
		s.refused(snap)
		return s.CheckN(user, api, n)
	}
	return d
}

// refused is the pause of a call that a limiter refused (movedAway) before
// it is decided again: none if a newer snapshot is published, else a
// yield, as a Reload that sealed the limiter (carry.go, mark) is about to
// publish one. Only refused calls pay it.
func (s *Service) refused(snap *snapshot) {
	if s.cur.Load() == snap {
		runtime.Gosched()
	}
}

// CheckNWhich is [Service.CheckN] that also returns the limits the decision
// was made under and the index in them of the rule that bound it (see
// [admit.Limits]): on a denial, the rule that denied. The index is 0 for a
// one-rule entry. The limits are those of the one book the call used, which
// [Book.LimitsFor] of a book read at another moment may not match when the
// call races a Reload (a call that finds its pair moved by a Reload is
// decided, and described, under the newer book).
func (s *Service) CheckNWhich(user, api string, n int) (admit.Decision, admit.Limits, int) {
	snap := s.cur.Load()
	var d admit.Decision
	var l admit.Limits
	var i int
	if g := snap.users[user]; g != nil {
		d, i = g.allowNWhich(User, api, user, n)
		l = g.limits
	} else if a := snap.apis[api]; a != nil {
		d, i = a.allowNWhichObserved(API, user, n)
		l = a.g.limits
	} else {
		d, i = snap.def.allowNWhich(Default, api, user, n)
		l = snap.def.limits
	}
	if d.Limit < 0 {
		s.refused(snap) // as in CheckN
		return s.CheckNWhich(user, api, n)
	}
	return d, l, i
}

// Reset forgets the state of the pair (user, api) under the limits the
// current book gives it (see [Book.LimitsFor]), as [admit.Resetter] does for a
// key: the pair's next Check sees a fresh budget at its own reading, a
// Check of the pair concurrent with Reset is ordered before or after it,
// never lost or counted twice, and every other pair's budget is untouched,
// another API's for the same user included. It uses exactly one book, even
// when it races a Reload; state the pair keeps under other limits (ones a
// Reload may return to) is not reset. For a composite, every rule's state
// is reset together.
//
// A pair whose (limits, API) limiter was never built has nothing to reset,
// and Reset returns nil. If that limiter has no Reset (one built by a
// [WithFactory], [WithLimitsFactory] or [WithLimiterFactory] factory of
// your own; redisstore's), Reset returns an error wrapping
// [admit.ErrUnsupported] and resets nothing. Reset builds nothing, and it
// takes no lock shared by all pairs.
func (s *Service) Reset(user, api string) error {
	snap := s.cur.Load()
	var lim admit.KeyedLimiter
	if g := snap.users[user]; g != nil {
		lim = g.built(api)
	} else if a := snap.apis[api]; a != nil {
		lim = a.lim
	} else {
		lim = snap.def.built(api)
	}
	if lim == nil {
		return nil // never checked under this rule: fresh
	}
	r, ok := lim.(admit.Resetter)
	if !ok && s.build.target != nil {
		return fmt.Errorf("%w: policy: Service.Reset(%q, %q): the limiter factory's limiter, a %T, has no Reset(key string)",
			admit.ErrUnsupported, user, api, lim)
	}
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
// [WithCarry] says, by default [admit.CarryConsumed]: what the pair has
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
// WithCarry(admit.CarryNothing) is the way out.
//
// A Service given [WithLimiterFactory] moves no state: its Reload builds
// the limiters of the new limits with the Reload's strategy as
// Target.Carry, and each pair's state converts in its limiter at its first
// Check under the new limits (see WithLimiterFactory); canCarry's refusal
// does not apply.
//
// With WithCarry(admit.CarryNothing) a pair whose limits change continues
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
	rs := reloadSettings{carry: admit.CarryConsumed}
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
	if rs.carry == admit.CarryNothing || s.build.target != nil {
		// Nothing to move: the limiters of a LimiterFactory convert each
		// user's state on its first touch (target.go).
		s.cur.Store(snap)
	} else {
		s.carry(old, snap, rs.carry)
	}
	s.release(old, snap)
	return nil
}

// release lets the observer, if it keeps stores (admit.Releaser), let go
// of the limiters of old's groups whose limits snap no longer has: nothing
// else holds them once Checks on old are done. A group whose limits snap
// has, reused or built anew, is not released: the labels of its limiters
// are snap's too, and an observer replaces their store when it meets them
// again. It requires s.mu.
func (s *Service) release(old, snap *snapshot) {
	r, ok := s.obs.(admit.Releaser)
	if !ok {
		return
	}
	for l, g := range old.groups {
		if _, kept := snap.groups[l]; kept {
			continue
		}
		g.byAPI.Range(func(_, v any) bool {
			v.(*apiLimiter).release(r)
			return true
		})
	}
}

// compile builds the snapshot of book, reusing the groups of old (nil at
// start-up) whose limits it keeps. It touches no shared state until every
// limiter it needs is built and, for a carry other than CarryNothing, every
// limiter whose pairs change limits can carry their state (canCarry), so a
// failure leaves old as it was.
func (s *Service) compile(book *Book, old *snapshot, carry admit.Carry) (*snapshot, error) {
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
		tc = admit.CarryConsumed
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
	if carry != admit.CarryNothing && s.build.target == nil {
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
