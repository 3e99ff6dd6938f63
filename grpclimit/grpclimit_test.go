package grpclimit_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/grpclimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
)

// interceptors returns the server options that install ic's interceptors.
func interceptors(ic *grpclimit.Interceptor) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(ic.StreamServerInterceptor()),
	}
}

// TestUnaryCounts: each peer address has its own budget of exactly three
// calls a minute, on a fake clock; a denied call never reaches the
// service; a minute later the budget is whole again.
func TestUnaryCounts(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "fixed-window,3,1m", fake), grpclimit.WithObserver(o))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	alice, bob := s.dial(t, "203.0.113.7:4711"), s.dial(t, "198.51.100.9:80")

	var got []codes.Code
	for range 5 {
		got = append(got, check(t, alice))
	}
	got = append(got, check(t, bob))
	fake.Advance(59 * time.Second)
	got = append(got, check(t, alice))
	fake.Advance(time.Second)
	got = append(got, check(t, alice))
	OK, RE := codes.OK, codes.ResourceExhausted
	assert.Equal(t, []codes.Code{OK, OK, OK, RE, RE, OK, RE, OK}, got)
	assert.Equal(t, int64(5), s.handled.Load(), "calls that reached the service")

	c, l := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 5, "denied": 3}, c.counts(t))
	assert.Equal(t, "grpc", l.Source)
	assert.Equal(t, "default", l.Name)
	assert.Equal(t, mustLimits(t, "fixed-window,3,1m"), l.Limits)
}

func mustLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// TestDenialDetails: a denial's status carries RetryInfo (RetryAfter in
// whole seconds, rounded up, at least one) and QuotaFailure (the policy,
// its rule, its limit), and its trailer the RateLimit and RateLimit-Policy
// values httplimit would send.
func TestDenialDetails(t *testing.T) {
	fake := clock.NewFake()
	ic, err := grpclimit.New(limiter(t, "fixed-window,3,1m", fake))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	c := s.dial(t, "203.0.113.7:4711")
	for range 3 {
		require.Equal(t, codes.OK, check(t, c))
	}
	for _, step := range []struct {
		advance   time.Duration
		retry     time.Duration
		rateLimit string
	}{
		{0, 60 * time.Second, `"default";r=0;t=60`},
		{59*time.Second + 500*time.Millisecond, time.Second, `"default";r=0;t=1`},
		{0, time.Second, `"default";r=0;t=1`},
	} {
		fake.Advance(step.advance)
		var trailer metadata.MD
		_, err := c.Check(ctx(t), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		ri, qf := details(t, err)
		assert.Equal(t, step.retry, ri.GetRetryDelay().AsDuration(), "RetryInfo at %v", fake.Now())
		require.Len(t, qf.GetViolations(), 1)
		v := qf.GetViolations()[0]
		assert.Equal(t, "default", v.GetSubject(), "QuotaFailure subject: the policy, never the key")
		assert.Equal(t, "fixed-window,3,1m", v.GetDescription())
		assert.Equal(t, int64(3), v.GetQuotaValue())
		assert.Equal(t, []string{step.rateLimit}, trailer.Get(grpclimit.MetadataRateLimit))
		assert.Equal(t, []string{`"default";q=3;w=60`}, trailer.Get(grpclimit.MetadataPolicy))
		assert.Contains(t, status.Convert(err).Message(), `quota "default" exceeded; retry in `)
		assert.NotContains(t, status.Convert(err).Message(), "203.0.113.7", "the message holds no key")
	}
}

// TestDenialComposite: over composite limits the denial names the rule
// that denied, as its own policy, and the policy lists every rule.
func TestDenialComposite(t *testing.T) {
	fake := clock.NewFake()
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,2,1h")
	lim, err := locked.NewLimits(limits, admit.WithClock(fake))
	require.NoError(t, err)
	ic, err := grpclimit.New(lim, grpclimit.WithPolicyName("api"))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	c := s.dial(t, "203.0.113.7:4711")
	check(t, c)
	check(t, c)
	var trailer metadata.MD
	_, err = c.Check(ctx(t), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	ri, qf := details(t, err)
	assert.Equal(t, time.Hour, ri.GetRetryDelay().AsDuration())
	assert.Equal(t, "api:fixed-window,2,1h", qf.GetViolations()[0].GetSubject())
	assert.Equal(t, "fixed-window,2,1h", qf.GetViolations()[0].GetDescription())
	assert.Equal(t, []string{`"api:token-bucket,10,1s";q=10;w=1, "api:fixed-window,2,1h";q=2;w=3600`}, trailer.Get(grpclimit.MetadataPolicy))
	assert.Equal(t, []string{`"api:fixed-window,2,1h";r=0;t=3600`}, trailer.Get(grpclimit.MetadataRateLimit))
}

// TestAdmittedMetadata: admitted calls carry the rate-limit metadata in
// their header only with WithAdmittedMetadata.
func TestAdmittedMetadata(t *testing.T) {
	fake := clock.NewFake()
	for _, with := range []bool{false, true} {
		var opts []grpclimit.Option
		if with {
			opts = append(opts, grpclimit.WithAdmittedMetadata())
		}
		ic, err := grpclimit.New(limiter(t, "fixed-window,3,1m", fake), opts...)
		require.NoError(t, err)
		s := serve(t, interceptors(ic)...)
		c := s.dial(t, "203.0.113.7:4711")
		var header metadata.MD
		_, err = c.Check(ctx(t), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		require.NoError(t, err)
		if with {
			assert.Equal(t, []string{`"default";r=2;t=60`}, header.Get(grpclimit.MetadataRateLimit))
			assert.Equal(t, []string{`"default";q=3;w=60`}, header.Get(grpclimit.MetadataPolicy))
		} else {
			assert.Empty(t, header.Get(grpclimit.MetadataRateLimit))
			assert.Empty(t, header.Get(grpclimit.MetadataPolicy))
		}

		stream, err := c.Watch(ctx(t), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.NoError(t, err)
		header, err = stream.Header()
		require.NoError(t, err)
		if with {
			assert.Equal(t, []string{`"default";r=1;t=60`}, header.Get(grpclimit.MetadataRateLimit), "stream")
		} else {
			assert.Empty(t, header.Get(grpclimit.MetadataRateLimit), "stream")
		}
	}
}

// TestStream: a stream is one call, decided when it opens; a denied
// stream never reaches its handler and ends with the denial and its
// trailer.
func TestStream(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "fixed-window,2,1m", fake), grpclimit.WithObserver(o))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	c := s.dial(t, "203.0.113.7:4711")
	for i := range 2 {
		stream, err := c.Watch(ctx(t), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		res, err := stream.Recv()
		require.NoError(t, err, "stream %d", i)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, res.GetStatus())
	}
	stream, err := c.Watch(ctx(t), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	ri, _ := details(t, err)
	assert.Equal(t, time.Minute, ri.GetRetryDelay().AsDuration())
	assert.Equal(t, []string{`"default";r=0;t=60`}, stream.Trailer().Get(grpclimit.MetadataRateLimit))
	assert.Equal(t, codes.ResourceExhausted, check(t, c), "streams and unary calls share the key's budget")
	assert.Equal(t, int64(2), s.handled.Load())
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 2, "denied": 2}, cnt.counts(t))
}

// TestTrustedProxies: forwarding metadata is ignored from a peer that is
// not a trusted proxy (a client cannot choose its key by sending it), and
// honoured from a trusted one, by httplimit's rules.
func TestTrustedProxies(t *testing.T) {
	rec := &recorder{}
	ic, err := grpclimit.New(rec, grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "10.0.0.0/8"))
	require.NoError(t, err)
	fwd, err := grpclimit.New(rec, grpclimit.WithTrustedProxies(grpclimit.Forwarded, "10.0.0.0/8", "2001:db8:ffff::/48"))
	require.NoError(t, err)
	xffServer, fwdServer := serve(t, interceptors(ic)...), serve(t, interceptors(fwd)...)

	for _, tc := range []struct {
		name   string
		s      *server
		from   string
		md     []string // key, value, …
		key    string   // "" when refused for want of a key
		reason string
	}{
		{"untrusted peer, spoofed header", xffServer, "203.0.113.7:1", []string{"x-forwarded-for", "198.51.100.1"}, "203.0.113.7", "spoofing refused"},
		{"untrusted peer, spoofed forwarded", fwdServer, "203.0.113.7:1", []string{"forwarded", "for=198.51.100.1"}, "203.0.113.7", "spoofing refused"},
		{"trusted peer", xffServer, "10.0.0.1:1", []string{"x-forwarded-for", "198.51.100.1"}, "198.51.100.1", ""},
		{"trusted peer, forged prefix", xffServer, "10.0.0.1:1", []string{"x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.2"}, "198.51.100.7", "the rightmost untrusted hop"},
		{"trusted peer, two lines", xffServer, "10.0.0.1:1", []string{"x-forwarded-for", "6.6.6.6", "x-forwarded-for", "198.51.100.7"}, "198.51.100.7", ""},
		{"trusted peer, no header", xffServer, "10.0.0.1:1", nil, "10.0.0.1", "the proxy itself"},
		{"trusted peer, other header", xffServer, "10.0.0.1:1", []string{"forwarded", "for=198.51.100.1"}, "10.0.0.1", "only the named header"},
		{"trusted peer, garbage", xffServer, "10.0.0.1:1", []string{"x-forwarded-for", "198.51.100.1, garbage"}, "", "no key"},
		{"trusted peer, forwarded", fwdServer, "10.0.0.1:1", []string{"forwarded", `for="[2001:db8:1:2::7]:443";proto=https, for=10.0.0.2`}, "2001:db8:1:2::/64", "IPv6 by /64"},
		{"trusted IPv6 peer", fwdServer, "[2001:db8:ffff::1]:1", []string{"forwarded", "for=198.51.100.1"}, "198.51.100.1", ""},
		{"untrusted IPv6 peer", xffServer, "[2001:db8:1:2::7]:1", []string{"x-forwarded-for", "198.51.100.1"}, "2001:db8:1:2::/64", "IPv6 by /64"},
		{"mapped IPv4 peer", xffServer, "[::ffff:10.0.0.1]:1", []string{"x-forwarded-for", "198.51.100.1"}, "198.51.100.1", "a mapped address is its IPv4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.s.dial(t, tc.from)
			ctx := metadata.AppendToOutgoingContext(ctx(t), tc.md...)
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
			if tc.key == "" {
				assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", tc.reason, err)
				assert.Empty(t, rec.last())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.key, rec.last(), tc.reason)
		})
	}
}

