package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
)

// observer is an observe.Observer that records the labels it is asked for and
// counts every outcome on one counter per Instrument call.
type observer struct {
	timed bool // what its instruments' Timed says
	none  bool // Instrument returns nil

	mu     sync.Mutex
	labels []observe.Labels
	insts  []*counter
}

func (o *observer) Instrument(l observe.Labels) observe.Instrument {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.labels = append(o.labels, l)
	if o.none {
		return nil
	}
	c := &counter{timed: o.timed}
	o.insts = append(o.insts, c)
	return c
}

// only returns the one instrument and labels the observer was asked for.
func (o *observer) only(t *testing.T) (*counter, observe.Labels) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Len(t, o.labels, 1, "Instrument calls")
	return o.insts[0], o.labels[0]
}

// counter is an observe.Instrument that counts requests per outcome, without
// allocating.
type counter struct {
	timed    bool
	n        [observe.NumOutcomes]atomic.Int64
	calls    atomic.Int64
	badN     atomic.Int64 // Observe calls with n != 1
	latent   atomic.Int64 // untimed Observe calls given a latency
	outOfSet atomic.Int64 // outcomes out of range
}

func (c *counter) Observe(o observe.Outcome, n int, latency time.Duration) {
	c.calls.Add(1)
	if n != 1 {
		c.badN.Add(1)
	}
	if !c.timed && latency != 0 {
		c.latent.Add(1)
	}
	if int(o) <= 0 || int(o) >= observe.NumOutcomes {
		c.outOfSet.Add(1)
		return
	}
	c.n[o].Add(int64(n))
}

func (c *counter) Timed() bool { return c.timed }

// counts returns the counts of every outcome by name, leaving out zeros,
// and checks what every Observe call must have been.
func (c *counter) counts(t *testing.T) map[string]int64 {
	t.Helper()
	assert.Zero(t, c.badN.Load(), "Observe calls with n != 1")
	assert.Zero(t, c.latent.Load(), "untimed Observe calls given a latency")
	assert.Zero(t, c.outOfSet.Load(), "Observe calls with an outcome out of range")
	got := map[string]int64{}
	var sum int64
	for o := range observe.NumOutcomes {
		if v := c.n[o].Load(); v != 0 {
			got[observe.Outcome(o).String()] = v
			sum += v
		}
	}
	assert.Equal(t, c.calls.Load(), sum, "Observe calls")
	return got
}

// TestObserverOutcomes drives a real server with a real client, the budget
// on a fake clock, and counts each outcome: three requests admitted, two
// denied, one without its key header, one exempt; then a window later one
// more admitted.
func TestObserverOutcomes(t *testing.T) {
	type want = map[string]int64
	cases := []struct {
		name   string
		opts   []httplimit.Option
		codes  []int // of the eight requests, in order
		counts want
	}{
		{
			name:   "enforce",
			codes:  []int{200, 200, 200, 429, 429, 400, 200, 200},
			counts: want{"admitted": 4, "denied": 2, "errored": 1},
		},
		{
			name:   "shadow",
			opts:   []httplimit.Option{httplimit.WithShadow(nil)},
			codes:  []int{200, 200, 200, 200, 200, 200, 200, 200},
			counts: want{"admitted": 4, "shadow_denied": 3},
		},
		{
			name: "deny handler",
			opts: []httplimit.Option{httplimit.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, d httplimit.Denial) {
				if d.Unkeyed {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})},
			codes:  []int{200, 200, 200, 503, 503, 401, 200, 200},
			counts: want{"admitted": 4, "denied": 2, "errored": 1},
		},
		{
			// The keyless request is charged to "unknown", a budget of its own.
			name:   "unknown key",
			opts:   []httplimit.Option{httplimit.WithUnknownKey("unknown")},
			codes:  []int{200, 200, 200, 429, 429, 200, 200, 200},
			counts: want{"admitted": 5, "denied": 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake()
			o := &observer{}
			opts := append([]httplimit.Option{
				httplimit.WithKeyFrom(httplimit.RequestHeader("X-API-Key")),
				httplimit.WithExempt(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
				httplimit.WithObserver(o),
			}, tc.opts...)
			mw := middleware(t, "fixed-window,3,1m", fake, opts...)
			srv := httptest.NewServer(mw.Handler(ok))
			defer srv.Close()

			get := func(path, key string) int {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
				require.NoError(t, err)
				if key != "" {
					req.Header.Set("X-API-Key", key)
				}
				res, err := srv.Client().Do(req)
				require.NoError(t, err)
				res.Body.Close()
				return res.StatusCode
			}
			var codes []int
			for range 5 {
				codes = append(codes, get("/items", "alice"))
			}
			codes = append(codes, get("/items", ""))
			codes = append(codes, get("/healthz", "alice"))
			fake.Advance(time.Minute)
			codes = append(codes, get("/items", "alice"))
			assert.Equal(t, tc.codes, codes, "status codes")

			c, _ := o.only(t)
			assert.Equal(t, tc.counts, c.counts(t), "outcomes")
		})
	}
}

