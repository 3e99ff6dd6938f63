package grpclimit

import (
	"context"

	"google.golang.org/grpc"
)

// UnaryClientInterceptor returns the interceptor that limits the unary
// calls a client sends: install it with grpc.WithChainUnaryInterceptor (or
// grpc.WithUnaryInterceptor). A denied call is not sent: it fails at once
// with codes.ResourceExhausted and the details of a server's denial
// (RetryInfo, QuotaFailure).
func (c *Client) UnaryClientInterceptor() grpc.UnaryClientInterceptor { return c.unary }

func (c *Client) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	v := c.decide(ctx, method)
	switch v.out {
	case deny:
		return denial(&v, true)
	case refuse:
		return errClientUnkeyed
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// StreamClientInterceptor returns the interceptor that limits the
// streaming calls a client opens: install it with
// grpc.WithChainStreamInterceptor (or grpc.WithStreamInterceptor). A stream
// is one call, decided when it opens; a denied stream is not opened.
func (c *Client) StreamClientInterceptor() grpc.StreamClientInterceptor { return c.stream }

func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	v := c.decide(ctx, method)
	switch v.out {
	case deny:
		return nil, denial(&v, true)
	case refuse:
		return nil, errClientUnkeyed
	}
	return streamer(ctx, desc, cc, method, opts...)
}
