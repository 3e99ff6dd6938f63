package grpclimit_test

import (
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/grpclimit"
)

// An Interceptor is a Limiter of go-grpc-middleware's ratelimit package.
var _ ratelimit.Limiter = (*grpclimit.Interceptor)(nil)

// TestRatelimitMiddleware: through go-grpc-middleware's ratelimit
// interceptors, an Interceptor admits exactly as its own interceptors do;
// a denial is ResourceExhausted with the rate-limit trailer, its message
// quoted in that package's (whose status drops the details).
func TestRatelimitMiddleware(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "fixed-window,3,1m", fake), grpclimit.WithObserver(o))
	require.NoError(t, err)
	s := serve(t,
		grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(ic)),
		grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(ic)))
	c := s.dial(t, "203.0.113.7:4711")

	var got []codes.Code
	for range 2 {
		got = append(got, check(t, c))
	}
	stream, err := c.Watch(ctx(t), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	got = append(got, status.Code(err))
	var trailer metadata.MD
	_, err = c.Check(ctx(t), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	got = append(got, status.Code(err))
	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}, got)
	assert.Contains(t, status.Convert(err).Message(), `quota "default" exceeded; retry in 60s`)
	assert.Equal(t, []string{`"default";r=0;t=60`}, trailer.Get(grpclimit.MetadataRateLimit))
	assert.Equal(t, []string{`"default";q=3;w=60`}, trailer.Get(grpclimit.MetadataPolicy))

	stream, err = c.Watch(ctx(t), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "stream")
	assert.Equal(t, int64(3), s.handled.Load())
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 3, "denied": 2}, cnt.counts(t))

	fake.Advance(time.Minute)
	assert.Equal(t, codes.OK, check(t, c))
}
