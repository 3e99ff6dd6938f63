package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/redisstore"
)

// servicePolicy is the failure policy of the Services under test: its
// Timeout is long enough that no call of a test falls back.
var servicePolicy = redisstore.Policy{Mode: redisstore.FailClosed, Timeout: 5 * time.Second}

// freshBase returns a base prefix no other test of this binary uses.
func freshBase(name string) string {
	return fmt.Sprintf("%s%d:", name, prefixSeq.Add(1))
}

func parseBook(t testing.TB, text string) *policy.Book {
	t.Helper()
	b, err := policy.Parse(strings.NewReader(text))
	require.NoError(t, err)
	return b
}

// newService returns a Service on c applying text, with keys under base
// and time read from fake.
func newService(t testing.TB, c redis.Scripter, text, base string, fake *clock.Fake, opts ...redisstore.Option) *policy.Service {
	t.Helper()
	s, err := redisstore.NewService(c, parseBook(t, text), servicePolicy,
		append([]redisstore.Option{redisstore.WithPrefix(base), redisstore.WithTestClock(fake)}, opts...)...)
	require.NoError(t, err)
	return s
}

// keys returns the Redis keys under base, sorted.
func keys(t testing.TB, c *redis.Client, base string) []string {
	t.Helper()
	ks, err := c.Keys(context.Background(), base+"*").Result()
	require.NoError(t, err)
	slices.Sort(ks)
	return ks
}

// spend checks (user, api) n times, each required to be admitted.
func spend(t testing.TB, s *policy.Service, user, api string, n int) {
	t.Helper()
	for i := range n {
		require.True(t, s.Check(user, api).Allowed, "Check(%q, %q) #%d", user, api, i+1)
	}
}

// left is the pair's Remaining, by a probe.
func left(s *policy.Service, user, api string) int { return s.CheckN(user, api, 0).Remaining }

// TestServiceScopes: each API has its own budgets, under its own prefix,
// whatever its rules: two API entries of equal rules, two APIs under the
// default rule, and a user's rule on two APIs are each two budgets.
func TestServiceScopes(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("svc")
	s := newService(t, c, `
default    = fixed-window,5,1h
api./a     = fixed-window,3,1h
api./b     = fixed-window,3,1h
user.vip   = fixed-window,2,1h
`, base, clock.NewFake())

	spend(t, s, "u", "/a", 3)
	assert.False(t, s.Check("u", "/a").Allowed, "/a: 3 of 3")
	assert.Equal(t, 3, left(s, "u", "/b"), "/b has equal rules and its own budget")
	assert.Equal(t, 3, left(s, "w", "/a"), "another user of /a")

	spend(t, s, "u", "/c", 5)
	assert.False(t, s.Check("u", "/c").Allowed, "/c: the default, 5 of 5")
	assert.Equal(t, 5, left(s, "u", "/d"), "/d: the default, its own budget")

	spend(t, s, "vip", "/a", 2)
	assert.Equal(t, admit.Decision{Limit: 2, RetryAfter: time.Hour, ResetAfter: time.Hour}, s.Check("vip", "/a"), "vip's rule on /a")
	assert.Equal(t, 2, left(s, "vip", "/c"), "vip's rule on /c: its own budget")

	assert.Equal(t, []string{base + "/a:{u}", base + "/a:{vip}", base + "/c:{u}"}, keys(t, c, base),
		"a pair's key is the base prefix, its API and ':', then the user as the hash tag; a probe of a fresh pair writes nothing")
}

// TestServiceAPINames: API names that hold the characters of the key's
// syntax are escaped: no name moves the hash tag or reaches another API's
// keys, not even one spelling another's escaped form.
func TestServiceAPINames(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("names")
	s := newService(t, c, "default = fixed-window,2,1h\n", base, clock.NewFake())
	apis := []string{"a{b}:c%d", "a%7Bb%7D%3Ac%25d", "a", "a:", "a:{x}", "", "}{"}
	for _, api := range apis {
		spend(t, s, "u", api, 2)
	}
	for _, api := range apis {
		assert.False(t, s.Check("u", api).Allowed, "API %q: 2 of 2, and nothing of another API's", api)
	}
	assert.Equal(t, []string{
		base + "%7D%7B:{u}",
		base + ":{u}",
		base + "a%257Bb%257D%253Ac%2525d:{u}",
		base + "a%3A%7Bx%7D:{u}",
		base + "a%3A:{u}",
		base + "a%7Bb%7D%3Ac%25d:{u}",
		base + "a:{u}",
	}, keys(t, c, base))
	for _, k := range keys(t, c, base) {
		assert.Equal(t, 1, strings.Count(k, "{"), "%s: one hash tag", k)
		assert.True(t, strings.HasSuffix(k, ":{u}"), "%s: the tag is the user's", k)
	}
}

