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
// Each request is charged to a key: by default the client's IP address, taken
// from the connection, an IPv6 address reduced to its /64 network. Forwarding
// headers are ignored unless [WithTrustedProxies] names the networks of the
// proxies in front of the server and the one header they write. [WithKeyFrom]
// builds keys from parts of the request and [WithKey] takes any function. With
// a Service the key is the user and the API the matched route ([WithAPI]).
//
// A request whose key cannot be derived (a RemoteAddr that is not an IP
// address, a missing key header, a malformed forwarding header from a trusted
// proxy, a key longer than [MaxKeyBytes]) is rejected with 400 Bad Request and
// a problem body, never let through unlimited and never charged to a key an
// attacker could choose. [WithUnknownKey] charges such requests to one shared
// key instead.
//
// Every limited response carries the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 ([WithLegacyHeaders] adds the
// X-RateLimit ones). A denied request gets 429 Too Many Requests, Retry-After
// and an RFC 9457 problem body naming the quota; [WithDenyHandler] writes the
// response instead. Over composite limits (an [admit.CompositeStore], or a
// Service entry of several rules) each rule is a policy of its own, and
// RateLimit reports the rule that bound the decision. [WithShadow] decides
// and sets the headers but lets every request through, reporting each
// would-be denial to a hook; [WithExempt] exempts requests (health checks)
// from limiting altogether; [WithObserver] counts what the middleware did,
// with no allocation, no lookup and no key on the request's path.
//
// Constructors return errors wrapping [admit.ErrInvalidOption], never panic. A
// Middleware is immutable and safe for concurrent use. An admitted request
// costs, beyond the limiter's own work, two small allocations
// (BenchmarkHandler).
//
// docs/http.md has the whole story: the keys and how the client is found
// behind trusted proxies, each header field and its rounding, composite
// limits, the problem body, shadow mode, the observer's labels and outcomes,
// and the measured costs.
package httplimit
