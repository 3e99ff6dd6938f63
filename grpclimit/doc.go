// Package grpclimit rate-limits gRPC calls with an [admit.KeyedLimiter] or
// a [policy.Service]: server interceptors (unary and stream) that refuse a
// call over its limit with codes.ResourceExhausted and tell the client when
// to retry, client interceptors that hold back outgoing calls ([NewClient]),
// and a Limiter for go-grpc-middleware's ratelimit package
// ([Interceptor.Limit]).
//
//	rule, _ := admit.ParseRule("token-bucket,100,1m")
//	lim, err := admitatomic.New(rule) // one budget per key: the peer's IP address
//	ic, err := grpclimit.New(lim)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(ic.StreamServerInterceptor()))
//
// It is a module of its own (github.com/admit-go/admit/grpclimit), so that
// the core module does not depend on gRPC. docs/grpc.md has the whole
// story: keys and trusted proxies, the details and metadata of a denial,
// shadow mode, outgoing calls, go-grpc-middleware, observing and the
// measured costs.
//
// Each call is charged to a key: by default ([New], [ForService]) the
// caller's IP address, from the connection, by httplimit's rules (an IPv6
// address reduced to its /64 network); [WithTrustedProxies], [WithKeyFrom]
// and [WithKey] derive it otherwise. With a Service the key is the user and
// the API the full method name, "/package.Service/Method" ([WithAPI] maps it
// otherwise). A call without a key (a missing metadata value, a peer that is
// not an address, a malformed forwarding header from a trusted proxy, a key
// over [MaxKeyBytes]) is refused with codes.InvalidArgument, never let
// through unlimited; [WithUnknownKey] charges such calls to one shared key
// instead. A stream is one call, decided when it opens.
//
// # Denials
//
// A denied call never reaches its handler. It ends with
// codes.ResourceExhausted and two details: errdetails.RetryInfo, whose
// RetryDelay is the Decision's RetryAfter in whole seconds, rounded up and
// at least one second; and errdetails.QuotaFailure, one violation whose
// Subject is the policy's name (never the key), Description the rule's text
// and QuotaValue the rule's Limit. Its trailer carries the metadata
// [MetadataRateLimit] and [MetadataPolicy], byte for byte the values of
// httplimit's RateLimit and RateLimit-Policy header fields:
//
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=0;t=5
//
// [WithAdmittedMetadata] sends them on admitted calls too. [WithShadow]
// decides every call but refuses none, reporting each would-be denial to a
// hook; [WithExempt] exempts methods (health checks) altogether.
// [NewClient]'s interceptors fail a denied outgoing call at once, unsent,
// with the same status. [WithObserver] counts what the interceptors did,
// with no allocation, no lookup and no key on the call's path.
//
// Constructors return errors wrapping [admit.ErrInvalidOption], never
// panic. An admitted unary call costs, beyond the limiter's own work, no
// allocation for a constant key and one for a key derived from the call
// (TestUnaryAllocations).
package grpclimit
