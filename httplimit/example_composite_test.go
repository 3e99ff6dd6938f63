package httplimit_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/sharded"
)

// Composite limits: each rule is a policy of its own, and RateLimit reports
// the one that bound, here the bucket first and then, once the minute's
// window is spent, the window.
func Example_composite() {
	fake := clock.NewFake() // tests move time; production leaves WithClock out
	limits, err := admit.ParseLimits("token-bucket,2,1s + fixed-window,3,1m")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sharded.NewLimits(limits, admit.WithClock(fake))
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(lim)
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

	w := get()
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	show(w)
	show(get())
	show(get()) // the bucket is empty; the window would admit
	fake.Advance(time.Second)
	show(get()) // the bucket has 1 left, the window 0
	w = get()
	show(w)
	fmt.Println(w.Body.String())
	// Output:
	// "default:token-bucket,2,1s";q=2;w=1, "default:fixed-window,3,1m";q=3;w=60
	// 200 "default:token-bucket,2,1s";r=1;t=1
	// 200 "default:token-bucket,2,1s";r=0;t=1
	// 429 "default:token-bucket,2,1s";r=0;t=1 Retry-After: 1
	// 200 "default:fixed-window,3,1m";r=0;t=59
	// 429 "default:fixed-window,3,1m";r=0;t=59 Retry-After: 59
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default:fixed-window,3,1m"],"detail":"Too many requests; retry in 59s."}
}
