package policy

// The check path: Check, CheckN, CheckNWhich and Reset, and the calls on a
// group and its limiters that they make for every request.

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/admit-go/admit"
)

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
	for {
		snap := s.cur.Load()
		var d admit.Decision
		var moved bool
		if g := snap.users[user]; g != nil {
			d, moved = g.allowN(User, api, user, n)
		} else if a := snap.apis[api]; a != nil {
			d, moved = a.allowN(API, user, n)
		} else {
			d, moved = snap.def.allowN(Default, api, user, n)
		}
		if !moved {
			return d
		}
		// The pair's key moved to other limits in a Reload that came after
		// snap was loaded, and the limiter decided nothing (refused, see
		// carry.go): the call is decided under the current book.
		s.refused(snap)
	}
}

// refused is the pause of a call that a limiter refused (moved) before
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
	for {
		snap := s.cur.Load()
		var d admit.Decision
		var l admit.Limits
		var i int
		var moved bool
		if g := snap.users[user]; g != nil {
			d, i, moved = g.allowNWhich(User, api, user, n)
			l = g.limits
		} else if a := snap.apis[api]; a != nil {
			d, i, moved = a.allowNWhichObserved(API, user, n)
			l = a.g.limits
		} else {
			d, i, moved = snap.def.allowNWhich(Default, api, user, n)
			l = snap.def.limits
		}
		if !moved {
			return d, l, i
		}
		s.refused(snap) // as in CheckN
	}
}

// Reset forgets the state of the pair (user, api) under the limits the
// current book gives it (see [Book.LimitsFor]), as [admit.Store.Reset] does
// for a key: the pair's next Check sees a fresh budget at its own reading, a
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
	r, ok := lim.(resetter)
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

// resetter is a limiter that can forget a key: every admit.Store and
// admit.CompositeStore. A Service's limiter is any admit.KeyedLimiter (a
// factory of the caller's may build one without Reset, a Redis store's
// has none), so Reset asks for it through this interface.
type resetter interface{ Reset(key string) }

// built returns the group's limiter for api, or nil if none was built.
func (g *group) built(api string) admit.KeyedLimiter {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).lim
	}
	return nil
}

// decideN is the limiter's decision on n requests for user: mig.Decide's
// for a limiter whose keys move, which reports moved true, deciding
// nothing, for a pair a Reload moved away (carry.go); lim.AllowN
// otherwise.
func (a *apiLimiter) decideN(user string, n int) (d admit.Decision, moved bool) {
	if a.mig != nil {
		d, _, moved = a.mig.Decide(user, n)
		return d, moved
	}
	return a.lim.AllowN(user, n), false
}

// allowNWhich is decideN with the index of the rule that bound:
// lim.AllowNWhich for a composite, index 0 for one rule.
func (a *apiLimiter) allowNWhich(user string, n int) (admit.Decision, int, bool) {
	if a.mig != nil {
		return a.mig.Decide(user, n)
	}
	if a.which != nil {
		d, i := a.which.AllowNWhich(user, n)
		return d, i, false
	}
	return a.lim.AllowN(user, n), 0, false
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
// decision, without allocating once the API's limiter exists. moved is
// decideN's.
func (g *group) allowN(sc Scope, api, user string, n int) (admit.Decision, bool) {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).allowN(sc, user, n)
	}
	d, _, moved := g.allowNSlow(sc, api, user, n)
	return d, moved
}

// allowNWhich is allowN with the index of the rule that bound.
func (g *group) allowNWhich(sc Scope, api, user string, n int) (admit.Decision, int, bool) {
	if v, ok := g.byAPI.Load(api); ok {
		return v.(*apiLimiter).allowNWhichObserved(sc, user, n)
	}
	return g.allowNSlow(sc, api, user, n)
}

// allowNSlow builds the API's limiter, outlined so that allowN stays small.
func (g *group) allowNSlow(sc Scope, api, user string, n int) (admit.Decision, int, bool) {
	a, err := g.limiter(api)
	if err != nil {
		// The factory built these limits' limiters at start-up and fails
		// now: fail closed, and try again on the next request.
		d, i := g.failClosed()
		return d, i, false
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