// TestSpoofingRefused: a client that writes a fresh x-forwarded-for on
// every call still spends one budget, its own address's.
func TestSpoofingRefused(t *testing.T) {
	fake := clock.NewFake()
	ic, err := grpclimit.New(limiter(t, "fixed-window,2,1m", fake), grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "10.0.0.0/8"))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	attacker, proxy := s.dial(t, "203.0.113.7:1"), s.dial(t, "10.0.0.1:1")
	var got, viaProxy []codes.Code
	for _, fake := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		ctx := metadata.AppendToOutgoingContext(ctx(t), "x-forwarded-for", fake)
		_, err := attacker.Check(ctx, &healthpb.HealthCheckRequest{})
		got = append(got, status.Code(err))
		_, err = proxy.Check(ctx, &healthpb.HealthCheckRequest{})
		viaProxy = append(viaProxy, status.Code(err))
	}
	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}, got, "from an untrusted peer")
	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.OK}, viaProxy, "three clients behind a trusted proxy")
}

// TestConcurrent: 200 concurrent calls from one client against a limit of
// 50, the clock frozen: exactly 50 admitted, 150 denied.
func TestConcurrent(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "token-bucket,50,1m", fake), grpclimit.WithObserver(o))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	c := s.dial(t, "203.0.113.7:4711")
	const calls = 200
	codesSeen := make([]codes.Code, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			codesSeen[i] = check(t, c)
		})
	}
	close(start)
	wg.Wait()
	n := map[codes.Code]int{}
	for _, code := range codesSeen {
		n[code]++
	}
	assert.Equal(t, map[codes.Code]int{codes.OK: 50, codes.ResourceExhausted: 150}, n)
	assert.Equal(t, int64(50), s.handled.Load())
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 50, "denied": 150}, cnt.counts(t))
}

// TestUnkeyed: a call whose peer is not an IP address is refused with
// InvalidArgument, or charged to WithUnknownKey's key; so is a call
// without the metadata its key needs.
func TestUnkeyed(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "fixed-window,1,1m", fake), grpclimit.WithObserver(o))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	_, err = s.dial(t, "-").Check(ctx(t), &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "cannot tell which client")
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"errored": 1}, cnt.counts(t))
	assert.Zero(t, s.handled.Load())

	ic, err = grpclimit.New(limiter(t, "fixed-window,1,1m", fake), grpclimit.WithUnknownKey("unknown"))
	require.NoError(t, err)
	s = serve(t, interceptors(ic)...)
	c := s.dial(t, "-")
	assert.Equal(t, []codes.Code{codes.OK, codes.ResourceExhausted}, []codes.Code{check(t, c), check(t, c)}, "one shared budget")

	rec := &recorder{}
	ic, err = grpclimit.New(rec, grpclimit.WithKeyFrom(grpclimit.Metadata("X-API-Key"), grpclimit.FullMethod()))
	require.NoError(t, err)
	c = serve(t, interceptors(ic)...).dial(t, "203.0.113.7:1")
	assert.Equal(t, codes.InvalidArgument, check(t, c), "no x-api-key")
	_, err = c.Check(metadata.AppendToOutgoingContext(ctx(t), "x-api-key", "k-1"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, "k-1\x00"+methodCheck, rec.last())
}

