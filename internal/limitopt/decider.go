package limitopt

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/bookquota"
	"github.com/admit-go/admit/internal/ratehdr"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
)

// Decider is what an httplimit Middleware or a grpclimit interceptor
// decides its requests with: a KeyedLimiter and its one quota (New), or a
// policy.Service and the quotas of its books (ForService), and the
// Instrument that counts the requests. It is set once by the constructor
// and read concurrently after.
type Decider struct {
	lim   admit.KeyedLimiter // New
	comp  ratehdr.Composite  // New over a composite: lim, asked which rule bound
	quota *ratehdr.Quota     // New: the one quota

	svc   *policy.Service // ForService
	books bookquota.Books // ForService: the quotas of svc's books

	// Inst counts the requests, resolved once from WithObserver's Observer
	// by the constructor; nil when there is none, or when the Observer
	// counts nothing. Timed is Inst.Timed(), read then: only a timed
	// instrument makes a request read the clock.
	Inst  observe.Instrument
	Timed bool
}

// ServiceName is the Labels.Name under which a ForService Decider's
// requests are observed (see WithObserver): a Service has no one quota to
// name them after, and observes each API under its own name.
const ServiceName = "service"

// SetLimiter makes d decide with lim (New): its quota, named name (with
// rule, when WithPolicy gave one), and o's Instrument, with Source source
// ("http" or "grpc"). A quota that cannot describe lim is an error.
func (d *Decider) SetLimiter(p Pkg, lim admit.KeyedLimiter, name string, rule *admit.Rule, o observe.Observer, source string) error {
	d.lim = lim
	q, comp, limits, conflict := ratehdr.LimiterQuota(name, rule, lim)
	if conflict != "" {
		return p.Invalid("%s", conflict)
	}
	d.quota, d.comp = q, comp
	d.instrument(o, source, q.Name, limits, lim)
	return nil
}

// SetService makes d decide with svc (ForService), and renders the quotas
// of its book.
func (d *Decider) SetService(svc *policy.Service, o observe.Observer, source string) {
	d.svc = svc
	d.books.Of(svc.Book())
	d.instrument(o, source, ServiceName, admit.Limits{}, nil)
}

// instrument resolves the Instrument, once, from o, with the labels of a
// middleware or an interceptor: Source source, Name name, Limits limits,
// and Store lim when it reports its StoreStats.
func (d *Decider) instrument(o observe.Observer, source, name string, limits admit.Limits, lim admit.KeyedLimiter) {
	if o == nil {
		return
	}
	d.Inst = o.Instrument(ratehdr.Labels(source, name, limits, lim))
	d.Timed = d.Inst != nil && d.Inst.Timed()
}

// Service reports whether d decides with a Service, which needs the
// request's API.
func (d *Decider) Service() bool { return d.svc != nil }

// Decide decides one request for key, into *dec: by the Service under api
// (which the caller works out only when Service reports true), or by the
// limiter. It returns the quota that applied, and its part that bound the
// decision. dec is a pointer, not a result, so that the five-word Decision
// is written once, where the caller keeps it (see kernel.Verdict).
func (d *Decider) Decide(key, api string, dec *admit.Decision) (q, part *ratehdr.Quota) {
	which := 0
	switch {
	case d.svc != nil:
		q, which = d.service(key, api, dec)
	case d.comp != nil:
		*dec, which = d.comp.AllowNWhich(key, 1)
		q = d.quota
	default:
		*dec = d.lim.Allow(key)
		q = d.quota
	}
	return q, q.Part(which)
}

// service is Decide by the Service. It is outlined so that the Limits it
// gets back do not enlarge Decide's frame on the limiter's paths.
//
//go:noinline
func (d *Decider) service(key, api string, dec *admit.Decision) (*ratehdr.Quota, int) {
	book := d.svc.Book()
	var limits admit.Limits
	var which int
	*dec, limits, which = d.svc.CheckNWhich(key, api, 1)
	return d.books.For(book, key, api, limits), which
}

// Observe counts one request with outcome o on d.Inst, which callers check
// is not nil first (so that one without an Instrument pays that check
// alone); start is when the request's decision began, read only when
// d.Timed.
func (d *Decider) Observe(o observe.Outcome, start time.Time) {
	var latency time.Duration
	if d.Timed {
		latency = time.Since(start)
	}
	d.Inst.Observe(o, 1, latency)
}