// TestServiceSharedAcrossProcesses: two Services on one Redis, each with
// its own client (two processes), share each pair's budget: with time
// frozen, goroutines of both admit exactly the Limit between them, for a
// default, an API and a user entry, and a composite.
func TestServiceSharedAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	base := freshBase("shared")
	fake := clock.NewFake()
	const book = `
default  = token-bucket,40,1h
api./a   = sliding-counter,30,1h
user.vip = fixed-window,25,1h + sliding-log,35,1h
`
	svcs := []*policy.Service{
		newService(t, newClient(t, srv), book, base, fake),
		newService(t, newClient(t, srv), book, base, fake),
	}
	for _, tc := range []struct {
		user, api string
		limit     int
	}{{"u", "/x", 40}, {"u", "/a", 30}, {"vip", "/a", 25}} {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for g := range 8 {
			s := svcs[g%2]
			wg.Go(func() {
				n := 0
				for range 20 {
					if s.Check(tc.user, tc.api).Allowed {
						n++
					}
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		assert.Equal(t, tc.limit, total, "(%q, %q): two processes, eight goroutines", tc.user, tc.api)
		assert.Zero(t, left(svcs[0], tc.user, tc.api))
		assert.Zero(t, left(svcs[1], tc.user, tc.api))
	}
	// One process spends, the other sees it.
	spend(t, svcs[0], "w", "/a", 10)
	assert.Equal(t, 20, left(svcs[1], "w", "/a"))
}

// TestServiceReload: a Reload converts each pair's state in Redis on its
// first Check under the new limits, with the Reload's strategy: 7 of 10
// spent, raised to 20, leaves 13 with CarryConsumed, 6 with
// CarryProportional (the same fraction spent) and 20 with CarryNothing.
// Limits a Reload keeps keep their pairs' state, and converting with one
// strategy after another follows each Reload's.
func TestServiceReload(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	const (
		ten    = "default = token-bucket,50,1h\napi./a = fixed-window,10,1h\napi./b = fixed-window,10,1h\n"
		twenty = "default = token-bucket,50,1h\napi./a = fixed-window,20,1h\napi./b = fixed-window,10,1h\n"
	)
	for _, tc := range []struct {
		carry policy.Carry
		left  int
	}{{policy.CarryConsumed, 13}, {policy.CarryProportional, 6}, {policy.CarryNothing, 20}} {
		t.Run(tc.carry.String(), func(t *testing.T) {
			base := freshBase("reload")
			s := newService(t, c, ten, base, clock.NewFake())
			spend(t, s, "u", "/a", 7)
			spend(t, s, "u", "/b", 4)
			require.NoError(t, s.Reload(parseBook(t, twenty), policy.WithCarry(tc.carry)))
			assert.Equal(t, tc.left, left(s, "u", "/a"), "/a raised to 20")
			assert.Equal(t, 6, left(s, "u", "/b"), "/b unchanged keeps its state")

			// Back to 10, with CarryNothing: fresh, although the limits
			// of 10 stayed in the book (for /b) in between.
			spend(t, s, "u", "/a", 2)
			require.NoError(t, s.Reload(parseBook(t, ten), policy.WithCarry(policy.CarryNothing)))
			assert.Equal(t, 10, left(s, "u", "/a"), "back to 10, afresh")
			assert.Equal(t, 6, left(s, "u", "/b"))

			// And up again with the default, CarryConsumed.
			spend(t, s, "u", "/a", 3)
			require.NoError(t, s.Reload(parseBook(t, twenty)))
			assert.Equal(t, 17, left(s, "u", "/a"), "3 spent of 20")
		})
	}
}

// TestServiceRestartConverts: a process started with a changed book
// converts what its users spent under the old one (CarryConsumed), as a
// Reload would.
func TestServiceRestartConverts(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("restart")
	fake := clock.NewFake()
	old := newService(t, c, "default = fixed-window,10,1h\n", base, fake)
	spend(t, old, "u", "/a", 7)
	cur := newService(t, c, "default = fixed-window,20,1h\n", base, fake)
	assert.Equal(t, 13, left(cur, "u", "/a"))
}

// TestServiceComposite: a composite entry decides all its rules on one key,
// and CheckNWhich names the rule that bound.
func TestServiceComposite(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("composite")
	s := newService(t, c, "default = token-bucket,50,1h\napi./a = token-bucket,3,1h + fixed-window,5,1h\n", base, clock.NewFake())
	for i := range 3 {
		d, l, which := s.CheckNWhich("u", "/a", 1)
		require.True(t, d.Allowed, "call %d", i+1)
		assert.Equal(t, "token-bucket,3,1h + fixed-window,5,1h", l.String())
		assert.Equal(t, 0, which, "call %d: the token bucket has the fewest left", i+1)
	}
	d, _, which := s.CheckNWhich("u", "/a", 1)
	assert.Equal(t, admit.Decision{Limit: 3, RetryAfter: 20 * time.Minute, ResetAfter: time.Hour}, d)
	assert.Equal(t, 0, which, "the token bucket denies")
	d, _, which = s.CheckNWhich("u", "/a", 4)
	assert.Equal(t, [3]any{false, 3, admit.Never}, [3]any{d.Allowed, d.Limit, d.RetryAfter}, "never: 4 is over the bucket's 3")
	assert.Equal(t, 0, which)
	assert.Equal(t, []string{base + "/a:{u}"}, keys(t, c, base), "one key for both rules")
}

// TestServiceReset: Keyed has no Reset, so the Service's Reset is refused;
// the Limiter of the pair's prefix resets it.
func TestServiceReset(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("reset")
	fake := clock.NewFake()
	s := newService(t, c, "default = fixed-window,3,1h\n", base, fake)
	spend(t, s, "u", "/a", 3)
	err := s.Reset("u", "/a")
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "has no Reset")
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 3, Window: time.Hour}, redisstore.WithPrefix(base+"/a:"), redisstore.WithTestClock(fake))
	require.NoError(t, err)
	require.NoError(t, l.Reset(context.Background(), "u"))
	assert.Equal(t, 3, left(s, "u", "/a"))
}