// TestShadow: shadow mode decides and charges as enforcing would, lets
// every call through, and reports each would-be denial to the hook.
func TestShadow(t *testing.T) {
	fake := clock.NewFake()
	var mu sync.Mutex
	var denials []grpclimit.Denial
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "fixed-window,2,1m", fake), grpclimit.WithObserver(o),
		grpclimit.WithShadow(func(_ context.Context, d grpclimit.Denial) {
			mu.Lock()
			defer mu.Unlock()
			denials = append(denials, d)
		}))
	require.NoError(t, err)
	s := serve(t, interceptors(ic)...)
	c := s.dial(t, "203.0.113.7:4711")
	for range 3 {
		assert.Equal(t, codes.OK, check(t, c))
	}
	assert.Equal(t, codes.OK, check(t, s.dial(t, "-")), "without a key")
	assert.Equal(t, int64(4), s.handled.Load())
	require.Len(t, denials, 2)
	d := denials[0]
	assert.Equal(t, "203.0.113.7", d.Key)
	assert.Equal(t, methodCheck, d.FullMethod)
	assert.Equal(t, "default", d.Policy)
	assert.False(t, d.Decision.Allowed)
	assert.Equal(t, time.Minute, d.Decision.RetryAfter)
	assert.Equal(t, grpclimit.Denial{FullMethod: methodCheck, Unkeyed: true}, denials[1])
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 2, "shadow_denied": 2}, cnt.counts(t))
}

// TestExempt: an exempt method is never limited, charged or counted.
func TestExempt(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	ic, err := grpclimit.New(limiter(t, "fixed-window,1,1m", fake), grpclimit.WithObserver(o),
		grpclimit.WithExempt(func(_ context.Context, m string) bool { return m == methodList }))
	require.NoError(t, err)
	c := serve(t, interceptors(ic)...).dial(t, "203.0.113.7:4711")
	for range 3 {
		_, err := c.List(ctx(t), &healthpb.HealthListRequest{})
		require.NoError(t, err)
	}
	assert.Equal(t, []codes.Code{codes.OK, codes.ResourceExhausted}, []codes.Code{check(t, c), check(t, c)})
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 1, "denied": 1}, cnt.counts(t))
}

// TestForService: each method is an API of the Service's book, by its full
// name; the denial names the book's entry.
func TestForService(t *testing.T) {
	fake := clock.NewFake()
	book, err := policy.Parse(strings.NewReader("default = fixed-window,3,1m\napi./grpc.health.v1.Health/List = fixed-window,1,1m\n"))
	require.NoError(t, err)
	svc, err := policy.NewService(book, admit.WithClock(fake))
	require.NoError(t, err)
	o := &observer{}
	ic, err := grpclimit.ForService(svc, grpclimit.WithObserver(o))
	require.NoError(t, err)
	c := serve(t, interceptors(ic)...).dial(t, "203.0.113.7:4711")
	var trailer metadata.MD
	_, err = c.List(ctx(t), &healthpb.HealthListRequest{})
	require.NoError(t, err)
	_, err = c.List(ctx(t), &healthpb.HealthListRequest{}, grpc.Trailer(&trailer))
	_, qf := details(t, err)
	assert.Equal(t, "api./grpc.health.v1.Health/List", qf.GetViolations()[0].GetSubject())
	assert.Equal(t, []string{`"api./grpc.health.v1.Health/List";q=1;w=60`}, trailer.Get(grpclimit.MetadataPolicy))
	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted},
		[]codes.Code{check(t, c), check(t, c), check(t, c), check(t, c)}, "Check: the default rule")
	cnt, l := o.only(t)
	assert.Equal(t, observe.Labels{Source: "grpc", Name: "service"}, l)
	assert.Equal(t, map[string]int64{"admitted": 4, "denied": 2}, cnt.counts(t))

	// WithAPI: every method of the service is one API.
	ic, err = grpclimit.ForService(svc, grpclimit.WithAPI(func(m string) string {
		return strings.TrimPrefix(m[:strings.LastIndexByte(m, '/')], "/")
	}))
	require.NoError(t, err)
	book2, err := policy.Parse(strings.NewReader("default = fixed-window,3,1m\napi.grpc.health.v1.Health = fixed-window,2,1m\n"))
	require.NoError(t, err)
	require.NoError(t, svc.Reload(book2))
	c = serve(t, interceptors(ic)...).dial(t, "198.51.100.1:1")
	_, err = c.List(ctx(t), &healthpb.HealthListRequest{})
	require.NoError(t, err)
	assert.Equal(t, []codes.Code{codes.OK, codes.ResourceExhausted}, []codes.Code{check(t, c), check(t, c)}, "List and Check share the service's budget")
}

