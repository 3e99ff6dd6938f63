package grpclimit

import (
	"context"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/limitopt"
	"github.com/admit-go/admit/observe"
)

// An Option configures an [Interceptor] or a [Client]; pass options to
// [New], [ForService] or [NewClient]. A bad option (a nil function, an
// invalid network, options that contradict each other or do not apply to
// the constructor) makes the constructor return an error wrapping
// [admit.ErrInvalidOption] that says what would be right; options never
// panic.
type Option func(*config) error

// config is the resolved form of the options.
type config struct {
	exempt     func(context.Context, string) bool
	shadow     bool
	hook       func(context.Context, Denial)
	api        func(string) string
	admittedMD bool

	limitopt.Common[KeyFunc, KeyPart] // what httplimit and grpclimit share
}

// pkg names the package in the errors of its options.
const pkg limitopt.Pkg = "grpclimit"

func invalid(format string, args ...any) error { return pkg.Invalid(format, args...) }

// WithKey makes f derive the key of each call instead of the default
// ([PeerIP] for [New] and [ForService], [FullMethod] for [NewClient]).
// With ForService, the key is the user. It cannot be combined with
// [WithKeyFrom] or [WithTrustedProxies] (which configures the peer address
// that f does not use).
func WithKey(f KeyFunc) Option {
	return func(c *config) error {
		return c.SetKey(pkg, f, f == nil, "WithKey(nil); pass a KeyFunc, or leave the option out for the default key")
	}
}

// WithKeyFrom builds the key of each call from parts, in order, joined by a
// NUL byte: WithKeyFrom(PeerIP(), FullMethod()) gives each client one
// budget per method, WithKeyFrom(Metadata("x-api-key")) one per API key. A
// call lacking any part has no key (see [WithUnknownKey]).
func WithKeyFrom(parts ...KeyPart) Option {
	return func(c *config) error { return c.SetParts(pkg, parts, noParts, zeroPart, badName) }
}

// The errors of WithKeyFrom: without parts, and with the zero KeyPart.
const (
	noParts  = "WithKeyFrom(): no parts; pass at least one, such as PeerIP() or Metadata(\"x-api-key\")"
	zeroPart = "build parts with PeerIP, Metadata or FullMethod"
)

// WithTrustedProxies makes the [PeerIP] of a call that arrives from one of
// networks (CIDR prefixes such as "10.0.0.0/8" or "2001:db8::/32", or single
// addresses) come from the forwarding metadata those proxies write
// ("x-forwarded-for" or "forwarded"): the rightmost address in it that is
// not itself in networks. Every address to the left of that one was written
// by the client and may be forged; a call from any other peer is keyed by
// its own address, whatever metadata it sends. The rules are exactly those
// of httplimit.WithTrustedProxies for the HTTP headers.
//
// Name exactly the header your proxies set, and make sure they overwrite or
// append to it: a header the proxy passes through untouched is the client's
// to forge. A call from a trusted peer without the metadata is keyed by the
// peer's address; one whose metadata holds a value that is not an address
// (garbage, "unknown", an obfuscated Forwarded node) before an untrusted
// address is found has no key (see [WithUnknownKey]). Only the rightmost 32
// hops are kept; a call whose client is beyond them has no key.
//
// Calling it again with the same header adds networks. It is an error to call
// it with no networks, a network that does not parse, a network of every
// address ("0.0.0.0/0", "::/0"), networks that together cover every address
// of a family ("0.0.0.0/1" and "128.0.0.0/1"; IPv4-mapped prefixes such as
// "::ffff:0.0.0.0/97" count as the IPv4 networks they map), a second
// header, together with a key that does not use the peer address
// ([WithKey], or [WithKeyFrom] without [PeerIP]), or with [NewClient].
func WithTrustedProxies(header ProxyHeader, networks ...string) Option {
	return func(c *config) error { return c.TrustProxies(pkg, clientip.Header(header), networks) }
}

// WithUnknownKey charges every call without a key to the one shared key
// instead of refusing it with codes.InvalidArgument. Such calls then share
// one budget: choose a key no real client can have, such as "unknown".
func WithUnknownKey(key string) Option {
	return func(c *config) error { return c.SetUnknownKey(pkg, key, MaxKeyBytes) }
}

// WithExempt exempts every call for which exempt returns true (health
// checks, reflection) from limiting: it passes straight to the handler (or,
// for a [Client], to the server), consumes nothing and gets no rate-limit
// metadata. exempt is called first, for every call, concurrently; it must
// be fast.
//
//	grpclimit.WithExempt(func(_ context.Context, method string) bool {
//		return strings.HasPrefix(method, "/grpc.health.v1.Health/")
//	})
func WithExempt(exempt func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) error {
		return limitopt.Set(pkg, &c.exempt, exempt, exempt == nil, "WithExempt(nil); pass a predicate of the full method, such as func(_ context.Context, m string) bool { return m == \"/grpc.health.v1.Health/Check\" }")
	}
}

// WithShadow puts the interceptors in shadow mode: every call is decided
// (and charged if admitted, since a denial consumes nothing) but none is
// refused. A call that would have been denied (or refused for lack of a
// key) is reported to hook, if not nil, and then passed on. Use it to count
// would-be denials before enforcing a limit.
//
// hook runs on the call's goroutine, before the handler (or, for a
// [Client], before the call is sent), concurrently for many calls: it must
// be safe for concurrent use and fast (increment a counter).
func WithShadow(hook func(ctx context.Context, d Denial)) Option {
	return func(c *config) error {
		c.shadow, c.hook = true, hook
		return nil
	}
}

