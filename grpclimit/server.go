package grpclimit

import (
	"context"

	"google.golang.org/grpc"
)

// UnaryServerInterceptor returns the interceptor that limits the unary
// calls of a server: install it with grpc.ChainUnaryInterceptor (or
// grpc.UnaryInterceptor). A denied call never reaches its handler: it ends
// with the error of the package doc's "Denials", the ratelimit metadata in
// its trailer.
func (i *Interceptor) UnaryServerInterceptor() grpc.UnaryServerInterceptor { return i.unary }

func (i *Interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	v := i.decide(ctx, info.FullMethod)
	switch v.out {
	case deny:
		grpc.SetTrailer(ctx, metadataOf(&v)) //nolint:errcheck // only fails outside a server's call
		return nil, denial(&v, false)
	case refuse:
		return nil, errUnkeyed
	}
	if v.decided && i.cfg.admittedMD {
		grpc.SetHeader(ctx, metadataOf(&v)) //nolint:errcheck // as SetTrailer
	}
	return handler(ctx, req)
}

// StreamServerInterceptor returns the interceptor that limits the
// streaming calls of a server: install it with grpc.ChainStreamInterceptor
// (or grpc.StreamInterceptor). A stream is one call, decided when it
// opens; its messages are not counted. A denied stream never reaches its
// handler.
func (i *Interceptor) StreamServerInterceptor() grpc.StreamServerInterceptor { return i.stream }

func (i *Interceptor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	v := i.decide(ss.Context(), info.FullMethod)
	switch v.out {
	case deny:
		ss.SetTrailer(metadataOf(&v))
		return denial(&v, false)
	case refuse:
		return errUnkeyed
	}
	if v.decided && i.cfg.admittedMD {
		ss.SetHeader(metadataOf(&v)) //nolint:errcheck // fails only once headers are sent, which they are not yet
	}
	return handler(srv, ss)
}

// Limit decides the server call of ctx, as the interceptors do, and
// returns nil to let it through or the error to refuse it with: it makes an
// Interceptor a Limiter of go-grpc-middleware's
// interceptors/ratelimit package, so that
// ratelimit.UnaryServerInterceptor(i) and
// ratelimit.StreamServerInterceptor(i) limit with it. The method is
// grpc.Method(ctx)'s; the rate-limit metadata is set on the call with
// grpc.SetTrailer (and grpc.SetHeader, with [WithAdmittedMetadata]), so it
// reaches the client.
//
// That package refuses a call with a status of its own,
// codes.ResourceExhausted and a message that quotes the error's: the
// RetryInfo and QuotaFailure details, and the InvalidArgument code of a
// call without a key, do not survive it. Install the Interceptor's own
// interceptors to keep them.
func (i *Interceptor) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	v := i.decide(ctx, method)
	switch v.out {
	case deny:
		grpc.SetTrailer(ctx, metadataOf(&v)) //nolint:errcheck // only fails outside a server's call
		return denial(&v, false)
	case refuse:
		return errUnkeyed
	}
	if v.decided && i.cfg.admittedMD {
		grpc.SetHeader(ctx, metadataOf(&v)) //nolint:errcheck // as SetTrailer
	}
	return nil
}