// TestClient: a Client limits the calls it sends, one budget per method by
// default; a denied call is not sent and fails with the details of a
// server's denial.
func TestClient(t *testing.T) {
	fake := clock.NewFake()
	o := &observer{}
	cl, err := grpclimit.NewClient(limiter(t, "fixed-window,2,1m", fake), grpclimit.WithObserver(o))
	require.NoError(t, err)
	s := serve(t)
	c := s.dial(t, "203.0.113.7:4711",
		grpc.WithChainUnaryInterceptor(cl.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(cl.StreamClientInterceptor()))
	var got []codes.Code
	for range 3 {
		got = append(got, check(t, c))
	}
	_, err = c.List(ctx(t), &healthpb.HealthListRequest{})
	got = append(got, status.Code(err))
	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.OK}, got)
	assert.Equal(t, int64(3), s.handled.Load(), "the denied call was not sent")

	_, err = c.Check(ctx(t), &healthpb.HealthCheckRequest{})
	ri, qf := details(t, err)
	assert.Equal(t, time.Minute, ri.GetRetryDelay().AsDuration())
	assert.Equal(t, "default", qf.GetViolations()[0].GetSubject())
	assert.Contains(t, status.Convert(err).Message(), "not sent")

	for i := range 3 {
		stream, err := c.Watch(ctx(t), &healthpb.HealthCheckRequest{})
		if i < 2 {
			require.NoError(t, err)
			_, err = stream.Recv()
			require.NoError(t, err)
			continue
		}
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the third stream is not opened")
	}
	fake.Advance(time.Minute)
	assert.Equal(t, codes.OK, check(t, c))
	cnt, _ := o.only(t)
	assert.Equal(t, map[string]int64{"admitted": 6, "denied": 3}, cnt.counts(t))

	// Keyed by outgoing metadata; a call without it is refused unsent.
	rec := &recorder{}
	cl, err = grpclimit.NewClient(rec, grpclimit.WithKeyFrom(grpclimit.Metadata("tenant")))
	require.NoError(t, err)
	c = s.dial(t, "203.0.113.7:4711", grpc.WithChainUnaryInterceptor(cl.UnaryClientInterceptor()))
	_, err = c.Check(metadata.AppendToOutgoingContext(ctx(t), "tenant", "acme"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, "acme", rec.last())
	assert.Equal(t, codes.InvalidArgument, check(t, c))
}

