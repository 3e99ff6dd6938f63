package httplimit

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/limitopt"
	"github.com/admit-go/admit/observe"
)

// An Option configures a [Middleware]; pass options to [New] or [ForService].
// A bad option (a nil function, an invalid network, options that contradict
// each other) makes the constructor return an error wrapping
// [admit.ErrInvalidOption] that says what would be right; options never panic.
type Option func(*config) error

// config is the resolved form of the options.
type config struct {
	exempt func(*http.Request) bool
	shadow bool
	hook   func(*http.Request, Denial)
	deny   func(http.ResponseWriter, *http.Request, Denial)
	legacy bool
	api    func(*http.Request) string

	limitopt.Common[KeyFunc, KeyPart] // what httplimit and grpclimit share
}

// pkg names the package in the errors of its options.
const pkg limitopt.Pkg = "httplimit"

func invalid(format string, args ...any) error { return pkg.Invalid(format, args...) }

// quote quotes s for an error message, cut to its first 64 bytes (and "…"),
// so that a huge input cannot make a huge error.
func quote(s string) string { return clientip.Quote(s) }

// WithKey makes f derive the key of each request instead of the client IP.
// With [ForService], the key is the user. It cannot be combined with
// [WithKeyFrom] or [WithTrustedProxies] (which configures the client IP that
// f does not use).
func WithKey(f KeyFunc) Option {
	return func(c *config) error {
		return c.SetKey(pkg, f, f == nil, "WithKey(nil); pass a KeyFunc, or leave the option out to key by client IP")
	}
}

// WithKeyFrom builds the key of each request from parts, in order, joined by a
// NUL byte: WithKeyFrom(ClientIP(), Route()) gives each client one budget per
// route. A request lacking any part has no key (see [WithUnknownKey]). With
// no option the key is ClientIP() alone.
func WithKeyFrom(parts ...KeyPart) Option {
	return func(c *config) error { return c.SetParts(pkg, parts, noParts, zeroPart, badName) }
}

// badName says what is wrong with the name of WithKeyFrom's part p, or ""
// when nothing is (or p has no name).
func badName(p KeyPart) string {
	if p.p.Kind != limitopt.PartNamed || validHeaderName(p.p.Name) {
		return ""
	}
	return fmt.Sprintf("WithKeyFrom: RequestHeader(%s): not a header name; want a token such as \"X-API-Key\"", quote(p.p.Name))
}

// The errors of WithKeyFrom: without parts, and with the zero KeyPart.
const (
	noParts  = "WithKeyFrom(): no parts; pass at least one, such as ClientIP() or RequestHeader(\"X-API-Key\")"
	zeroPart = "build parts with ClientIP, RequestHeader, Method, Path or Route"
)

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !clientip.IsTchar(s[i]) {
			return false
		}
	}
	return true
}

// WithTrustedProxies makes the client IP of a request that arrives from one of
// networks (CIDR prefixes such as "10.0.0.0/8" or "2001:db8::/32", or single
// addresses) come from the forwarding header those proxies write: the
// rightmost address in it that is not itself in networks. Every address to the
// left of that one was written by the client and may be forged; a request from
// any other peer is keyed by its own address, whatever headers it sends.
//
// Name exactly the header your proxies set, and make sure they overwrite or
// append to it: a header the proxy passes through untouched is the client's
// to forge. A request from a trusted peer without the header is keyed by the
// peer's address; one whose header holds a value that is not an address
// (garbage, "unknown", an obfuscated Forwarded node) before an untrusted
// address is found has no key (see [WithUnknownKey]).
//
// Calling it again with the same header adds networks. It is an error to call
// it with no networks, a network that does not parse, a network of every
// address ("0.0.0.0/0", "::/0"), networks that together cover every address
// of a family ("0.0.0.0/1" and "128.0.0.0/1", in one call or over several;
// IPv4-mapped prefixes such as "::ffff:0.0.0.0/97" count as the IPv4
// networks they map), a second header, or together with a key that does not
// use the client IP ([WithKey], or [WithKeyFrom] without [ClientIP]).
func WithTrustedProxies(header ProxyHeader, networks ...string) Option {
	return func(c *config) error { return c.TrustProxies(pkg, clientip.Header(header), networks) }
}

