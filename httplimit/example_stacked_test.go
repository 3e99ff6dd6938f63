package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
)

// Two middlewares, one inside the other, each add their item to the
// RateLimit and RateLimit-Policy fields: the outer one's first
// (docs/http.md, "Headers").
func Example_stacked() {
	fake := clock.NewFake()
	build := func(text, name string, opts ...httplimit.Option) *httplimit.Middleware {
		rule, err := admit.ParseRule(text)
		if err != nil {
			log.Fatal(err)
		}
		lim, err := locked.New(rule, admit.WithClock(fake))
		if err != nil {
			log.Fatal(err)
		}
		mw, err := httplimit.New(lim, append(opts, httplimit.WithPolicy(name, rule))...)
		if err != nil {
			log.Fatal(err)
		}
		return mw
	}
	everyone := httplimit.WithKey(func(*http.Request) (string, bool) { return "all", true })
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	show := func(h http.Handler) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
			for _, line := range w.Header().Values(field) {
				fmt.Printf("%s: %s\n", field, line)
			}
		}
	}

	perClient := build("token-bucket,10,1m", "default")
	global := build("fixed-window,100,1s", "global", everyone)
	fmt.Println("per-client outside:")
	show(perClient.Handler(global.Handler(ok)))

	perClient = build("token-bucket,10,1m", "default")
	global = build("fixed-window,100,1s", "global", everyone)
	fmt.Println("global outside:")
	show(global.Handler(perClient.Handler(ok)))
	// Output:
	// per-client outside:
	// RateLimit-Policy: "default";q=10;w=60
	// RateLimit-Policy: "global";q=100;w=1
	// RateLimit: "default";r=9;t=6
	// RateLimit: "global";r=99;t=1
	// global outside:
	// RateLimit-Policy: "global";q=100;w=1
	// RateLimit-Policy: "default";q=10;w=60
	// RateLimit: "global";r=99;t=1
	// RateLimit: "default";r=9;t=6
}