// TestServiceObserved: policy.WithObserver, given with WithServiceOptions,
// counts every Check under its API and scope; redisstore.WithObserver
// counts each limiter under its prefix, and the limiters the Service builds
// only to check its limits ask for no Instrument.
func TestServiceObserved(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("observed")
	svcObs, limObs := new(observer), new(observer)
	s := newService(t, c, "default = fixed-window,2,1h\nuser.vip = fixed-window,1,1h\n", base, clock.NewFake(),
		redisstore.WithServiceOptions(policy.WithObserver(svcObs)), redisstore.WithObserver(limObs))
	assert.Empty(t, limObs.asked, "no API has been checked")
	for range 3 {
		s.Check("u", "/a")
		s.Check("vip", "/a")
	}
	def := mustLimits(t, "fixed-window,2,1h")
	vip := mustLimits(t, "fixed-window,1,1h")
	assert.ElementsMatch(t, []observe.Labels{
		{Source: "policy", Name: "/a", Scope: "default", Limits: def},
		{Source: "policy", Name: "/a", Scope: "user", Limits: vip},
	}, svcObs.asked)
	assert.ElementsMatch(t, []observe.Labels{
		{Source: "redis", Name: base + "/a:", Limits: def},
		{Source: "redis", Name: base + "/a:", Limits: vip},
	}, limObs.asked)
	got := map[string]counts{}
	for i, l := range svcObs.asked {
		got[l.Scope] = svcObs.insts[i].take()
	}
	assert.Equal(t, map[string]counts{
		"default": {"admitted": {2, 2}, "denied": {1, 1}},
		"user":    {"admitted": {1, 1}, "denied": {2, 2}},
	}, got)
}

