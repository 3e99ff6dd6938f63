// Command httpserver is a small HTTP API on the loopback interface, rate
// limited by a rule file through package httplimit: one budget per (client IP,
// route), under the rule the file gives the route. It serves its metrics at
// /metrics for Prometheus (package github.com/admit-go/admit/prom): the
// decisions per API, scope and outcome, and the keys each store holds.
//
// It is a module of its own, so that the core module never depends on
// Prometheus. Run it from its directory:
//
//	cd examples/httpserver
//	go run .                                     # http://127.0.0.1:8080, rules from rules.conf
//	go run . -addr 127.0.0.1:9000 -rules my.conf -shadow
//
// and try it:
//
//	for i in 1 2 3 4 5 6; do curl -si http://127.0.0.1:8080/hello | grep -i -e ^HTTP -e ratelimit -e retry; done
//	curl -si -X POST http://127.0.0.1:8080/login
//	curl -si http://127.0.0.1:8080/healthz        # never limited
//	curl -s http://127.0.0.1:8080/metrics | grep ^admit_
//
// The sixth /hello within ten seconds gets 429 Too Many Requests, with
// Retry-After and an application/problem+json body. Behind a load balancer,
// -trust-xff names its networks so that clients are keyed by the address it
// writes in X-Forwarded-For. Interrupt it (Ctrl-C) to stop it gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// config is what main reads from its flags, and what the test sets directly.
type config struct {
	addr     string      // where to listen; the port may be 0
	rules    string      // the rule file, for policy.Load
	trustXFF []string    // networks of trusted proxies writing X-Forwarded-For
	shadow   bool        // measure only: never block
	clock    clock.Clock // nil: the system clock
	log      *log.Logger
	ready    func(addr string) // called with the address once listening; may be nil
}

func main() {
	cfg := config{log: log.New(os.Stderr, "httpserver: ", log.LstdFlags)}
	var trust string
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "`address` to listen on")
	flag.StringVar(&cfg.rules, "rules", "rules.conf", "rule `file` (properties format, or JSON if it ends in .json)")
	flag.StringVar(&trust, "trust-xff", "", "comma-separated `networks` of proxies whose X-Forwarded-For is trusted (none by default)")
	flag.BoolVar(&cfg.shadow, "shadow", false, "shadow mode: set the headers and log would-be denials, but block nothing")
	flag.Parse()
	if trust != "" {
		cfg.trustXFF = strings.Split(trust, ",")
	}
	cfg.ready = func(addr string) { cfg.log.Printf("listening on http://%s", addr) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		cfg.log.Fatal(err)
	}
}

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, cfg config) error {
	if cfg.log == nil {
		cfg.log = log.New(io.Discard, "", 0)
	}
	h, err := newHandler(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          cfg.log,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if cfg.ready != nil {
		cfg.ready(ln.Addr().String())
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// newHandler builds the API: its routes on a ServeMux, all behind one
// rate-limiting middleware over a policy.Service of the rule file.
func newHandler(cfg config) (http.Handler, error) {
	book, err := policy.Load(cfg.rules)
	if err != nil {
		return nil, err
	}
	// The metrics: a collector on a registry of our own (never the global
	// one), observing the Service's decisions per API and the middleware's
	// per outcome.
	metrics, err := prom.New()
	if err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	if err := registry.Register(metrics); err != nil {
		return nil, err
	}
	opts := []admit.Option{policy.WithObserver(metrics)}
	if cfg.clock != nil {
		opts = append(opts, admit.WithClock(cfg.clock))
	}
	svc, err := policy.NewService(book, opts...)
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n") //nolint:errcheck
	})
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n") //nolint:errcheck
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome\n") //nolint:errcheck
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s\n", r.PathValue("id"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	mwOpts := []httplimit.Option{
		// The middleware wraps the whole mux, so the route is not known yet
		// when it runs: ask the mux which pattern the request will match.
		// Its path is the API: "/login", "/items/{id}"; "" if none matches.
		httplimit.WithAPI(func(r *http.Request) string {
			_, pattern := mux.Handler(r)
			return httplimit.RouteAPI(pattern)
		}),
		httplimit.WithExempt(func(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/metrics" }),
		// What the middleware did with each request (admitted, denied,
		// shadow_denied, errored), beside the Service's per-API counts.
		httplimit.WithObserver(metrics),
	}
	if len(cfg.trustXFF) > 0 {
		mwOpts = append(mwOpts, httplimit.WithTrustedProxies(httplimit.XForwardedFor, cfg.trustXFF...))
	}
	if cfg.shadow {
		mwOpts = append(mwOpts, httplimit.WithShadow(func(r *http.Request, d httplimit.Denial) {
			if d.Unkeyed {
				cfg.log.Printf("shadow: would reject %s %s: no client address", r.Method, r.URL.Path)
				return
			}
			cfg.log.Printf("shadow: would deny %s %s for %s (quota %s, retry in %v)", r.Method, r.URL.Path, d.Key, d.Policy, d.Decision.RetryAfter)
		}))
	}
	mw, err := httplimit.ForService(svc, mwOpts...)
	if err != nil {
		return nil, err
	}
	return mw.Handler(mux), nil
}
