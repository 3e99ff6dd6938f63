package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
)

// The middleware's own cost: what it adds to a request beyond net/http and
// the limiter. Names are key=value for benchstat. writer=reuse serves every
// request into one ResponseWriter whose header map is cleared in between, so
// that allocs/op counts the middleware's allocations alone; writer=recorder
// uses a fresh httptest.ResponseRecorder per request, as a test would, and
// handler=none measures that baseline without the middleware.

// reuse is a ResponseWriter that discards the body and keeps its header map,
// cleared by reset: clearing keeps the map's buckets, so setting the same
// fields again allocates nothing of net/http's.
type reuse struct {
	h    http.Header
	code int
}

func (w *reuse) Header() http.Header         { return w.h }
func (w *reuse) Write(b []byte) (int, error) { return len(b), nil }
func (w *reuse) WriteHeader(code int)        { w.code = code }
func (w *reuse) reset()                      { clear(w.h); w.code = 0 }

// noop is the next handler of the benchmarks: it does nothing, so that the
// numbers are the middleware's.
var noop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// benchCase is one configuration of the middleware.
type benchCase struct {
	name    string
	handler func(testing.TB) http.Handler
	remote  string
	target  string
	header  http.Header
	status  int
}

// allowAll is a rule no benchmark exhausts: one token per nanosecond.
var allowAll = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Millisecond}

// denyAll is a rule every request after the first exceeds, for an hour.
var denyAll = admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Hour}

func limiterHandler(rule admit.Rule, opts ...httplimit.Option) func(testing.TB) http.Handler {
	return func(tb testing.TB) http.Handler {
		lim, err := locked.New(rule, admit.WithClock(clock.System()))
		require.NoError(tb, err)
		mw, err := httplimit.New(lim, append([]httplimit.Option{httplimit.WithPolicy("default", rule)}, opts...)...)
		require.NoError(tb, err)
		return mw.Handler(noop)
	}
}

// compositeHandler is limiterHandler over a composite that no benchmark
// exhausts: allowAll and a fixed window of a billion a second.
func compositeHandler(tb testing.TB) http.Handler {
	limits, err := admit.NewLimits(allowAll, admit.Rule{Algorithm: admit.FixedWindow, Limit: 1_000_000_000, Window: time.Second})
	require.NoError(tb, err)
	lim, err := locked.NewLimits(limits, admit.WithClock(clock.System()))
	require.NoError(tb, err)
	mw, err := httplimit.New(lim)
	require.NoError(tb, err)
	return mw.Handler(noop)
}

func serviceHandler(tb testing.TB) http.Handler {
	book, err := policy.Parse(strings.NewReader("default = token-bucket,1000000,1ms\napi./items = token-bucket,1000000,1ms\n"))
	require.NoError(tb, err)
	svc, err := policy.NewService(book)
	require.NoError(tb, err)
	mw, err := httplimit.ForService(svc, httplimit.WithAPI(func(*http.Request) string { return "/items" }))
	require.NoError(tb, err)
	return mw.Handler(noop)
}