// TestOptions: what the constructors refuse, each with an error wrapping
// admit.ErrInvalidOption that names the option.
func TestOptions(t *testing.T) {
	fake := clock.NewFake()
	lim := limiter(t, "fixed-window,1,1m", fake)
	svc, err := policy.NewService(mustBook(t, "default = fixed-window,1,1m\n"), admit.WithClock(fake))
	require.NoError(t, err)
	rule := admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Minute}
	composite, err := locked.NewLimits(mustLimits(t, "token-bucket,10,1s + fixed-window,30,1m"))
	require.NoError(t, err)
	newI := func(opts ...grpclimit.Option) error { _, err := grpclimit.New(lim, opts...); return err }
	forS := func(opts ...grpclimit.Option) error { _, err := grpclimit.ForService(svc, opts...); return err }
	newC := func(opts ...grpclimit.Option) error { _, err := grpclimit.NewClient(lim, opts...); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil limiter", func() error { _, err := grpclimit.New(nil); return err }(), "New(nil"},
		{"nil client limiter", func() error { _, err := grpclimit.NewClient(nil); return err }(), "NewClient(nil"},
		{"nil service", func() error { _, err := grpclimit.ForService(nil); return err }(), "ForService(nil"},
		{"nil option", newI(nil), "option 0 is nil"},
		{"nil key", newI(grpclimit.WithKey(nil)), "WithKey(nil)"},
		{"two keys", newI(grpclimit.WithKey(func(context.Context, string) (string, bool) { return "", false }), grpclimit.WithKeyFrom(grpclimit.PeerIP())), "both set the key"},
		{"no parts", newI(grpclimit.WithKeyFrom()), "no parts"},
		{"zero part", newI(grpclimit.WithKeyFrom(grpclimit.KeyPart{})), "zero KeyPart"},
		{"bad metadata", newI(grpclimit.WithKeyFrom(grpclimit.Metadata("x api"))), "not a metadata key"},
		{"proxies without ip", newI(grpclimit.WithKeyFrom(grpclimit.FullMethod()), grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "10.0.0.0/8")), "add PeerIP()"},
		{"proxies with WithKey", newI(grpclimit.WithKey(func(context.Context, string) (string, bool) { return "", false }), grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "10.0.0.0/8")), "WithKey's function"},
		{"every address", newI(grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "0.0.0.0/0")), "trusts every address"},
		{"bad header", newI(grpclimit.WithTrustedProxies(7, "10.0.0.0/8")), "ProxyHeader(7) is not a forwarding header"},
		{"unknown key", newI(grpclimit.WithUnknownKey("")), "WithUnknownKey"},
		{"nil exempt", newI(grpclimit.WithExempt(nil)), "WithExempt(nil)"},
		{"bad policy", newI(grpclimit.WithPolicy("", rule)), "a quota name is"},
		{"invalid rule", newI(grpclimit.WithPolicy("p", admit.Rule{})), "WithPolicy"},
		{"two names", newI(grpclimit.WithPolicy("p", rule), grpclimit.WithPolicyName("q")), "both name the quota"},
		{"policy over a composite", func() error { _, err := grpclimit.New(composite, grpclimit.WithPolicy("p", rule)); return err }(), "gives one rule"},
		{"api with New", newI(grpclimit.WithAPI(func(string) string { return "" })), "WithAPI applies to ForService"},
		{"nil api", forS(grpclimit.WithAPI(nil)), "WithAPI(nil)"},
		{"policy with ForService", forS(grpclimit.WithPolicyName("p")), "WithPolicyName applies to New"},
		{"nil observer", newI(grpclimit.WithObserver(nil)), "WithObserver(nil)"},
		{"peer with NewClient", newC(grpclimit.WithKeyFrom(grpclimit.PeerIP())), "PeerIP()"},
		{"proxies with NewClient", newC(grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "10.0.0.0/8")), "no peer address"},
		{"api with NewClient", newC(grpclimit.WithAPI(func(string) string { return "" })), "WithAPI applies to ForService"},
		{"metadata with NewClient", newC(grpclimit.WithAdmittedMetadata()), "WithAdmittedMetadata applies to a server"},
	} {
		if assert.ErrorIs(t, tc.err, admit.ErrInvalidOption, tc.name) {
			assert.Contains(t, tc.err.Error(), tc.want, tc.name)
			assert.True(t, strings.HasPrefix(tc.err.Error(), "grpclimit: "), "%s: %v", tc.name, tc.err)
		}
	}
}

func mustBook(t testing.TB, text string) *policy.Book {
	t.Helper()
	b, err := policy.Parse(strings.NewReader(text))
	require.NoError(t, err)
	return b
}

// TestLabels: the Store of the labels is the limiter when it reports its
// stats, and a limiter that does not say its rule has the zero Limits.
func TestLabels(t *testing.T) {
	o := &observer{}
	_, err := grpclimit.New(&recorder{}, grpclimit.WithObserver(o), grpclimit.WithPolicyName("per-peer"))
	require.NoError(t, err)
	_, l := o.only(t)
	assert.Equal(t, observe.Labels{Source: "grpc", Name: "per-peer"}, l)

	o = &observer{}
	_, err = grpclimit.New(stats{&recorder{}}, grpclimit.WithObserver(o))
	require.NoError(t, err)
	_, l = o.only(t)
	require.NotNil(t, l.Store)
	assert.Equal(t, 7, l.Store.Stats().Keys)
}

type stats struct{ admit.KeyedLimiter }

func (stats) Stats() admit.StoreStats { return admit.StoreStats{Keys: 7} }