// WithUnknownKey charges every request without a key to the one shared key
// instead of rejecting it with 400 Bad Request. Such requests then share one
// budget: choose a key no real client can have, such as "unknown".
func WithUnknownKey(key string) Option {
	return func(c *config) error { return c.SetUnknownKey(pkg, key, MaxKeyBytes) }
}

// WithExempt exempts every request for which exempt returns true (health
// checks, metrics scrapes) from limiting: it passes straight to the next
// handler, consumes nothing and gets no rate-limit headers. exempt is called
// first, for every request, concurrently; it must be fast and must not retain r.
func WithExempt(exempt func(r *http.Request) bool) Option {
	return func(c *config) error {
		return limitopt.Set(pkg, &c.exempt, exempt, exempt == nil, "WithExempt(nil); pass a predicate, such as func(r *http.Request) bool { return r.URL.Path == \"/healthz\" }")
	}
}

// WithShadow puts the middleware in shadow mode: every request is decided and
// given the RateLimit headers as usual (and charged if admitted, since a
// denial consumes nothing), but none is blocked. A
// request that would have been denied (or rejected for lack of a key) is
// reported to hook, if not nil, and then passed to the next handler, without
// Retry-After. Use it to count would-be denials before enforcing a limit.
//
// hook runs on the request's goroutine, before the next handler, concurrently
// for many requests: it must be safe for concurrent use, fast (increment a
// counter) and must not retain r.
func WithShadow(hook func(r *http.Request, d Denial)) Option {
	return func(c *config) error {
		c.shadow, c.hook = true, hook
		return nil
	}
}

// WithDenyHandler makes deny write the response to a denied request instead
// of the 429 problem body, and to a request without a key (d.Unkeyed) instead
// of the 400 one. For a denial, the RateLimit fields and Retry-After are
// already set on w when deny runs; deny writes the status and the body. deny
// runs concurrently for many requests and must not retain w or r after it
// returns. It is not called in shadow mode, which never denies.
func WithDenyHandler(deny func(w http.ResponseWriter, r *http.Request, d Denial)) Option {
	return func(c *config) error {
		return limitopt.Set(pkg, &c.deny, deny, deny == nil, "WithDenyHandler(nil); pass a handler, or leave the option out for the 429 problem body")
	}
}

// WithLegacyHeaders adds the pre-standard fields X-RateLimit-Limit (the rule's
// Limit; for composite limits, the binding rule's), X-RateLimit-Remaining and
// X-RateLimit-Reset (delta seconds, as the RateLimit field's t) to every
// limited response, for clients that predate the draft.
func WithLegacyHeaders() Option {
	return func(c *config) error { c.legacy = true; return nil }
}

// WithPolicy names the quota of a middleware built by [New] and gives the
// rule its limiter enforces, for the RateLimit-Policy field:
// WithPolicy("default", rule) sends `RateLimit-Policy: "default";q=100;w=60`
// for a rule of 100 per minute. Without it the quota is named "default" and
// its rule is the limiter's Rule(), if it has that method (every store of
// packages atomic, locked and sharded does); otherwise RateLimit-Policy is
// left out, since a plain KeyedLimiter does not say its window.
//
// name is 1 to 64 printable ASCII characters; rule must be valid. It is an
// error with [ForService], whose rule book names its quotas, with
// [WithPolicyName], and over an [admit.CompositeStore] of two or more rules,
// which no one rule describes (name its quota with WithPolicyName).
func WithPolicy(name string, rule admit.Rule) Option {
	return func(c *config) error { return c.SetPolicy(pkg, name, rule) }
}

// WithPolicyName names the quota of a middleware built by [New] without
// giving its rule, which stays the limiter's own: for a store of a single
// rule, WithPolicyName("per-client") sends `"per-client";q=100;w=60`; over
// an [admit.CompositeStore], the name of each rule's policy starts with it,
// `"per-client:token-bucket,10,1s";q=10;w=1`. Over a limiter that does not
// say its rule, it names the RateLimit item and the problem body's quota.
//
// name is 1 to 64 printable ASCII characters. It is an error with
// [ForService], whose rule book names its quotas, and with [WithPolicy],
// which names the quota too.
func WithPolicyName(name string) Option {
	return func(c *config) error { return c.SetPolicyName(pkg, "WithPolicyName", name) }
}

