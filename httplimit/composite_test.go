package httplimit_test

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// limitsStores are the NewLimits constructors of the stores that hold
// composites (atomic has none).
var limitsStores = []struct {
	name  string
	build func(admit.Limits, ...admit.Option) (admit.CompositeStore, error)
}{
	{"locked", locked.NewLimits},
	{"sharded", sharded.NewLimits},
}

// compositeStore builds the store of the limits text with build, reading fake.
func compositeStore(t testing.TB, build func(admit.Limits, ...admit.Option) (admit.CompositeStore, error), text string, fake *clock.Fake) admit.CompositeStore {
	t.Helper()
	limits, err := admit.ParseLimits(text)
	require.NoError(t, err, "ParseLimits(%q)", text)
	lim, err := build(limits, admit.WithClock(fake))
	require.NoError(t, err, "NewLimits(%v)", limits)
	return lim
}

// problemBody is the part of a 429 problem body the composite tests read.
type problemBody struct {
	Type     string   `json:"type"`
	Status   int      `json:"status"`
	Violated []string `json:"violated-policies"`
	Detail   string   `json:"detail"`
}

// TestCompositeClient drives a real server over a composite store with a
// real client, the fake clock moved between requests, and checks every
// field of every response: which limit binds moves from the token bucket to
// the fixed window as the window fills, and back when it resets.
func TestCompositeClient(t *testing.T) {
	const (
		tb     = `"default:token-bucket,10,1s"`
		fw     = `"default:fixed-window,30,1m"`
		policy = tb + `;q=10;w=1, ` + fw + `;q=30;w=60`
	)
	type step struct {
		at        time.Duration
		status    int
		rateLimit string
		limit     string // X-RateLimit-Limit: the binding rule's
		retry     string
		violated  string // the problem body's one violated policy
	}
	var steps []step
	pass := func(at time.Duration, item string, limit int, from, to int, t int) {
		for r := from; r >= to; r-- {
			steps = append(steps, step{at, 200, item + ";r=" + strconv.Itoa(r) + ";t=" + strconv.Itoa(t), strconv.Itoa(limit), "", ""})
		}
	}
	deny := func(at time.Duration, item string, limit int, t int, violated string) {
		s := strconv.Itoa(t)
		steps = append(steps, step{at, 429, item + ";r=0;t=" + s, strconv.Itoa(limit), s, violated})
	}
	// 0s: the bucket binds, having fewer left than the window; t is the
	// bucket's own refill (100ms a token), not the window's 60s.
	pass(0, tb, 10, 9, 0, 1)
	deny(0, tb, 10, 1, "default:token-bucket,10,1s") // the window admits; nothing is charged
	// 1s: the bucket is full again, the window holds 20 of 30.
	pass(time.Second, tb, 10, 9, 0, 1)
	// 2s: five more; each rule has the same left, and the first binds.
	pass(2*time.Second, tb, 10, 9, 5, 1)
	// 3s: the bucket is full, the window has 5 left: the window binds, and
	// t is its end, 57s away.
	pass(3*time.Second, fw, 30, 4, 0, 57)
	deny(3*time.Second, fw, 30, 57, "default:fixed-window,30,1m") // the bucket admits
	deny(59*time.Second+500*time.Millisecond, fw, 30, 1, "default:fixed-window,30,1m")
	// 60s: a new window; the bucket binds again.
	pass(60*time.Second, tb, 10, 9, 0, 1)
	pass(61*time.Second, tb, 10, 9, 0, 1)
	pass(62*time.Second, tb, 10, 9, 0, 1) // the window's last ten: equal, the bucket first
	// Both deny: the bucket for 100ms, the window for 58s. The longer wait
	// binds, so that Retry-After is when the request passes.
	deny(62*time.Second, fw, 30, 58, "default:fixed-window,30,1m")

	for _, st := range limitsStores {
		t.Run("store="+st.name, func(t *testing.T) {
			fake := clock.NewFake()
			lim := compositeStore(t, st.build, "token-bucket,10,1s + fixed-window,30,1m", fake)
			mw, err := httplimit.New(lim, httplimit.WithLegacyHeaders())
			require.NoError(t, err)
			srv := httptest.NewServer(mw.Handler(ok))
			defer srv.Close()
			client := srv.Client()

			for i, s := range steps {
				fake.Set(s.at)
				res, err := client.Get(srv.URL + "/")
				require.NoError(t, err)
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				require.NoError(t, err)
				call := func(what string) string {
					return "step " + strconv.Itoa(i) + " (t=" + s.at.String() + "): GET / " + what
				}
				require.Equal(t, s.status, res.StatusCode, call("status"))
				assert.Equal(t, []string{policy}, res.Header["Ratelimit-Policy"], call("RateLimit-Policy"))
				assert.Equal(t, []string{s.rateLimit}, res.Header["Ratelimit"], call("RateLimit"))
				assert.Equal(t, s.limit, res.Header.Get("X-RateLimit-Limit"), call("X-RateLimit-Limit"))
				assert.Equal(t, s.retry, res.Header.Get("Retry-After"), call("Retry-After"))

				items, err := parseSFList(res.Header["Ratelimit-Policy"])
				require.NoError(t, err, call("RateLimit-Policy parses"))
				require.Len(t, items, 2, call("RateLimit-Policy"))
				rl, err := parseSFList(res.Header["Ratelimit"])
				require.NoError(t, err, call("RateLimit parses"))
				require.Len(t, rl, 1, call("RateLimit"))
				assert.Contains(t, []any{items[0].Value, items[1].Value}, rl[0].Value, call("RateLimit names a RateLimit-Policy item"))

				if s.status != http.StatusTooManyRequests {
					assert.Equal(t, "ok", string(body), call("body"))
					continue
				}
				var p problemBody
				require.NoError(t, json.Unmarshal(body, &p), call("problem body %s"), body)
				assert.Equal(t, problemBody{
					Type: httplimit.ProblemType, Status: 429,
					Violated: []string{s.violated},
					Detail:   "Too many requests; retry in " + s.retry + "s.",
				}, p, call("problem body"))
				assert.Equal(t, s.violated, rl[0].Value, call("the body names the RateLimit item"))
			}
		})
	}
}

