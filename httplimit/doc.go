// Package httplimit is net/http middleware that rate-limits requests with an
// [admit.KeyedLimiter] or a [policy.Service], and tells clients where they
// stand with the standard headers.
//
//	rule, _ := admit.ParseRule("token-bucket,100,1m")
//	lim, err := admitatomic.New(rule) // many keys (see package admit, "Variants")
//	if err != nil { ... }
//	mw, err := httplimit.New(lim) // RateLimit-Policy from lim.Rule()
//	if err != nil { ... }
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// or, with rules from a file, one budget per (client, route):
//
//	book, err := policy.Load("rules.conf")
//	svc, err := policy.NewService(book)
//	mw, err := httplimit.ForService(svc)
//	mux.Handle("POST /login", mw.Handler(login)) // the route is the API: "/login"
//
// # Keys
//
// Each request is charged to a key. By default the key is the client's IP
// address, taken from the connection ([http.Request.RemoteAddr]), an IPv6
// address reduced to its /64 network (a single host commonly owns a whole
// /64, so per-address IPv6 limits are trivially evaded): "203.0.113.7",
// "2001:db8:1:2::/64". An IPv4-mapped IPv6 address counts as its IPv4 address.
//
// Forwarding headers are ignored unless [WithTrustedProxies] names the
// networks of the proxies in front of the server, and which one header they
// write (X-Forwarded-For or Forwarded). Only then, and only for a request whose
// connection comes from a trusted proxy, the client is the rightmost address
// of that header that is not itself a trusted proxy: everything to its left
// was written by the client and may be forged.
//
// [WithKeyFrom] builds keys from parts of the request instead (the client IP,
// a request header such as an API key, the method, the path, the matched
// route) and [WithKey] takes any function. With a [policy.Service] the key is
// the user; the API is the route (see [WithAPI]).
//
// A request whose key cannot be derived (a RemoteAddr that is not an IP
// address, a missing key header, a malformed forwarding header from a trusted
// proxy, a key longer than [MaxKeyBytes]) is rejected with 400 Bad Request and
// a problem body, never let through unlimited and never charged to a key an
// attacker could choose. [WithUnknownKey] charges such requests to one shared
// key instead.
//
// # Headers
//
// Every limited response carries the fields of draft-ietf-httpapi-ratelimit-headers-10:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=50;t=30
//
// q is the rule's Limit and w its Window in whole seconds, rounded up (a
// 1500ms window is w=2). r is [admit.Decision.Remaining]. t is whole seconds
// rounded up: on an admitted request the time until the quota is whole again
// ([admit.Decision.ResetAfter]); on a denied one the time until the request
// would pass ([admit.Decision.RetryAfter]). A denied request also gets
// Retry-After, the same whole seconds rounded up from the exact RetryAfter and
// never 0: a 62.5ms wait is "Retry-After: 1". [WithLegacyHeaders] adds
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (delta
// seconds, as t). If a handler outside the middleware already set RateLimit or
// RateLimit-Policy (another limiter), the middleware adds its item as another
// field line, which the structured-field list syntax joins.
//
// # Composite limits
//
// Over a store of [admit.Limits] of two or more rules (an
// [admit.CompositeStore], from the NewLimits of packages atomic, locked and
// sharded, or redisstore's Keyed of NewLimits: any KeyedLimiter with Limits
// and AllowNWhich), or a Service entry of such limits, each rule is a policy of its
// own, named after the quota, a colon and the rule's text, and RateLimit
// reports the one rule that bound the decision (on an admission the rule
// with the fewest requests left, on a denial the rule with the longest
// wait), for "token-bucket,10,1s + fixed-window,1000,1h":
//
//	RateLimit-Policy: "default:token-bucket,10,1s";q=10;w=1, "default:fixed-window,1000,1h";q=1000;w=3600
//	RateLimit: "default:token-bucket,10,1s";r=9;t=1
//
// r is the decision's Remaining, the binding rule's. t is computed as for a
// single rule, for that rule: on a denial its wait, which is the request's
// (Retry-After says the same); on an admission the wait until that rule is
// whole again, which the decision bounds but does not carry (its ResetAfter
// is the wait until every rule is whole), so t is the smaller of that and
// what the rule's algorithm bounds its own wait by: never less than the
// exact wait, equal to it when the binding rule is the last to become whole,
// and within one token's refill for a token bucket. A 429's problem body
// names the binding rule's policy in "violated-policies":
// "default:fixed-window,1000,1h". A composite store of one rule is that
// rule, with a single rule's fields.
//
// # Denials
//
// A denied request gets 429 Too Many Requests and an application/problem+json
// body (RFC 9457) of the draft's quota-exceeded problem type, naming the quota:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"],"detail":"Too many requests; retry in 5s."}
//
// [WithDenyHandler] writes the response instead. [WithShadow] decides and sets
// the headers but lets every request through, reporting each would-be denial
// to a hook, so that a limit can be measured before it is enforced.
// [WithExempt] exempts requests (health checks) from limiting altogether.
//
// # Observing
//
// [WithObserver] reports each limited request to an [admit.Observer] as
// admitted, denied, shadow-denied or errored (without a key and refused),
// on one [admit.Instrument] resolved when the middleware is built: no
// allocation, no lookup and no key on the request's path.
//
// # Cost
//
// An admitted request costs, beyond the limiter's own work, two small
// allocations: one string holding every header value (rendered with
// strconv.AppendInt into a stack buffer) and one []string backing every header
// the middleware sets; the RateLimit-Policy value is rendered once, when the
// middleware is built (for a Service, once per book). Deriving an IPv4 key from
// RemoteAddr allocates nothing; an IPv6 key, or a key of several parts,
// allocates its string. See BenchmarkHandler.
package httplimit