func benchCases() []benchCase {
	return []benchCase{
		{name: "handler=none/key=ipv4/outcome=allow", handler: func(testing.TB) http.Handler { return noop }, remote: "203.0.113.7:4711"},
		{name: "handler=limiter/key=ipv4/outcome=allow", handler: limiterHandler(allowAll), remote: "203.0.113.7:4711"},
		{name: "handler=limiter/key=ipv6/outcome=allow", handler: limiterHandler(allowAll), remote: "[2001:db8:1:2::7]:4711"},
		{name: "handler=limiter/key=xff/outcome=allow", handler: limiterHandler(allowAll, httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8")),
			remote: "10.0.0.1:4711", header: http.Header{"X-Forwarded-For": {"198.51.100.1, 203.0.113.7, 10.0.0.2"}}},
		{name: "handler=limiter/key=header/outcome=allow", handler: limiterHandler(allowAll, httplimit.WithKeyFrom(httplimit.RequestHeader("X-API-Key"))),
			remote: "203.0.113.7:4711", header: http.Header{"X-Api-Key": {"key-0123456789"}}},
		{name: "handler=limiter/key=ipv4+route/outcome=allow", handler: limiterHandler(allowAll, httplimit.WithKeyFrom(httplimit.ClientIP(), httplimit.Method(), httplimit.Path())),
			remote: "203.0.113.7:4711"},
		{name: "handler=limiter-legacy/key=ipv4/outcome=allow", handler: limiterHandler(allowAll, httplimit.WithLegacyHeaders()), remote: "203.0.113.7:4711"},
		{name: "handler=limiter/key=ipv4/outcome=deny", handler: limiterHandler(denyAll), remote: "203.0.113.7:4711", status: http.StatusTooManyRequests},
		{name: "handler=limiter-shadow/key=ipv4/outcome=deny", handler: limiterHandler(denyAll, httplimit.WithShadow(func(*http.Request, httplimit.Denial) {})), remote: "203.0.113.7:4711"},
		{name: "handler=limiter-composite/key=ipv4/outcome=allow", handler: compositeHandler, remote: "203.0.113.7:4711"},
		{name: "handler=service/key=ipv4/outcome=allow", handler: serviceHandler, remote: "203.0.113.7:4711"},
	}
}

func (bc benchCase) request() *http.Request {
	target := bc.target
	if target == "" {
		target = "/items/7"
	}
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.RemoteAddr = bc.remote
	for k, v := range bc.header {
		r.Header[k] = v
	}
	return r
}

// BenchmarkHandler measures one client's requests through the middleware,
// serially.
func BenchmarkHandler(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name+"/writer=reuse", func(b *testing.B) {
			h, r := bc.handler(b), bc.request()
			w := &reuse{h: http.Header{}}
			h.ServeHTTP(w, r) // the key exists, the deny case is spent
			w.reset()
			h.ServeHTTP(w, r)
			if w.code != bc.status {
				b.Fatalf("status %d, want %d", w.code, bc.status)
			}
			b.ReportAllocs()
			for b.Loop() {
				w.reset()
				h.ServeHTTP(w, r)
			}
		})
		b.Run(bc.name+"/writer=recorder", func(b *testing.B) {
			h, r := bc.handler(b), bc.request()
			h.ServeHTTP(httptest.NewRecorder(), r)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}

// BenchmarkLimiterAllow is the limiter of handler=limiter alone, on the same
// key, so that the middleware's own share of BenchmarkHandler is the
// difference.
func BenchmarkLimiterAllow(b *testing.B) {
	b.Run("limiter=locked/outcome=allow", func(b *testing.B) {
		lim, err := locked.New(allowAll, admit.WithClock(clock.System()))
		require.NoError(b, err)
		key := strings.Clone("203.0.113.7")
		lim.Allow(key)
		b.ReportAllocs()
		for b.Loop() {
			lim.Allow(key)
		}
	})
}

// BenchmarkHandlerParallel measures admitted requests from every goroutine of
// -cpu at once: clients=1 is one hot client, clients=1000 spreads requests
// over 1000 client addresses.
func BenchmarkHandlerParallel(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run("handler=limiter/key=ipv4/clients="+strconv.Itoa(n), func(b *testing.B) {
			h := limiterHandler(allowAll)(b)
			reqs := make([]*http.Request, n)
			for i := range reqs {
				reqs[i] = benchCase{remote: "10." + strconv.Itoa(i/256%256) + "." + strconv.Itoa(i%256) + ".1:4711"}.request()
				h.ServeHTTP(&reuse{h: http.Header{}}, reqs[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &reuse{h: http.Header{}}
				i := 0
				for pb.Next() {
					w.reset()
					h.ServeHTTP(w, reqs[i%n])
					i++
				}
			})
		})
	}
}

// TestAllocations pins the allocation budget of the middleware, beyond
// net/http and the limiter (which allocate nothing here): two per admitted
// request (the string of the header values and the []string behind the
// fields), the same on a denial (whose body buffer comes from a pool), and
// one more for a key the request does not hold as a substring.
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	budget := map[string]float64{
		"handler=none/key=ipv4/outcome=allow":              0,
		"handler=limiter/key=ipv4/outcome=allow":           2,
		"handler=limiter/key=ipv6/outcome=allow":           3, // the /64's text
		"handler=limiter/key=xff/outcome=allow":            2,
		"handler=limiter/key=header/outcome=allow":         2,
		"handler=limiter/key=ipv4+route/outcome=allow":     3, // the joined key
		"handler=limiter-legacy/key=ipv4/outcome=allow":    2,
		"handler=limiter/key=ipv4/outcome=deny":            2,
		"handler=limiter-shadow/key=ipv4/outcome=deny":     2,
		"handler=limiter-composite/key=ipv4/outcome=allow": 2,
		"handler=service/key=ipv4/outcome=allow":           2,
	}
	for _, bc := range benchCases() {
		want, ok := budget[bc.name]
		require.True(t, ok, "no budget for %s", bc.name)
		h, r := bc.handler(t), bc.request()
		w := &reuse{h: http.Header{}}
		h.ServeHTTP(w, r)
		got := testing.AllocsPerRun(1000, func() {
			w.reset()
			h.ServeHTTP(w, r)
		})
		if got > want {
			t.Errorf("%s: %v allocations per request, want at most %v", bc.name, got, want)
		}
	}
}
