package httplimit_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
)

// show prints the status and the rate-limit fields of a response.
func show(w *httptest.ResponseRecorder) {
	if retry := w.Header().Get("Retry-After"); retry != "" {
		fmt.Println(w.Code, w.Header().Get("RateLimit"), "Retry-After:", retry)
		return
	}
	fmt.Println(w.Code, w.Header().Get("RateLimit"))
}

func Example() {
	fake := clock.NewFake() // tests move time; production leaves WithClock out
	rule, err := admit.ParseRule("token-bucket,2,10s")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := locked.New(rule, admit.WithClock(fake))
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(lim, httplimit.WithPolicy("default", rule))
	if err != nil {
		log.Fatal(err)
	}
	hello := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	}))

	get := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.7:4711"
		w := httptest.NewRecorder()
		hello.ServeHTTP(w, r)
		return w
	}
	fmt.Println(get().Header().Get("RateLimit-Policy"))
	show(get())
	w := get()
	show(w)
	fmt.Println(w.Header().Get("Content-Type"))
	fmt.Println(w.Body.String())
	fake.Advance(5 * time.Second)
	show(get())
	// Output:
	// "default";q=2;w=10
	// 200 "default";r=0;t=10
	// 429 "default";r=0;t=5 Retry-After: 5
	// application/problem+json
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"],"detail":"Too many requests; retry in 5s."}
	// 200 "default";r=0;t=10
}

func ExampleForService() {
	book, err := policy.Parse(strings.NewReader(`
default    = token-bucket,5,10s
api./login = fixed-window,2,10s
`))
	if err != nil {
		log.Fatal(err)
	}
	svc, err := policy.NewService(book, admit.WithClock(clock.NewFake()))
	if err != nil {
		log.Fatal(err)
	}
	// One budget per (client IP, route); the route is the API.
	mw, err := httplimit.ForService(svc)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /login", mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("GET /items/{id}", mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))

	for _, target := range []string{"POST /login", "POST /login", "POST /login", "GET /items/1", "GET /items/2"} {
		method, path, _ := strings.Cut(target, " ")
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = "203.0.113.7:4711"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(target, w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
	}
	// Output:
	// POST /login 200 "api./login";q=2;w=10 "api./login";r=1;t=10
	// POST /login 200 "api./login";q=2;w=10 "api./login";r=0;t=10
	// POST /login 429 "api./login";q=2;w=10 "api./login";r=0;t=10
	// GET /items/1 200 "default";q=5;w=10 "default";r=4;t=2
	// GET /items/2 200 "default";q=5;w=10 "default";r=3;t=4
}

func ExampleWithShadow() {
	rule := admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Minute}
	lim, err := locked.New(rule, admit.WithClock(clock.NewFake()))
	if err != nil {
		log.Fatal(err)
	}
	var wouldDeny atomic.Int64 // export it as a metric before enforcing
	mw, err := httplimit.New(lim, httplimit.WithPolicy("per-minute", rule),
		httplimit.WithShadow(func(r *http.Request, d httplimit.Denial) { wouldDeny.Add(1) }))
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.7:4711"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	fmt.Println("would have denied:", wouldDeny.Load())
	// Output:
	// 200 "per-minute";r=0;t=60
	// 200 "per-minute";r=0;t=60
	// 200 "per-minute";r=0;t=60
	// would have denied: 2
}

func ExampleWithTrustedProxies() {
	var keys []string
	lim := keyLogger{&keys}
	// The load balancers live in 10.0.0.0/8 and append to X-Forwarded-For.
	mw, err := httplimit.New(lim, httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8"))
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct{ peer, xff string }{
		{"10.0.0.1:1", "198.51.100.7"},                    // through the balancer
		{"10.0.0.1:1", "6.6.6.6, 198.51.100.7, 10.0.0.2"}, // a forged entry on the left, two balancers
		{"203.0.113.9:1", "198.51.100.7"},                 // straight to the server: the header is ignored
		{"10.0.0.1:1", "2001:db8:1:2::99"},                // IPv6 clients are keyed by their /64
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		r.Header.Set("X-Forwarded-For", c.xff)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	fmt.Println(strings.Join(keys, "\n"))
	// Output:
	// 198.51.100.7
	// 198.51.100.7
	// 203.0.113.9
	// 2001:db8:1:2::/64
}

// keyLogger is a KeyedLimiter that admits everything and logs the keys.
type keyLogger struct{ keys *[]string }

func (l keyLogger) Allow(key string) admit.Decision { return l.AllowN(key, 1) }
func (l keyLogger) AllowN(key string, n int) admit.Decision {
	*l.keys = append(*l.keys, key)
	return admit.Decision{Allowed: true, Limit: 1, Remaining: 1}
}
