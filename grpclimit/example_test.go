package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/grpclimit"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// exampleServer serves grpc's health service with opts on an in-memory
// listener and returns a client of it, with the client options copts, and
// a function that stops both.
func exampleServer(opts []grpc.ServerOption, copts ...grpc.DialOption) (healthpb.HealthClient, func()) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis) //nolint:errcheck // ends at Stop
	copts = append(copts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	cc, err := grpc.NewClient("passthrough:///bufnet", copts...)
	if err != nil {
		log.Fatal(err)
	}
	return healthpb.NewHealthClient(cc), func() { cc.Close(); srv.Stop() }
}

// describe prints what became of a call: OK, or the code, the retry delay
// and the quota of a denial.
func describe(err error) {
	st := status.Convert(err)
	if err == nil {
		fmt.Println("OK")
		return
	}
	var out []string
	out = append(out, st.Code().String())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			out = append(out, "retry in "+d.GetRetryDelay().AsDuration().String())
		case *errdetails.QuotaFailure:
			v := d.GetViolations()[0]
			out = append(out, "quota "+v.GetSubject()+" ("+v.GetDescription()+")")
		}
	}
	fmt.Println(strings.Join(out, ", "))
}

// Two calls a minute per API key: the third is refused with
// ResourceExhausted, a RetryInfo and a QuotaFailure.
func ExampleNew() {
	rule, err := admit.ParseRule("token-bucket,2,1m")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sharded.New(rule)
	if err != nil {
		log.Fatal(err)
	}
	// The default key is the peer's IP address; this in-memory listener
	// has none, so key by the caller's API key.
	ic, err := grpclimit.New(lim, grpclimit.WithKeyFrom(grpclimit.Metadata("x-api-key")))
	if err != nil {
		log.Fatal(err)
	}
	client, stop := exampleServer([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(ic.StreamServerInterceptor()),
	})
	defer stop()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-1")
	for range 3 {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		describe(err)
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted, retry in 30s, quota default (token-bucket,2,1m)
}

// An Interceptor is a Limiter of go-grpc-middleware's ratelimit package:
// its interceptors admit as the Interceptor's own do. Their status drops
// the Interceptor's RetryInfo and QuotaFailure, but not the ratelimit
// trailer, which Limit sets on the call.
func ExampleInterceptor_Limit() {
	rule, err := admit.ParseRule("token-bucket,1,1h")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sharded.New(rule)
	if err != nil {
		log.Fatal(err)
	}
	ic, err := grpclimit.New(lim, grpclimit.WithKeyFrom(grpclimit.FullMethod()))
	if err != nil {
		log.Fatal(err)
	}
	client, stop := exampleServer([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(ic)),
	})
	defer stop()

	for range 2 {
		var trailer metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		fmt.Println(status.Code(err), trailer.Get(grpclimit.MetadataPolicy))
	}
	// Output:
	// OK []
	// ResourceExhausted ["default";q=1;w=3600]
}

// A Client limits the calls a client sends, one budget per method by
// default: a denied call is not sent.
func ExampleNewClient() {
	rule, err := admit.ParseRule("token-bucket,1,1h")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sharded.New(rule)
	if err != nil {
		log.Fatal(err)
	}
	cl, err := grpclimit.NewClient(lim, grpclimit.WithPolicyName("outgoing"))
	if err != nil {
		log.Fatal(err)
	}
	client, stop := exampleServer(nil,
		grpc.WithChainUnaryInterceptor(cl.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(cl.StreamClientInterceptor()))
	defer stop()

	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	describe(err)
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	describe(err)
	_, err = client.List(context.Background(), &healthpb.HealthListRequest{})
	describe(err)
	// Output:
	// OK
	// ResourceExhausted, retry in 1h0m0s, quota outgoing (token-bucket,1,1h)
	// OK
}

// With a rule book, each method is an API: api./grpc.health.v1.Health/List
// limits List, and the default rule every other method.
func ExampleForService() {
	book, err := policy.Parse(strings.NewReader(`
default = token-bucket,100,1m
api./grpc.health.v1.Health/List = token-bucket,1,1m
`))
	if err != nil {
		log.Fatal(err)
	}
	svc, err := policy.NewService(book)
	if err != nil {
		log.Fatal(err)
	}
	ic, err := grpclimit.ForService(svc, grpclimit.WithKeyFrom(grpclimit.Metadata("x-api-key")))
	if err != nil {
		log.Fatal(err)
	}
	client, stop := exampleServer([]grpc.ServerOption{grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor())})
	defer stop()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-1")
	for range 2 {
		_, err := client.List(ctx, &healthpb.HealthListRequest{})
		describe(err)
	}
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	describe(err)
	// Output:
	// OK
	// ResourceExhausted, retry in 1m0s, quota api./grpc.health.v1.Health/List (token-bucket,1,1m)
	// OK
}

// Behind proxies that append the caller's address to x-forwarded-for, key
// by the address they saw: the header is honoured only from their
// networks, so no other client can choose its key.
func ExampleWithTrustedProxies() {
	rule, err := admit.ParseRule("token-bucket,100,1m")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sharded.New(rule)
	if err != nil {
		log.Fatal(err)
	}
	ic, err := grpclimit.New(lim, grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "10.0.0.0/8", "fd00::/8"))
	if err != nil {
		log.Fatal(err)
	}
	_ = grpc.NewServer(
		grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(ic.StreamServerInterceptor()),
	)
	_, err = grpclimit.New(lim, grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "0.0.0.0/1", "128.0.0.0/1"))
	fmt.Println(err)
	// Output:
	// grpclimit: admit: invalid option: WithTrustedProxies: the IPv4 networks 0.0.0.0/1, 128.0.0.0/1 cover every IPv4 address, which lets any client choose its key; name your proxies' networks
}
