package httplimit

import (
	"net/http"
	"slices"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/limitopt"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
)

// Middleware rate-limits the requests of the handlers it wraps: it derives
// each request's key, asks the limiter (or the Service) to admit it, sets the
// RateLimit fields, and either calls the next handler or answers 429 Too Many
// Requests. Build one with [New] over an [admit.KeyedLimiter] or [ForService]
// over a [policy.Service]; the zero Middleware is not usable.
//
// A Middleware is immutable and safe for concurrent use. Every handler it
// wraps shares its limiter: wrap two handlers with one Middleware and their
// requests draw on the same budgets.
type Middleware struct {
	cfg config
	dec limitopt.Decider // the limiter or Service, its quotas, the instrument

	key     KeyFunc
	parts   []KeyPart
	proxies *clientip.Proxies
}

// New returns a Middleware that limits requests with lim, one budget per key
// (the client IP unless an option says otherwise). The quota is named
// "default" ([WithPolicyName] or [WithPolicy] name it otherwise); its rule,
// for the RateLimit-Policy field, is the limiter's own when it has a Rule
// method (every store of packages atomic, locked and sharded has one,
// [admit.Store]). [WithPolicy] gives the rule, for a limiter without one or
// to override it.
//
// Over a limiter of composite limits (an [admit.CompositeStore], which the
// NewLimits of atomic, locked and sharded return for two or more rules, or
// any KeyedLimiter with its Limits and AllowNWhich methods, such as
// redisstore's Keyed) each rule is a policy of its own, named after the quota and
// the rule's text ("default:token-bucket,10,1s"): RateLimit-Policy lists
// them all, and RateLimit, Retry-After and the problem body report the rule
// that bound each decision, as AllowNWhich says (docs/http.md, "Composite
// limits").
//
// A nil lim, a bad option, options that do not apply to a KeyedLimiter
// ([WithAPI]) and [WithPolicy] over a composite, whose one rule could not
// describe it, are errors wrapping [admit.ErrInvalidOption].
func New(lim admit.KeyedLimiter, opts ...Option) (*Middleware, error) {
	if lim == nil {
		return nil, invalid("New(nil, …); pass a KeyedLimiter, such as the one locked.New(rule) returns")
	}
	m, err := build("New", opts)
	if err != nil {
		return nil, err
	}
	if err := m.dec.SetLimiter(pkg, lim, m.cfg.PolicyName, m.cfg.PolicyRule, m.cfg.Observer, "http"); err != nil {
		return nil, err
	}
	return m, nil
}

// ForService returns a Middleware that limits requests with svc: each request
// is checked as svc.CheckNWhich(key, api, 1), the key being the user (the
// client IP unless an option says otherwise) and api the route (see
// [WithAPI]). The quota named in the headers and the problem body is the
// rule book's entry that applied, as [policy.Book.EntryFor] names it
// ("default", "api./login", "user.vip-1"), with its Limit as q and its
// Window as w; an entry of composite limits is one policy per rule, named
// as [New] names them ("api./search:fixed-window,1000,1h"), and the rule
// that bound the decision is the one reported. A structured-field String
// holds only printable ASCII, so other bytes of a name are percent-encoded
// in the headers and the body: "user.jörg" is "user.j%C3%B6rg" there
// ([Denial.Policy] keeps the name as it is).
//
// The quotas of a book are rendered once, when the middleware first sees the
// book (at ForService, and after each [policy.Service.Reload]). A request
// racing a Reload may be decided under one book and named after the other's
// entry; its numbers are always those of the limits that decided it.
//
// A nil svc, a bad option and options that do not apply to a Service
// ([WithPolicy], [WithPolicyName]) are errors wrapping [admit.ErrInvalidOption].
func ForService(svc *policy.Service, opts ...Option) (*Middleware, error) {
	if svc == nil {
		return nil, invalid("ForService(nil, …); pass a *policy.Service from policy.NewService")
	}
	m, err := build("ForService", opts)
	if err != nil {
		return nil, err
	}
	m.dec.SetService(svc, m.cfg.Observer, "http")
	return m, nil
}

