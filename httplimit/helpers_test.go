package httplimit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
)

// ok is the next handler of the tests: 200 and "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	io.WriteString(w, "ok") //nolint:errcheck
})

// limiter builds a locked keyed limiter for the rule text, reading fake.
func limiter(t testing.TB, rule string, fake *clock.Fake) (admit.KeyedLimiter, admit.Rule) {
	t.Helper()
	r, err := admit.ParseRule(rule)
	require.NoError(t, err, "ParseRule(%q)", rule)
	lim, err := locked.New(r, admit.WithClock(fake))
	require.NoError(t, err, "locked.New(%v)", r)
	return lim, r
}

// middleware builds a Middleware over a fresh limiter of rule, with the
// policy named "default" and opts.
func middleware(t testing.TB, rule string, fake *clock.Fake, opts ...httplimit.Option) *httplimit.Middleware {
	t.Helper()
	lim, r := limiter(t, rule, fake)
	mw, err := httplimit.New(lim, append([]httplimit.Option{httplimit.WithPolicy("default", r)}, opts...)...)
	require.NoError(t, err, "httplimit.New")
	return mw
}

// service builds a Service over the book text, reading fake.
func service(t testing.TB, book string, fake *clock.Fake) *policy.Service {
	t.Helper()
	b, err := policy.Parse(strings.NewReader(book))
	require.NoError(t, err, "policy.Parse")
	svc, err := policy.NewService(b, admit.WithClock(fake))
	require.NoError(t, err, "policy.NewService")
	return svc
}

// request returns a GET of target from the client address remote.
func request(remote, target string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.RemoteAddr = remote
	return r
}

// serve runs h on r and returns the recorded response.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// recorder is a KeyedLimiter that admits everything and records the keys it
// is asked about.
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

func (l *recorder) last() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) == 0 {
		return "", false
	}
	k := l.keys[len(l.keys)-1]
	l.keys = l.keys[:0]
	return k, true
}

// fixed is a KeyedLimiter that answers every request with d.
type fixed struct{ d admit.Decision }

func (l fixed) Allow(string) admit.Decision       { return l.d }
func (l fixed) AllowN(string, int) admit.Decision { return l.d }
