package policy

// The observer path: WithObserver, the instruments a Service's limiters
// resolve and count their decisions on, and their release when a Reload
// drops a limiter.

import (
	"fmt"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/observe"
)

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
func WithObserver(o observe.Observer) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if o == nil {
			return fmt.Errorf("%w: WithObserver(nil); pass an observe.Observer, such as a *tally.Tally", admit.ErrInvalidOption)
		}
		s.Observer = o
		return nil
	})
}

// instrument is an observer's instrument for one scope of an apiLimiter.
type instrument struct {
	in    observe.Instrument // nil: the observer counts nothing for these labels
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

// statsReporter is a limiter that reports statistics: every admit.Store and
// admit.CompositeStore. A Service's limiter is any admit.KeyedLimiter (a
// factory of the caller's may build one without Stats, a Redis store's
// has none), so it asks for Stats through this interface.
type statsReporter interface{ Stats() admit.StoreStats }

// labels returns the labels of the limiter's decisions for scope, with the
// limiter as their Store when withStore is true and it reports statistics.
func (a *apiLimiter) labels(sc Scope, withStore bool) observe.Labels {
	l := observe.Labels{Source: "policy", Name: a.api, Scope: sc.String(), Limits: a.g.limits}
	if st, ok := a.lim.(statsReporter); ok && withStore {
		l.Store = st
	}
	return l
}

// release tells r that the limiter is dropped: Release with the labels of
// each scope whose instrument was resolved with the limiter as its Store.
// Instruments resolved later get no Store.
func (a *apiLimiter) release(r observe.Releaser) {
	a.resolving.Lock()
	defer a.resolving.Unlock()
	if a.retired {
		return
	}
	a.retired = true
	if _, ok := a.lim.(statsReporter); !ok {
		return
	}
	for sc := range a.insts {
		if a.insts[sc].Load() != nil {
			r.Release(a.labels(Scope(sc), true))
		}
	}
}

// allowN is decideN, observed when the Service has an observer: the
// decision is made for a pair of scope sc. An untimed instrument, the
// common case, is counted on the shortest path: no clock read, no index of
// the binding rule. A call the limiter refused (moved) is not counted: it
// is decided again under the newer book.
func (a *apiLimiter) allowN(sc Scope, user string, n int) (d admit.Decision, moved bool) {
	if m := a.fast; m != nil { // decideN, written out: it does not inline
		d, _, moved = m.Decide(user, n)
		return d, moved
	}
	if a.obs == nil {
		return a.lim.AllowN(user, n), false // a limiter whose keys do not move
	}
	in := a.insts[sc].Load() // instrument, written out: it does not inline
	if in == nil {
		in = a.resolve(sc)
	}
	if in.timed {
		d, _, moved := a.timed(in, user, n, false)
		return d, moved
	}
	if a.mig != nil { // decideN, written out
		d, _, moved = a.mig.Decide(user, n)
	} else {
		d = a.lim.AllowN(user, n)
	}
	if in.in != nil && !moved { // count, written out: it does not inline
		o := observe.Denied
		if d.Allowed {
			o = observe.Admitted
		}
		in.in.Observe(o, n, 0)
	}
	return d, moved
}

// count counts d, a decision about n, on the instrument, with latency.
func (in *instrument) count(d *admit.Decision, n int, latency time.Duration) {
	if in.in != nil {
		o := observe.Denied
		if d.Allowed {
			o = observe.Admitted
		}
		in.in.Observe(o, n, latency)
	}
}

// timed is allowNWhich (decideN when which is false), counted on the
// timed instrument in with its latency unless the limiter refused the call
// (moved).
func (a *apiLimiter) timed(in *instrument, user string, n int, which bool) (d admit.Decision, i int, moved bool) {
	start := time.Now()
	if which {
		d, i, moved = a.allowNWhich(user, n)
	} else {
		d, moved = a.decideN(user, n)
	}
	if !moved {
		in.count(&d, n, time.Since(start))
	}
	return d, i, moved
}

// allowNWhichObserved is allowNWhich, observed when the Service has an
// observer.
func (a *apiLimiter) allowNWhichObserved(sc Scope, user string, n int) (admit.Decision, int, bool) {
	if a.obs == nil {
		return a.allowNWhich(user, n)
	}
	in := a.instrument(sc)
	if in.timed {
		return a.timed(in, user, n, true)
	}
	d, i, moved := a.allowNWhich(user, n)
	if !moved {
		in.count(&d, n, 0)
	}
	return d, i, moved
}

// release lets the observer, if it keeps stores (observe.Releaser), let go
// of the limiters of old's groups whose limits snap no longer has: nothing
// else holds them once Checks on old are done. A group whose limits snap
// has, reused or built anew, is not released: the labels of its limiters
// are snap's too, and an observer replaces their store when it meets them
// again. It requires s.mu.
func (s *Service) release(old, snap *snapshot) {
	r, ok := s.obs.(observe.Releaser)
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