// stats is a KeyedLimiter that reports StoreStats, over a locked store.
type stats struct{ admit.KeyedLimiter }

func (stats) Stats() admit.StoreStats { return admit.StoreStats{Keys: 7} }

// TestObserverLabels: the labels of each kind of middleware, resolved once
// at construction; none holds a key.
func TestObserverLabels(t *testing.T) {
	fake := clock.NewFake()
	rule, err := admit.ParseRule("fixed-window,3,1m")
	require.NoError(t, err)
	one, err := admit.NewLimits(rule)
	require.NoError(t, err)

	t.Run("rule from the limiter", func(t *testing.T) {
		lim, err := locked.New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		o := &observer{}
		_, err = httplimit.New(lim, httplimit.WithObserver(o))
		require.NoError(t, err)
		_, l := o.only(t)
		assert.Equal(t, "default", l.Name)
		assert.Equal(t, one, l.Limits, "the limiter's Rule()")
	})
	t.Run("store without rule", func(t *testing.T) {
		lim, err := locked.New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		o := &observer{}
		_, err = httplimit.New(stats{lim}, httplimit.WithObserver(o))
		require.NoError(t, err)
		_, l := o.only(t)
		assert.Equal(t, "http", l.Source)
		assert.Equal(t, "default", l.Name)
		assert.Empty(t, l.Scope)
		assert.Equal(t, admit.Limits{}, l.Limits, "a limiter without Rule or Limits: the limits are unknown")
		require.NotNil(t, l.Store, "a limiter with Stats is the Store")
		assert.Equal(t, 7, l.Store.Stats().Keys)
	})
	t.Run("WithPolicy", func(t *testing.T) {
		lim, err := locked.New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		o := &observer{}
		_, err = httplimit.New(lim, httplimit.WithPolicy("per-client", rule), httplimit.WithObserver(o))
		require.NoError(t, err)
		_, l := o.only(t)
		assert.Equal(t, "per-client", l.Name)
		assert.Equal(t, one, l.Limits)
	})
	t.Run("composite", func(t *testing.T) {
		limits, err := admit.ParseLimits("token-bucket,10,1s + fixed-window,30,1m")
		require.NoError(t, err)
		lim, err := locked.NewLimits(limits, admit.WithClock(fake))
		require.NoError(t, err)
		o := &observer{}
		_, err = httplimit.New(lim, httplimit.WithPolicyName("api"), httplimit.WithObserver(o))
		require.NoError(t, err)
		_, l := o.only(t)
		assert.Equal(t, "api", l.Name)
		assert.Equal(t, limits, l.Limits)
	})
	t.Run("service", func(t *testing.T) {
		svc := service(t, "default = fixed-window,2,1m\n", fake)
		o := &observer{}
		mw, err := httplimit.ForService(svc, httplimit.WithObserver(o))
		require.NoError(t, err)
		h := mw.Handler(ok)
		for range 3 {
			serve(h, request("203.0.113.7:1", "/x"))
		}
		serve(h, request("not an address", "/x"))
		c, l := o.only(t)
		assert.Equal(t, observe.Labels{Source: "http", Name: "service"}, l)
		assert.Equal(t, map[string]int64{"admitted": 2, "denied": 1, "errored": 1}, c.counts(t))
	})
}