// build applies opts and checks what every Middleware needs; ctor names
// the constructor, New or ForService, whose options differ.
func build(ctor string, opts []Option) (*Middleware, error) {
	m := &Middleware{}
	for i, opt := range opts {
		if opt == nil {
			return nil, invalid("option %d is nil", i)
		}
		if err := opt(&m.cfg); err != nil {
			return nil, err
		}
	}
	c := &m.cfg
	switch {
	case ctor == "New" && c.api != nil:
		return nil, invalid("WithAPI applies to ForService; a KeyedLimiter has one budget per key, whatever the API")
	case ctor == "ForService" && c.PolicyName != "":
		return nil, invalid("%s applies to New; a Service's quotas are the entries of its rule book", c.PolicyOpt)
	case ctor == "ForService" && c.api == nil:
		c.api = routeAPI
	}
	m.proxies, m.parts = c.Proxies, c.Parts
	switch {
	case c.Key != nil:
		if c.Proxies != nil {
			return nil, invalid("WithTrustedProxies configures the client IP, which WithKey's function does not use; leave one out")
		}
		m.key = c.Key
	case c.Parts != nil:
		if c.Proxies != nil && !hasIP(c.Parts) {
			return nil, invalid("WithTrustedProxies configures the client IP, which WithKeyFrom's parts do not include; add ClientIP() or leave it out")
		}
		m.key = m.partsKey
	default:
		m.parts = []KeyPart{ClientIP()}
		m.key = m.partsKey
	}
	return m, nil
}

func hasIP(parts []KeyPart) bool {
	return slices.ContainsFunc(parts, func(p KeyPart) bool { return p.p.Kind == limitopt.PartIP })
}

// routeAPI is the default API of a Service's request.
func routeAPI(r *http.Request) string { return RouteAPI(r.Pattern) }

// Handler returns a handler that limits each request and passes those it
// admits to next; next nil means [http.DefaultServeMux], as for [http.Server].
// The returned handler is safe for concurrent use.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if next == nil {
		next = http.DefaultServeMux
	}
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.m.serve(w, r, h.next) }

// serve is the whole middleware: exemption, key, decision, headers, response.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	c := &m.cfg
	if c.exempt != nil && c.exempt(r) {
		next.ServeHTTP(w, r)
		return
	}
	var start time.Time
	if m.dec.Timed {
		start = time.Now()
	}
	key, ok := m.key(r)
	if !ok || key == "" || len(key) > MaxKeyBytes {
		if c.UnknownKey == "" {
			m.unkeyed(w, r, next, start)
			return
		}
		key = c.UnknownKey
	}

	var api string
	if m.dec.Service() {
		api = c.api(r)
	}
	var d admit.Decision
	q, p := m.dec.Decide(key, api, &d)

	if d.Allowed {
		if m.dec.Inst != nil {
			m.dec.Observe(observe.Admitted, start)
		}
		m.setHeaders(w.Header(), q, p, d, 0)
		next.ServeHTTP(w, r)
		return
	}
	if m.dec.Inst != nil {
		if c.shadow {
			m.dec.Observe(observe.ShadowDenied, start)
		} else {
			m.dec.Observe(observe.Denied, start)
		}
	}
	den := Denial{Key: key, API: api, Policy: p.Name, Decision: d}
	switch {
	case c.shadow:
		m.setHeaders(w.Header(), q, p, d, 0)
		if c.hook != nil {
			c.hook(r, den)
		}
		next.ServeHTTP(w, r)
	case c.deny != nil:
		m.setHeaders(w.Header(), q, p, d, withRetry)
		c.deny(w, r, den)
	default:
		m.setHeaders(w.Header(), q, p, d, withRetry|withProblem)
		writeProblem(w, p, d)
	}
}

// unkeyed answers a request without a key: 400, the deny handler, or, in
// shadow mode, the hook and the next handler.
func (m *Middleware) unkeyed(w http.ResponseWriter, r *http.Request, next http.Handler, start time.Time) {
	c := &m.cfg
	if m.dec.Inst != nil {
		if c.shadow {
			m.dec.Observe(observe.ShadowDenied, start)
		} else {
			m.dec.Observe(observe.Errored, start)
		}
	}
	den := Denial{Unkeyed: true}
	switch {
	case c.shadow:
		if c.hook != nil {
			c.hook(r, den)
		}
		next.ServeHTTP(w, r)
	case c.deny != nil:
		c.deny(w, r, den)
	default:
		h := w.Header()
		h[hdrContentType] = []string{problemContentType}
		h[hdrNoSniff] = []string{"nosniff"}
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(badRequestBody)) //nolint:errcheck // the client went away; nothing to do
	}
}
