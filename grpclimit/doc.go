// Package grpclimit rate-limits gRPC calls with an [admit.KeyedLimiter] or
// a [policy.Service]: server interceptors (unary and stream) that refuse a
// call over its limit with codes.ResourceExhausted and tell the client when
// to retry, client interceptors that hold back outgoing calls, and a
// Limiter for go-grpc-middleware's ratelimit package.
//
//	rule, _ := admit.ParseRule("token-bucket,100,1m")
//	lim, err := admitatomic.New(rule) // one budget per key: the peer's IP address
//	ic, err := grpclimit.New(lim)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(ic.StreamServerInterceptor()))
//
// It is a module of its own (github.com/admit-go/admit/grpclimit), so that
// the core module does not depend on gRPC. docs/grpc.md has the whole
// story.
//
// # Keys
//
// Each call is charged to a key. By default ([New], [ForService]) the key
// is the caller's IP address, taken from the connection ([peer.Peer]), an
// IPv6 address reduced to its /64 network and an IPv4-mapped address
// counted as its IPv4 address, exactly as httplimit keys HTTP requests:
// "203.0.113.7", "2001:db8:1:2::/64". A call whose peer is not an IP
// address (a Unix socket) has no key. [WithTrustedProxies] honours the
// x-forwarded-for or forwarded metadata of proxies in front of the server,
// and only theirs, by httplimit's rules. [WithKeyFrom] builds keys from
// [PeerIP], [Metadata] (an API key, a tenant) and [FullMethod];
// [WithKey] takes any function. With a Service the key is the user and
// the API is the full method name, "/package.Service/Method" ([WithAPI]
// maps it otherwise).
//
// A call without a key (a missing metadata value, a peer that is not an
// address, a malformed forwarding header from a trusted proxy, a key over
// [MaxKeyBytes]) is refused with codes.InvalidArgument, never let through
// unlimited; [WithUnknownKey] charges such calls to one shared key
// instead.
//
// # Denials
//
// A denied call never reaches its handler. It ends with
// codes.ResourceExhausted and two details:
//
//   - errdetails.RetryInfo, whose RetryDelay is the Decision's RetryAfter
//     in whole seconds, rounded up and at least one second, as httplimit's
//     Retry-After: a 62.5ms wait is 1s, exactly 2s is 2s, 2s+1ns is 3s;
//   - errdetails.QuotaFailure, one violation whose Subject is the policy's
//     name ("default", a book entry such as "api./pkg.Svc/Get", or a
//     composite's rule, "default:fixed-window,1000,1h"; never the key),
//     Description the rule's text ("fixed-window,1000,1h", or empty when
//     the limiter does not say its rule) and QuotaValue the rule's Limit.
//
// Its trailer carries the rate-limit metadata: "ratelimit" and
// "ratelimit-policy" ([MetadataRateLimit], [MetadataPolicy]), whose values
// are byte for byte those of httplimit's RateLimit and RateLimit-Policy
// header fields (draft-ietf-httpapi-ratelimit-headers-10):
//
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=0;t=5
//
// Admitted calls carry no metadata unless [WithAdmittedMetadata] asks for
// it in their header (it costs a metadata map per call). [WithShadow]
// decides every call but refuses none, reporting each would-be denial to
// a hook; [WithExempt] exempts methods (health checks) altogether.
//
// # Streams, clients, go-grpc-middleware
//
// A stream is one call, decided when it opens; its messages are not
// counted. [NewClient] builds a [Client], whose interceptors limit the
// calls a client sends (one budget per method by default) and fail a
// denied call at once, unsent, with the same status. [Interceptor.Limit]
// makes an Interceptor a Limiter of
// github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit,
// whose interceptors then admit exactly as this package's own (their
// status drops the details; the metadata survives).
//
// # Observing
//
// [WithObserver] reports each limited call to an [admit.Observer] as
// admitted, denied, shadow-denied or errored (without a key and refused),
// on one [admit.Instrument] resolved when the interceptor is built: no
// allocation, no lookup and no key on the call's path.
//
// # Cost
//
// An admitted unary call costs, beyond the limiter's own work, no
// allocation for a constant key, and one for a key derived from the call:
// the text of the peer's address, or grpc's copy of the metadata values a
// key is read from. TestUnaryAllocations pins these numbers, and
// BenchmarkUnaryInterceptor compares the interceptor with
// go-grpc-middleware's over golang.org/x/time/rate.
package grpclimit