// TestObserverOptions: a nil Observer is refused; an Observer whose
// Instrument returns nil counts nothing and changes nothing; a timed
// instrument is given latencies (whose values no test can pin).
func TestObserverOptions(t *testing.T) {
	fake := clock.NewFake()
	lim, _ := limiter(t, "fixed-window,1,1m", fake)
	_, err := httplimit.New(lim, httplimit.WithObserver(nil))
	require.ErrorIs(t, err, admit.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithObserver(nil)")

	o := &observer{none: true}
	mw := middleware(t, "fixed-window,1,1m", fake, httplimit.WithObserver(o))
	assert.Equal(t, 200, serve(mw.Handler(ok), request("203.0.113.7:1", "/")).Code)
	assert.Equal(t, 429, serve(mw.Handler(ok), request("203.0.113.7:1", "/")).Code)
	assert.Len(t, o.labels, 1, "Instrument calls")

	timed := &observer{timed: true}
	mw = middleware(t, "fixed-window,1,1m", fake, httplimit.WithObserver(timed))
	serve(mw.Handler(ok), request("203.0.113.7:1", "/"))
	serve(mw.Handler(ok), request("203.0.113.7:1", "/"))
	c, _ := timed.only(t)
	assert.Equal(t, map[string]int64{"admitted": 1, "denied": 1}, c.counts(t))
	_, err = httplimit.New(lim, httplimit.WithObserver(timed), httplimit.WithObserver(nil))
	assert.True(t, errors.Is(err, admit.ErrInvalidOption))
}

// TestObserverAllocs: observing adds no allocation to a request, admitted,
// denied or shadowed, timed or not (the budgets of TestAllocations stand).
func TestObserverAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	for _, tc := range []struct {
		name string
		rule admit.Rule
		opts []httplimit.Option
	}{
		{"outcome=allow", allowAll, nil},
		{"outcome=deny", denyAll, nil},
		{"outcome=shadow", denyAll, []httplimit.Option{httplimit.WithShadow(func(*http.Request, httplimit.Denial) {})}},
	} {
		for _, timed := range []bool{false, true} {
			allocs := func(opts ...httplimit.Option) float64 {
				h := limiterHandler(tc.rule, append(tc.opts, opts...)...)(t)
				r := benchCase{remote: "203.0.113.7:4711"}.request()
				w := &reuse{h: http.Header{}}
				h.ServeHTTP(w, r)
				return testing.AllocsPerRun(1000, func() {
					w.reset()
					h.ServeHTTP(w, r)
				})
			}
			o := &observer{timed: timed}
			without, with := allocs(), allocs(httplimit.WithObserver(o))
			if with > without {
				t.Errorf("%s/timed=%v: %v allocations per request with an observer, %v without", tc.name, timed, with, without)
			}
			c, _ := o.only(t)
			if c.calls.Load() == 0 {
				t.Errorf("%s/timed=%v: nothing observed", tc.name, timed)
			}
		}
	}
}

// TestObserverAllocsNone: an Observer that counts nothing costs nothing.
func TestObserverAllocsNone(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	h := limiterHandler(allowAll, httplimit.WithObserver(&observer{none: true}))(t)
	r := benchCase{remote: "203.0.113.7:4711"}.request()
	w := &reuse{h: http.Header{}}
	h.ServeHTTP(w, r)
	if got := testing.AllocsPerRun(1000, func() { w.reset(); h.ServeHTTP(w, r) }); got > 2 {
		t.Errorf("%v allocations per request, want at most 2", got)
	}
}