// WithPolicy names the quota of an interceptor built by [New] or
// [NewClient] and gives the rule its limiter enforces, for the
// ratelimit-policy metadata and the QuotaFailure of a denial:
// WithPolicy("default", rule) sends `"default";q=100;w=60` for a rule of
// 100 per minute. Without it the quota is named "default" and its rule is
// the limiter's Rule() (or its Limits()), if it has that method (every
// store of packages atomic, locked and sharded does); otherwise
// ratelimit-policy is left out and a denial's QuotaFailure has no
// description, since a plain KeyedLimiter does not say its window.
//
// name is 1 to 64 printable ASCII characters; rule must be valid. It is an
// error with [ForService], whose rule book names its quotas, with
// [WithPolicyName], and over a limiter of composite limits, which no one
// rule describes (name its quota with WithPolicyName).
func WithPolicy(name string, rule admit.Rule) Option {
	return func(c *config) error { return c.SetPolicy(pkg, name, rule) }
}

// WithPolicyName names the quota of an interceptor built by [New] or
// [NewClient] without giving its rule, which stays the limiter's own: over
// a limiter of composite limits, the name of each rule's policy starts with
// it, `"per-client:token-bucket,10,1s";q=10;w=1`, as in httplimit.
//
// name is 1 to 64 printable ASCII characters. It is an error with
// [ForService], whose rule book names its quotas, and with [WithPolicy],
// which names the quota too.
func WithPolicyName(name string) Option {
	return func(c *config) error { return c.SetPolicyName(pkg, "WithPolicyName", name) }
}

// WithAPI makes api name the API of each call for a [ForService]
// interceptor, in place of the default: the full method name,
// "/package.Service/Method". WithAPI(func(m string) string { return
// strings.TrimPrefix(m, "/") }) matches book entries such as
// api.pkg.Service/Method; mapping several methods to one name gives them
// one budget.
//
// The Service keeps a limiter per API name for its lifetime, so api must
// return a bounded set of names. The methods a server registered are
// bounded; with a grpc.UnknownServiceHandler, the client chooses the method
// name, and api should map every unknown method to one name.
//
// It is an error with [New] and [NewClient].
func WithAPI(api func(fullMethod string) string) Option {
	return func(c *config) error {
		return limitopt.Set(pkg, &c.api, api, api == nil, "WithAPI(nil); pass a function of the full method, or leave the option out to use the full method name")
	}
}

// WithAdmittedMetadata makes the server interceptors send the ratelimit and
// ratelimit-policy metadata in the header of every admitted call too (and
// of every call shadow mode lets through), not only in the trailer of a
// denial: a client that wants to pace itself can read them with
// grpc.Header. It costs an admitted call a metadata map, its two values and
// grpc's merging of them into the header. It is an error with
// [NewClient], whose caller finds the delay in the error of a denial.
func WithAdmittedMetadata() Option {
	return func(c *config) error { c.admittedMD = true; return nil }
}

// WithObserver makes the interceptors report what they did with each call
// to o. [New], [ForService] and [NewClient] call o.Instrument once, when
// they have checked everything else, with Labels{Source: "grpc", Name: the
// quota's name ([WithPolicy]'s or [WithPolicyName]'s, else "default"),
// Limits: the limits the ratelimit-policy metadata describes (the
// limiter's Rule or Limits, or WithPolicy's rule; the zero Limits when none
// is known), Store: the limiter when it has Stats, as an [admit.Store] has};
// a ForService interceptor's labels are {Source: "grpc", Name: "service"},
// with the zero Limits and no Store. No key ever reaches o.
//
// Every call the interceptors limit (unary or stream, through the
// interceptors or [Interceptor.Limit]) is then counted once, as
// observe.Admitted (passed on), observe.Denied (refused with
// codes.ResourceExhausted), observe.ShadowDenied (denied, or without a key,
// and let through by [WithShadow]) or observe.Errored (without a key and
// refused with codes.InvalidArgument), with n = 1; a call without a key
// charged to [WithUnknownKey]'s key counts as the decision about that key.
// Calls exempted by [WithExempt] are not counted. The latency, given only
// when the instrument's Timed said so when it was resolved, is the time
// from deriving the key to the decision, the handler excluded.
//
// Under ForService, the per-API counts come from the Service's own
// policy.WithObserver, which counts each Check under the API's labels;
// this instrument counts what the gRPC layer did with the calls, those it
// refused for want of a key (which never reach the Service) and the
// denials shadow mode let through included.
//
// Without the option a call pays one nil check for observation; with it,
// one call of Observe, with no allocation and no map lookup. A nil o is an
// error wrapping [admit.ErrInvalidOption]: leave the option out to observe
// nothing.
func WithObserver(o observe.Observer) Option {
	return func(c *config) error { return c.SetObserver(pkg, o) }
}

// Denial describes a call the interceptors denied, would have denied in
// shadow mode, or could not key, as given to a [WithShadow] hook.
type Denial struct {
	// Key is the key the call was charged to: the user, for a Service.
	// Empty when Unkeyed.
	Key string
	// API is the API name of a Service's call; empty for a KeyedLimiter.
	API string
	// FullMethod is the call's method, "/package.Service/Method"; empty
	// for a call seen by [Interceptor.Limit] outside a server's context.
	FullMethod string
	// Policy is the name of the quota that denied the call, as the
	// ratelimit metadata names it before escaping: "default", "api./login",
	// or for composite limits the policy of the rule that denied,
	// "default:fixed-window,1000,1h". Empty when Unkeyed.
	Policy string
	// Decision is the limiter's answer; the zero Decision when Unkeyed.
	Decision admit.Decision
	// Unkeyed reports a call whose key could not be derived, which is
	// refused (codes.InvalidArgument) rather than denied by a limit.
	Unkeyed bool
}