// TestServiceOnErrorNamesTheAPI: a failed call reaches Policy.OnError with
// an error that names the API, and the Policy decides it.
func TestServiceOnErrorNamesTheAPI(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	base := freshBase("onerror")
	var (
		mu   sync.Mutex
		errs []string
	)
	p := servicePolicy
	p.OnError = func(key string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, key+": "+err.Error())
	}
	s, err := redisstore.NewService(c, parseBook(t, "default = fixed-window,2,1h\n"), p, redisstore.WithPrefix(base), redisstore.WithTestClock(clock.NewFake()))
	require.NoError(t, err)
	require.NoError(t, c.Set(context.Background(), base+"/a:{u}", "not a state", 0).Err())
	assert.Equal(t, admit.Decision{Limit: 2, RetryAfter: 30 * time.Minute}, s.Check("u", "/a"), "fail-closed")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], `u: API "/a": redisstore: fixed-window,2,1h, key "u": ADMIT`)
}

// TestNewServiceRefusesBadInput: each refusal says what is wrong.
func TestNewServiceRefusesBadInput(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer c.Close()
	deaf := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // no ContextTimeoutEnabled
	defer deaf.Close()
	book := parseBook(t, "default = fixed-window,2,1h\n")
	for _, tc := range []struct {
		name   string
		client redis.Scripter
		book   *policy.Book
		p      redisstore.Policy
		opts   []redisstore.Option
		is     error
		says   string
	}{
		{"nil client", nil, book, servicePolicy, nil, admit.ErrInvalidOption, "the client is nil"},
		{"nil *redis.Client", (*redis.Client)(nil), book, servicePolicy, nil, admit.ErrInvalidOption, "the client is nil"},
		{"nil book", c, nil, servicePolicy, nil, nil, "NewService(nil)"},
		{"FailLocal", c, book, redisstore.Policy{Mode: redisstore.FailLocal, Timeout: time.Second, Local: must(locked.New(book.Default()))}, nil, admit.ErrUnsupported, "choose FailClosed or FailOpen"},
		{"no mode", c, book, redisstore.Policy{Timeout: time.Second}, nil, admit.ErrInvalidOption, "choose FailClosed, FailOpen or FailLocal"},
		{"nil option", c, book, servicePolicy, []redisstore.Option{nil}, admit.ErrInvalidOption, "option 0 is nil"},
		{"WithCarry", c, book, servicePolicy, []redisstore.Option{redisstore.WithCarry(policy.CarryConsumed)}, admit.ErrInvalidOption, "leave WithCarry out"},
		{"bad prefix", c, book, servicePolicy, []redisstore.Option{redisstore.WithPrefix("a{")}, admit.ErrInvalidOption, "may not contain"},
		{"admit.WithClock", c, book, servicePolicy, []redisstore.Option{redisstore.WithServiceOptions(admit.WithClock(clock.NewFake()))}, admit.ErrUnsupported, "redisstore.WithClock"},
		{"policy.WithFactory", c, book, servicePolicy, []redisstore.Option{redisstore.WithServiceOptions(policy.WithFactory(locked.New))}, admit.ErrInvalidOption, "pass one or the other"},
		{"policy.WithLimiterFactory", c, book, servicePolicy, []redisstore.Option{redisstore.WithServiceOptions(policy.WithLimiterFactory(func(policy.Target) (admit.KeyedLimiter, error) { return locked.New(book.Default()) }))}, admit.ErrInvalidOption, "leave the factory out"},
		{"a rule beyond server time", c, parseBook(t, "default = fixed-window,2,1500ns\n"), servicePolicy, nil, admit.ErrUnsupported, "whole number of microseconds"},
		{"no deadlines", deaf, book, servicePolicy, nil, admit.ErrInvalidOption, "ContextTimeoutEnabled"},
	} {
		_, err := redisstore.NewService(tc.client, tc.book, tc.p, tc.opts...)
		if assert.Error(t, err, tc.name) {
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is, tc.name)
			}
			assert.ErrorContains(t, err, tc.says, tc.name)
		}
	}
	// WithServiceOptions is NewService's only.
	_, err := redisstore.New(c, book.Default(), redisstore.WithServiceOptions())
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "pass it to redisstore.NewService")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
