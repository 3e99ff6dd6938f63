package grpclimit_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/grpclimit"
)

// The interceptors' own cost: each benchmark calls the interceptor function
// directly, with a handler that counts and returns, so that no network, no
// codec and no grpc.Server is measured. Names are key=value for benchstat.

// allowAll is a rule no benchmark exhausts: a million a millisecond.
var allowAll = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Millisecond}

// xRateLimiter is go-grpc-middleware's ratelimit example over
// golang.org/x/time/rate: a Limiter whose Limit calls rate.Limiter.Allow,
// one limiter for every call (x/time/rate has no keys).
type xRateLimiter struct{ l *rate.Limiter }

func (x xRateLimiter) Limit(context.Context) error {
	if !x.l.Allow() {
		return errLimited
	}
	return nil
}

var errLimited = context.DeadlineExceeded // any error: no benchmark is limited

// callContext is the context of a server's call from 203.0.113.7, with
// the metadata md.
func callContext(md metadata.MD) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("203.0.113.7:4711")),
	})
	return metadata.NewIncomingContext(ctx, md)
}

var checkInfo = &grpc.UnaryServerInfo{FullMethod: methodCheck}

// benchUnary runs an admitted unary call through intercept per iteration
// and reports the share admitted (1 when none is denied) as admitted/op.
func benchUnary(b *testing.B, intercept grpc.UnaryServerInterceptor, ctx context.Context) {
	admitted := 0
	handler := func(context.Context, any) (any, error) {
		admitted++
		return nil, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		intercept(ctx, nil, checkInfo, handler) //nolint:errcheck // a denial shows as admitted/op < 1
	}
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
}

// BenchmarkUnaryInterceptor compares the overhead of an admitted unary
// call: admit's Interceptor over atomic.New, the lock-free table, with one key (a constant
// WithKey), go-grpc-middleware's ratelimit.UnaryServerInterceptor over
// x/time/rate, and no limiting at all (the interceptor that calls the
// handler).
func BenchmarkUnaryInterceptor(b *testing.B) {
	b.Run("impl=admit", func(b *testing.B) {
		lim, err := admitatomic.New(allowAll)
		if err != nil {
			b.Fatal(err)
		}
		ic, err := grpclimit.New(lim, grpclimit.WithKey(func(context.Context, string) (string, bool) { return "k", true }))
		if err != nil {
			b.Fatal(err)
		}
		benchUnary(b, ic.UnaryServerInterceptor(), callContext(nil))
	})
	b.Run("impl=xtimerate", func(b *testing.B) {
		l := xRateLimiter{rate.NewLimiter(rate.Limit(1e9), 1_000_000)}
		benchUnary(b, ratelimit.UnaryServerInterceptor(l), callContext(nil))
	})
	b.Run("impl=none", func(b *testing.B) {
		none := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		}
		benchUnary(b, none, callContext(nil))
	})
}

// BenchmarkUnaryKey measures admit's Interceptor with the keys a server
// derives from the call: the peer's IPv4 address (the default; its key
// string is allocated), the client behind a trusted proxy's
// x-forwarded-for, an API key from the metadata, and the peer and the
// method together.
func BenchmarkUnaryKey(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []grpclimit.Option
		md   metadata.MD
	}{
		{"key=peer", nil, nil},
		{"key=xff", []grpclimit.Option{grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "203.0.113.0/24")},
			metadata.Pairs("x-forwarded-for", "198.51.100.1, 203.0.113.9")},
		{"key=metadata", []grpclimit.Option{grpclimit.WithKeyFrom(grpclimit.Metadata("x-api-key"))}, metadata.Pairs("x-api-key", "key-0123456789")},
		{"key=peer+method", []grpclimit.Option{grpclimit.WithKeyFrom(grpclimit.PeerIP(), grpclimit.FullMethod())}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lim, err := admitatomic.New(allowAll)
			if err != nil {
				b.Fatal(err)
			}
			ic, err := grpclimit.New(lim, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			benchUnary(b, ic.UnaryServerInterceptor(), callContext(bc.md))
		})
	}
}