// TestCompositeNames: WithPolicyName names a composite's policies; WithPolicy,
// whose one rule cannot describe a composite, is an error; a composite store
// of one rule is that rule.
func TestCompositeNames(t *testing.T) {
	fake := clock.NewFake()
	lim := compositeStore(t, locked.NewLimits, "sliding-log,5,1s + sliding-counter,100,1h + fixed-window,1000,24h", fake)

	mw, err := httplimit.New(lim, httplimit.WithPolicyName(`per "client"`))
	require.NoError(t, err)
	res := serve(mw.Handler(ok), request("192.0.2.1:1", "/")).Result()
	assert.Equal(t, []string{`"per \"client\":sliding-log,5,1s";q=5;w=1, ` +
		`"per \"client\":sliding-counter,100,1h";q=100;w=3600, ` +
		`"per \"client\":fixed-window,1000,24h";q=1000;w=86400`}, res.Header["Ratelimit-Policy"])
	assert.Equal(t, []string{`"per \"client\":sliding-log,5,1s";r=4;t=1`}, res.Header["Ratelimit"])

	rule, err := admit.ParseRule("sliding-log,5,1s")
	require.NoError(t, err)
	_, err = httplimit.New(lim, httplimit.WithPolicy("default", rule))
	require.ErrorIs(t, err, admit.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithPolicyName")

	// One rule: the headers of a single rule, byte for byte.
	single := compositeStore(t, locked.NewLimits, "token-bucket,2,10s", fake)
	mw, err = httplimit.New(single)
	require.NoError(t, err)
	res = serve(mw.Handler(ok), request("192.0.2.1:1", "/")).Result()
	assert.Equal(t, []string{`"default";q=2;w=10`}, res.Header["Ratelimit-Policy"])
	assert.Equal(t, []string{`"default";r=1;t=5`}, res.Header["Ratelimit"])

	mw, err = httplimit.New(single, httplimit.WithPolicyName("per-client"))
	require.NoError(t, err)
	res = serve(mw.Handler(ok), request("192.0.2.1:1", "/")).Result()
	assert.Equal(t, []string{`"per-client";q=2;w=10`}, res.Header["Ratelimit-Policy"])
	assert.Equal(t, []string{`"per-client";r=0;t=10`}, res.Header["Ratelimit"])
}

// TestCompositeDenial: the deny handler and the shadow hook get the policy
// of the rule that denied.
func TestCompositeDenial(t *testing.T) {
	fake := clock.NewFake()
	lim := compositeStore(t, sharded.NewLimits, "token-bucket,5,1s + fixed-window,1,1m", fake)
	var got []httplimit.Denial
	record := func(_ *http.Request, d httplimit.Denial) { got = append(got, d) }

	mw, err := httplimit.New(lim, httplimit.WithShadow(record))
	require.NoError(t, err)
	h := mw.Handler(ok)
	serve(h, request("192.0.2.1:1", "/"))
	res := serve(h, request("192.0.2.1:1", "/")).Result()
	assert.Equal(t, 200, res.StatusCode, "shadow mode")
	assert.Equal(t, []string{`"default:fixed-window,1,1m";r=0;t=60`}, res.Header["Ratelimit"])
	assert.Empty(t, res.Header.Get("Retry-After"), "shadow mode")

	mw, err = httplimit.New(lim, httplimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
		record(r, d)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	require.NoError(t, err)
	fake.Set(30 * time.Second)
	res = serve(mw.Handler(ok), request("192.0.2.1:1", "/")).Result()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "30", res.Header.Get("Retry-After"))

	require.Len(t, got, 2)
	for i, d := range got {
		assert.Equal(t, "default:fixed-window,1,1m", d.Policy, "denial %d", i)
		assert.Equal(t, "192.0.2.1", d.Key, "denial %d", i)
		assert.Equal(t, 1, d.Decision.Limit, "denial %d: the Limit of the rule that denied", i)
	}
}

// whichStore is a CompositeStore of someone else's: it answers every
// request with d and the index which, whatever its Limits.
type whichStore struct {
	limits admit.Limits
	d      admit.Decision
	which  int
}

func (s *whichStore) Allow(key string) admit.Decision { return s.AllowN(key, 1) }
func (s *whichStore) AllowN(key string, n int) admit.Decision {
	d, _ := s.AllowNWhich(key, n)
	return d
}
func (s *whichStore) AllowNWhich(string, int) (admit.Decision, int) { return s.d, s.which }
func (s *whichStore) Limits() admit.Limits                          { return s.limits }
func (s *whichStore) Len() int                                      { return 0 }
func (s *whichStore) Sweep() int                                    { return 0 }

// TestCompositeIndexOutOfRange: an index no rule has is reported under the
// quota's own name, never a panic.
func TestCompositeIndexOutOfRange(t *testing.T) {
	limits, err := admit.ParseLimits("token-bucket,10,1s + fixed-window,30,1m")
	require.NoError(t, err)
	for _, which := range []int{-1, 2, math.MaxInt} {
		s := &whichStore{limits: limits, which: which, d: admit.Decision{Limit: 10, RetryAfter: 1500 * time.Millisecond}}
		mw, err := httplimit.New(s)
		require.NoError(t, err)
		w := serve(mw.Handler(ok), request("192.0.2.1:1", "/"))
		res := w.Result()
		assert.Equal(t, 429, res.StatusCode, "which %d", which)
		assert.Equal(t, []string{`"default:token-bucket,10,1s";q=10;w=1, "default:fixed-window,30,1m";q=30;w=60`}, res.Header["Ratelimit-Policy"], "which %d", which)
		assert.Equal(t, []string{`"default";r=0;t=2`}, res.Header["Ratelimit"], "which %d", which)
		var p problemBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
		assert.Equal(t, []string{"default"}, p.Violated, "which %d", which)
	}
}

// TestCompositeOptions: the naming options' errors.
func TestCompositeOptions(t *testing.T) {
	rule, err := admit.ParseRule("token-bucket,2,10s")
	require.NoError(t, err)
	lim, err := locked.New(rule)
	require.NoError(t, err)
	svc := service(t, "default = token-bucket,5,10s + fixed-window,100,1h\n", clock.NewFake())
	for name, build := range map[string]func() (*httplimit.Middleware, error){
		"WithPolicyName empty": func() (*httplimit.Middleware, error) { return httplimit.New(lim, httplimit.WithPolicyName("")) },
		"WithPolicyName too long": func() (*httplimit.Middleware, error) {
			return httplimit.New(lim, httplimit.WithPolicyName(strings.Repeat("a", 65)))
		},
		"WithPolicyName non-ASCII": func() (*httplimit.Middleware, error) { return httplimit.New(lim, httplimit.WithPolicyName("jörg")) },
		"both name the quota": func() (*httplimit.Middleware, error) {
			return httplimit.New(lim, httplimit.WithPolicyName("a"), httplimit.WithPolicy("b", rule))
		},
		"ForService WithPolicyName": func() (*httplimit.Middleware, error) {
			return httplimit.ForService(svc, httplimit.WithPolicyName("a"))
		},
		"ForService WithPolicy": func() (*httplimit.Middleware, error) {
			return httplimit.ForService(svc, httplimit.WithPolicy("a", rule))
		},
	} {
		mw, err := build()
		assert.Nil(t, mw, name)
		assert.True(t, errors.Is(err, admit.ErrInvalidOption), "%s: %v", name, err)
	}
}

const compositeBook = `
default      = token-bucket,5,10s
api./search  = token-bucket,2,1s + fixed-window,3,1m
api./export  = sliding-log,1,10s + fixed-window,2,1h
user.vip-1   = token-bucket,10,1s + fixed-window,1000,1h
`

// TestCompositeService: with a Service whose book has composite entries,
// each request is reported under its own entry's limits and binding rule.
func TestCompositeService(t *testing.T) {
	fake := clock.NewFake()
	svc := service(t, compositeBook, fake)
	mw, err := httplimit.ForService(svc, httplimit.WithKeyFrom(httplimit.RequestHeader("X-User")))
	require.NoError(t, err)
	mux := http.NewServeMux()
	for _, route := range []string{"GET /search", "GET /export", "GET /items/{id}"} {
		mux.Handle(route, mw.Handler(ok))
	}
	const (
		search = `"api./search:token-bucket,2,1s";q=2;w=1, "api./search:fixed-window,3,1m";q=3;w=60`
		export = `"api./export:sliding-log,1,10s";q=1;w=10, "api./export:fixed-window,2,1h";q=2;w=3600`
		vip    = `"user.vip-1:token-bucket,10,1s";q=10;w=1, "user.vip-1:fixed-window,1000,1h";q=1000;w=3600`
	)
	steps := []struct {
		at                time.Duration
		target, user      string
		status            int
		policy, rateLimit string
		violated          string
	}{
		{0, "/search", "alice", 200, search, `"api./search:token-bucket,2,1s";r=1;t=1`, ""},
		{0, "/search", "alice", 200, search, `"api./search:token-bucket,2,1s";r=0;t=1`, ""},
		{0, "/search", "alice", 429, search, `"api./search:token-bucket,2,1s";r=0;t=1`, "api./search:token-bucket,2,1s"},
		{time.Second, "/search", "alice", 200, search, `"api./search:fixed-window,3,1m";r=0;t=59`, ""},
		{2 * time.Second, "/search", "alice", 429, search, `"api./search:fixed-window,3,1m";r=0;t=58`, "api./search:fixed-window,3,1m"},
		// Another API, other limits, its own budget for the same user.
		{2 * time.Second, "/export", "alice", 200, export, `"api./export:sliding-log,1,10s";r=0;t=10`, ""},
		{3 * time.Second, "/export", "alice", 429, export, `"api./export:sliding-log,1,10s";r=0;t=9`, "api./export:sliding-log,1,10s"},
		// The default entry is a single rule: its headers are a single rule's.
		{3 * time.Second, "/items/1", "alice", 200, `"default";q=5;w=10`, `"default";r=4;t=2`, ""},
		// A user entry applies on every API.
		{3 * time.Second, "/search", "vip-1", 200, vip, `"user.vip-1:token-bucket,10,1s";r=9;t=1`, ""},
	}
	for i, st := range steps {
		fake.Set(st.at)
		r := request("203.0.113.7:1", st.target)
		r.Header.Set("X-User", st.user)
		w := serve(mux, r)
		res := w.Result()
		what := "step " + strconv.Itoa(i) + " (t=" + st.at.String() + "): GET " + st.target + " as " + st.user
		require.Equal(t, st.status, res.StatusCode, what)
		assert.Equal(t, []string{st.policy}, res.Header["Ratelimit-Policy"], what)
		assert.Equal(t, []string{st.rateLimit}, res.Header["Ratelimit"], what)
		for _, f := range []string{"Ratelimit-Policy", "Ratelimit"} {
			_, err := parseSFList(res.Header[f])
			assert.NoError(t, err, "%s: %s", what, f)
		}
		if st.status == 429 {
			var p problemBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), what)
			assert.Equal(t, []string{st.violated}, p.Violated, what)
		}
	}

	// A Reload that makes /search a single rule: the headers follow.
	book, err := policy.Parse(strings.NewReader("default = token-bucket,5,10s\napi./search = fixed-window,4,1m\n"))
	require.NoError(t, err)
	require.NoError(t, svc.Reload(book))
	r := request("203.0.113.7:1", "/search")
	r.Header.Set("X-User", "alice")
	res := serve(mux, r).Result()
	assert.Equal(t, []string{`"api./search";q=4;w=60`}, res.Header["Ratelimit-Policy"])
}
