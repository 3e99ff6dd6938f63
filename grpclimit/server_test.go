package grpclimit_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
)

// The methods of grpc's health service, the tests' service.
const (
	methodCheck = "/grpc.health.v1.Health/Check"
	methodList  = "/grpc.health.v1.Health/List"
	methodWatch = "/grpc.health.v1.Health/Watch"
)

// peerListener is an in-memory listener whose connections say which
// address they come from, so that a test can be any client: the dialer
// writes the address as one line before gRPC's bytes, and Accept reads it
// into the connection's RemoteAddr, a *net.TCPAddr as a real server's
// connections have. The line "-" keeps bufconn's own address, which is not
// an IP address.
type peerListener struct{ *bufconn.Listener }

func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var line []byte
		b := make([]byte, 1)
		for err == nil && (len(line) == 0 || line[len(line)-1] != '\n') {
			if _, err = c.Read(b); err == nil {
				line = append(line, b[0])
			}
		}
		if err != nil {
			c.Close()
			continue
		}
		from := string(line[:len(line)-1])
		if from == "-" {
			return c, nil
		}
		ap, err := netip.ParseAddrPort(from)
		if err != nil {
			c.Close()
			continue
		}
		return peerConn{Conn: c, remote: net.TCPAddrFromAddrPort(ap)}, nil
	}
}

type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// server is a grpc.Server over a peerListener, serving grpc's health
// service, and counting the calls that reach the service.
type server struct {
	lis     peerListener
	handled atomic.Int64
}

// serve starts a server with the interceptors of opts (the counting
// interceptor innermost); it stops when the test ends.
func serve(t testing.TB, opts ...grpc.ServerOption) *server {
	t.Helper()
	s := &server{lis: peerListener{bufconn.Listen(1 << 20)}}
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.handled.Add(1)
		return h(ctx, req)
	}
	countStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		s.handled.Add(1)
		return h(srv, ss)
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(count), grpc.ChainStreamInterceptor(countStream))
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(s.lis) //nolint:errcheck // ends with the listener's error at Stop
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return s
}

// dial returns a health client whose connection comes from the address
// from ("203.0.113.7:4711", or "-" for one that is not an IP address).
func (s *server) dial(t testing.TB, from string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	opts = append(opts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := s.lis.DialContext(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := c.Write([]byte(from + "\n")); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}))
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// ctx returns a context for one call, bounded so that a broken test fails
// instead of hanging.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// check calls Check and returns the call's code.
func check(t testing.TB, c healthpb.HealthClient, opts ...grpc.CallOption) codes.Code {
	t.Helper()
	_, err := c.Check(ctx(t), &healthpb.HealthCheckRequest{}, opts...)
	return status.Code(err)
}

// limiter builds a locked keyed limiter for the rule text, reading fake.
func limiter(t testing.TB, rule string, fake *clock.Fake) admit.KeyedLimiter {
	t.Helper()
	r, err := admit.ParseRule(rule)
	require.NoError(t, err, "ParseRule(%q)", rule)
	lim, err := locked.New(r, admit.WithClock(fake))
	require.NoError(t, err, "locked.New(%v)", r)
	return lim
}

// details returns the RetryInfo and QuotaFailure of err's status.
func details(t testing.TB, err error) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status: %v", err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	var ri *errdetails.RetryInfo
	var qf *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		default:
			t.Fatalf("unexpected detail %T: %v", d, d)
		}
	}
	require.NotNil(t, ri, "no RetryInfo in %v", st.Details())
	require.NotNil(t, qf, "no QuotaFailure in %v", st.Details())
	return ri, qf
}

// recorder is a KeyedLimiter that admits everything and records the keys
// it is asked about.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (l *recorder) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

func (l *recorder) AllowN(key string, n int) admit.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	return admit.Decision{Allowed: true, Limit: 100, Remaining: 99}
}

// last returns the last key asked about since the last call, or "" for
// none.
func (l *recorder) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) == 0 {
		return ""
	}
	k := l.keys[len(l.keys)-1]
	l.keys = l.keys[:0]
	return k
}

// observer is an observe.Observer that records the labels it is asked for
// and counts every outcome on one counter per Instrument call.
type observer struct {
	timed bool

	mu     sync.Mutex
	labels []observe.Labels
	insts  []*counter
}

func (o *observer) Instrument(l observe.Labels) observe.Instrument {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.labels = append(o.labels, l)
	c := &counter{timed: o.timed}
	o.insts = append(o.insts, c)
	return c
}

// only returns the one instrument and labels the observer was asked for.
func (o *observer) only(t testing.TB) (*counter, observe.Labels) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Len(t, o.labels, 1, "Instrument calls")
	return o.insts[0], o.labels[0]
}

// counter is an observe.Instrument that counts calls per outcome, without
// allocating.
type counter struct {
	timed  bool
	n      [observe.NumOutcomes]atomic.Int64
	calls  atomic.Int64
	badN   atomic.Int64 // Observe calls with n != 1
	latent atomic.Int64 // untimed Observe calls given a latency
}

func (c *counter) Observe(o observe.Outcome, n int, latency time.Duration) {
	c.calls.Add(1)
	if n != 1 {
		c.badN.Add(1)
	}
	if !c.timed && latency != 0 {
		c.latent.Add(1)
	}
	if int(o) > 0 && int(o) < observe.NumOutcomes {
		c.n[o].Add(int64(n))
	}
}

func (c *counter) Timed() bool { return c.timed }

// counts returns the counts of every outcome by name, leaving out zeros,
// and checks what every Observe call must have been.
func (c *counter) counts(t testing.TB) map[string]int64 {
	t.Helper()
	require.Zero(t, c.badN.Load(), "Observe calls with n != 1")
	require.Zero(t, c.latent.Load(), "untimed Observe calls given a latency")
	got := map[string]int64{}
	var sum int64
	for o := range observe.NumOutcomes {
		if v := c.n[o].Load(); v != 0 {
			got[observe.Outcome(o).String()] = v
			sum += v
		}
	}
	require.Equal(t, c.calls.Load(), sum, "Observe calls with an outcome out of range")
	return got
}