// WithAPI makes api name the API of each request for a [ForService]
// middleware, in place of the default: the path of the route that matched
// ([http.Request.Pattern] without its method and host: "/items/{id}"), or ""
// when the request was not routed by a ServeMux, which gives all such
// requests the book's default rule and one shared budget per user.
//
// The Service keeps a limiter per API name for its lifetime, so api must
// return a bounded set of names: routes, never raw paths. If the middleware
// wraps a whole ServeMux, ask the mux:
//
//	httplimit.WithAPI(func(r *http.Request) string {
//		_, pattern := mux.Handler(r)
//		return httplimit.RouteAPI(pattern)
//	})
//
// It is an error with [New].
func WithAPI(api func(r *http.Request) string) Option {
	return func(c *config) error {
		return limitopt.Set(pkg, &c.api, api, api == nil, "WithAPI(nil); pass a function of the request, or leave the option out to use the route")
	}
}

// WithObserver makes the middleware report what it did with each request
// to o. [New] and [ForService] call o.Instrument once, when they have
// checked everything else, with Labels{Source: "http", Name: the quota's
// name ([WithPolicy]'s or [WithPolicyName]'s, else "default"), Limits: the
// limits the RateLimit-Policy field describes (the limiter's Rule or
// Limits, or WithPolicy's rule; the zero Limits when none is known), Store:
// the limiter when it has Stats, as an [admit.Store] has}; a ForService
// middleware's labels are {Source: "http", Name: "service"}, with the zero
// Limits and no Store. No key ever reaches o.
//
// Every request the middleware limits is then counted once, as
// observe.Admitted (passed to the next handler), observe.Denied (answered 429,
// or by the [WithDenyHandler] handler), observe.ShadowDenied (denied, or
// without a key, and let through by [WithShadow]) or observe.Errored (without
// a key and refused: 400 Bad Request, or the deny handler with
// Denial.Unkeyed), with n = 1; a request without a key charged to
// [WithUnknownKey]'s key counts as the decision about that key. Requests
// exempted by [WithExempt] are not counted. The latency, given only when
// the instrument's Timed said so when it was resolved, is the time from
// deriving the key to the decision, the next handler excluded.
//
// Under ForService, the per-API counts come from the Service's own
// policy.WithObserver, which counts each Check under the API's labels;
// this instrument counts what the HTTP layer did with the requests, those
// it refused for want of a key (which never reach the Service) and the
// denials shadow mode let through included.
//
// Without the option a request pays one nil check for observation; with
// it, one call of Observe, with no allocation and no map lookup. A nil o is
// an error wrapping [admit.ErrInvalidOption]: leave the option out to
// observe nothing.
func WithObserver(o observe.Observer) Option {
	return func(c *config) error { return c.SetObserver(pkg, o) }
}

// RouteAPI returns the API name of a ServeMux pattern, as [ForService] uses by
// default: the pattern without its method and host. "GET /items/{id}" and
// "example.com/items/{id}" are "/items/{id}"; "" is "".
func RouteAPI(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		return pattern[i:]
	}
	return pattern
}

// Denial describes a request the middleware denied, would have denied in
// shadow mode, or could not key, as given to a [WithDenyHandler] handler and a
// [WithShadow] hook.
type Denial struct {
	// Key is the key the request was charged to: the user, for a Service.
	// Empty when Unkeyed.
	Key string
	// API is the API name of a Service's request; empty for a KeyedLimiter.
	API string
	// Policy is the name of the quota that denied the request, as the headers
	// name it before escaping: "default", "api./login", or for composite
	// limits the policy of the rule that denied, "default:fixed-window,1000,1h".
	// Empty when Unkeyed.
	Policy string
	// Decision is the limiter's answer; the zero Decision when Unkeyed.
	Decision admit.Decision
	// Unkeyed reports a request whose key could not be derived, which is
	// rejected (400 Bad Request by default) rather than denied by a limit.
	Unkeyed bool
}
