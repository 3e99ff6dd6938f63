package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
)

func service(t testing.TB, book *policy.Book, opts ...admit.Option) *policy.Service {
	t.Helper()
	s, err := policy.NewService(book, opts...)
	require.NoError(t, err)
	return s
}

func allowed(limit, remaining int, reset time.Duration) admit.Decision {
	return admit.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func denied(limit int, retry, reset time.Duration) admit.Decision {
	return admit.Decision{Limit: limit, RetryAfter: retry, ResetAfter: reset}
}

// check is one scripted request: at the fake clock's time at, Check(user, api).
type check struct {
	at        time.Duration
	user, api string
	want      admit.Decision
}

func runChecks(t *testing.T, s *policy.Service, fake *clock.Fake, steps []check) {
	t.Helper()
	for i, st := range steps {
		fake.Set(st.at)
		if got := s.Check(st.user, st.api); got != st.want {
			t.Errorf("step %d: Check(t=%v, %q, %q) = %+v, want %+v", i, st.at, st.user, st.api, got, st.want)
		}
	}
}

// TestServiceSeedWalkthrough replays parts one to three of the design notes'
// walkthrough through a Service built from the notes' config.
func TestServiceSeedWalkthrough(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, seedConfig), admit.WithClock(fake))
	sec := time.Second
	runChecks(t, s, fake, []check{
		// Part one: alice on /orders, the default rule (token bucket, 5 per 10s).
		{0, "alice", "/orders", allowed(5, 4, 2*sec)},
		{0, "alice", "/orders", allowed(5, 3, 4*sec)},
		{0, "alice", "/orders", allowed(5, 2, 6*sec)},
		{0, "alice", "/orders", allowed(5, 1, 8*sec)},
		{0, "alice", "/orders", allowed(5, 0, 10*sec)},
		{0, "alice", "/orders", denied(5, 2*sec, 10*sec)},
		{2 * sec, "alice", "/orders", allowed(5, 0, 10*sec)},
		// Part two: /login has its own rule (fixed window, 2 per 10s) and counter.
		{2 * sec, "alice", "/login", allowed(2, 1, 8*sec)},
		{2 * sec, "alice", "/login", allowed(2, 0, 8*sec)},
		{2 * sec, "alice", "/login", denied(2, 8*sec, 8*sec)},
		// Part three: bob has his own budget; vip-1 has a user rule (8 per 10s).
		{2 * sec, "bob", "/orders", allowed(5, 4, 2*sec)},
		{2 * sec, "vip-1", "/orders", allowed(8, 7, 1250*time.Millisecond)},
		{2 * sec, "vip-1", "/orders", allowed(8, 6, 2500*time.Millisecond)},
		{2 * sec, "vip-1", "/orders", allowed(8, 5, 3750*time.Millisecond)},
		{2 * sec, "vip-1", "/orders", allowed(8, 4, 5*sec)},
		{2 * sec, "vip-1", "/orders", allowed(8, 3, 6250*time.Millisecond)},
		{2 * sec, "vip-1", "/orders", allowed(8, 2, 7500*time.Millisecond)},
		// vip-1's user rule applies on /login too, with a separate budget.
		{2 * sec, "vip-1", "/login", allowed(8, 7, 1250*time.Millisecond)},
	})
}

func TestServiceIsolation(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, "default = fixed-window,2,10\napi./login = fixed-window,1,10\nuser.vip-1 = fixed-window,3,10\n"), admit.WithClock(fake))
	spend := func(user, api string) int {
		n := 0
		for s.Check(user, api).Allowed {
			n++
		}
		return n
	}
	// Every pair has a budget of its own, whatever rule it runs under.
	for _, tc := range []struct {
		user, api string
		want      int
	}{
		{"alice", "/orders", 2}, {"bob", "/orders", 2}, {"alice", "/cart", 2}, // default: per user and per API
		{"alice", "/login", 1}, {"bob", "/login", 1}, // API rule: per user
		{"vip-1", "/orders", 3}, {"vip-1", "/login", 3}, {"vip-1", "/cart", 3}, // user rule: per API
		{"vip-1 ", "/orders", 2}, {"VIP-1", "/orders", 2}, {"", "", 2}, // names are exact
	} {
		assert.Equal(t, tc.want, spend(tc.user, tc.api), "requests admitted for (%q, %q)", tc.user, tc.api)
	}
	// Spent budgets stay spent.
	assert.False(t, s.Check("alice", "/orders").Allowed)
	assert.False(t, s.Check("vip-1", "/login").Allowed)
	fake.Advance(10 * time.Second)
	assert.True(t, s.Check("alice", "/orders").Allowed)
}

func TestServiceCheckN(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, seedConfig), admit.WithClock(fake))
	assert.Equal(t, allowed(5, 2, 6*time.Second), s.CheckN("alice", "/orders", 3))
	assert.Equal(t, denied(5, 2*time.Second, 6*time.Second), s.CheckN("alice", "/orders", 3))
	assert.Equal(t, denied(5, admit.Never, 6*time.Second), s.CheckN("alice", "/orders", 6))
	assert.Equal(t, allowed(5, 2, 6*time.Second), s.CheckN("alice", "/orders", 0))
}

// TestServiceCopiesNames checks that the Service keeps its own copy of an API
// name: a caller may build names in a buffer it reuses.
func TestServiceCopiesNames(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, "default = fixed-window,1,10\nuser.u = fixed-window,1,10"), admit.WithClock(fake))
	for _, user := range []string{"alice", "u"} {
		buf := []byte("/orders")
		api := unsafe.String(&buf[0], len(buf))
		require.True(t, s.Check(user, api).Allowed)
		copy(buf, "/zzzzzz")
		assert.False(t, s.Check(user, "/orders").Allowed, "%s: /orders is spent", user)
		assert.True(t, s.Check(user, "/zzzzzz").Allowed, "%s: /zzzzzz is fresh", user)
	}
}

// TestServiceFirstUseRace: many goroutines make the first requests of one
// pair at once, with the clock frozen. The pair's limiter is built once, so
// exactly Limit of them pass.
func TestServiceFirstUseRace(t *testing.T) {
	for _, src := range []string{"default", "user"} {
		t.Run("source="+src, func(t *testing.T) {
			for range 20 {
				s := service(t, parse(t, "default = token-bucket,10,1h\nuser.vip = token-bucket,10,1h"), admit.WithClock(clock.NewFake()))
				user := map[string]string{"default": "alice", "user": "vip"}[src]
				var (
					wg    sync.WaitGroup
					n     atomic.Int64
					start = make(chan struct{})
				)
				for range 8 {
					wg.Go(func() {
						<-start
						for range 5 {
							if s.Check(user, "/new").Allowed {
								n.Add(1)
							}
						}
					})
				}
				close(start)
				wg.Wait()
				require.Equal(t, int64(10), n.Load(), "40 first requests of one pair admitted")
			}
		})
	}
}

func TestServiceCheckAllocs(t *testing.T) {
	s := service(t, parse(t, seedConfig), admit.WithClock(clock.NewFake()))
	for _, pair := range [][2]string{{"alice", "/orders"}, {"alice", "/login"}, {"vip-1", "/orders"}, {"vip-1", "/login"}} {
		s.Check(pair[0], pair[1]) // the pair exists from now on
		// Names built at run time, as a server would: not constants the
		// compiler could fold.
		user, api := strings.Clone(pair[0]), strings.Clone(pair[1])
		allocs := testing.AllocsPerRun(1000, func() { s.Check(user, api) })
		assert.Zero(t, allocs, "Check(%q, %q) on an existing pair", user, api)
	}
	// Every rule, packed or not: the default store keeps states inline.
	for _, rule := range []string{"token-bucket,3,10s", "token-bucket,1000000,1h", "fixed-window,5,10s", "sliding-counter,70000,1h", "sliding-counter,10,1s", "sliding-log,5,10s"} {
		s := service(t, parse(t, "default = "+rule), admit.WithClock(clock.NewFake()))
		user := strings.Clone("alice")
		s.Check(user, "/orders")
		allocs := testing.AllocsPerRun(1000, func() { s.CheckN(user, "/orders", 0); s.Check(user, "/orders") })
		assert.Zero(t, allocs, "%s: Check on an existing pair", rule)
	}
}

// factory records the rules it is asked to build and fails for those fail
// says.
type factory struct {
	mu    sync.Mutex
	built []admit.Rule
	fail  func(admit.Rule) bool
}

var errFactory = errors.New("factory says no")

func (f *factory) New(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.built = append(f.built, r)
	if f.fail != nil && f.fail(r) {
		return nil, errFactory
	}
	return locked.New(r, opts...)
}

func (f *factory) rules() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.built {
		out = append(out, r.String())
	}
	return out
}

func TestNewServiceBuildsEveryRuleUpFront(t *testing.T) {
	f := &factory{}
	book := parse(t, "default = token-bucket,5,10\napi./login = fixed-window,2,10\napi./pay = fixed-window,2,10\nuser.vip-1 = token-bucket,8,10\nuser.vip-2 = token-bucket,8,10\n")
	fake := clock.NewFake()
	s := service(t, book, policy.WithFactory(f.New), admit.WithClock(fake))
	// One limiter for each API rule, one to prove each other rule.
	assert.ElementsMatch(t, []string{"fixed-window,2,10s", "fixed-window,2,10s", "token-bucket,5,10s", "token-bucket,8,10s"}, f.rules())
	// The other options reach the factory: the limiters read the fake clock.
	for range 2 {
		s.Check("a", "/login")
	}
	assert.Equal(t, denied(2, 10*time.Second, 10*time.Second), s.Check("a", "/login"))
	fake.Advance(10 * time.Second)
	assert.True(t, s.Check("a", "/login").Allowed)
}

func TestNewServiceErrors(t *testing.T) {
	book := parse(t, seedConfig)
	_, err := policy.NewService(nil)
	assert.EqualError(t, err, "policy: NewService(nil): want a *Book from Parse, ParseJSON or Load")
	_, err = policy.NewService(&policy.Book{})
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	assert.EqualError(t, err, "policy: the book has no default rule; build it with Parse, ParseJSON or Load: admit: invalid rule")
	_, err = policy.NewService(book, admit.WithClock(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = policy.NewService(book, nil)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)

	// A rule the factory rejects fails NewService, whichever scope it has.
	for _, tc := range []struct{ fail, msg string }{
		{"fixed-window,2,10s", "policy: building the limiter of api./login = fixed-window,2,10s: factory says no"},
		{"token-bucket,5,10s", "policy: building the limiter of default = token-bucket,5,10s: factory says no"},
		{"token-bucket,8,10s", "policy: building the limiter of user.vip-1 = token-bucket,8,10s: factory says no"},
	} {
		f := &factory{fail: func(r admit.Rule) bool { return r.String() == tc.fail }}
		_, err = policy.NewService(book, policy.WithFactory(f.New))
		assert.ErrorIs(t, err, errFactory)
		assert.EqualError(t, err, tc.msg)
	}

	// A factory that returns neither a limiter nor an error.
	_, err = policy.NewService(book, policy.WithFactory(func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error) { return nil, nil }))
	assert.EqualError(t, err, "policy: building the limiter of api./login = fixed-window,2,10s: the factory returned a nil limiter and no error")

	// The variant's own errors surface as they are.
	unsupported := func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		if r.Algorithm == admit.SlidingLog {
			return nil, fmt.Errorf("%w: toy variant has no sliding log; use locked", admit.ErrUnsupported)
		}
		return locked.New(r, opts...)
	}
	_, err = policy.NewService(parse(t, "default = token-bucket,5,10\nuser.x = sliding-log,5,10"), policy.WithFactory(unsupported))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
}

// TestServiceLateFactoryFailure: a factory that fails after start-up (no
// variant of admit does) makes Check fail closed, and the next request tries
// again.
func TestServiceLateFactoryFailure(t *testing.T) {
	var broken atomic.Bool
	f := &factory{fail: func(admit.Rule) bool { return broken.Load() }}
	s := service(t, parse(t, "default = token-bucket,5,10"), policy.WithFactory(f.New), admit.WithClock(clock.NewFake()))
	broken.Store(true)
	assert.Equal(t, admit.Decision{Limit: 5, RetryAfter: 10 * time.Second}, s.Check("alice", "/orders"))
	broken.Store(false)
	assert.Equal(t, allowed(5, 4, 2*time.Second), s.Check("alice", "/orders"))
}

func TestServiceBook(t *testing.T) {
	book := parse(t, seedConfig)
	s := service(t, book)
	assert.Equal(t, book, s.Book())
	assert.NotSame(t, book, s.Book(), "the service keeps its own copy")
	next := parse(t, "default = sliding-log,3,1")
	require.NoError(t, s.Reload(next, policy.WithCarry(policy.CarryNothing)))
	assert.Equal(t, next, s.Book())
}

// TestReload pins what a Reload keeps and what it starts afresh with
// WithCarry(policy.CarryNothing); carry_test.go has the other strategies.
func TestReload(t *testing.T) {
	sec := time.Second
	fake := clock.NewFake()
	s := service(t, parse(t, `
default    = token-bucket,5,10
api./login = fixed-window,2,10
api./pay   = fixed-window,3,10
user.vip-1 = token-bucket,8,10
user.vip-2 = token-bucket,8,10
`), admit.WithClock(fake))
	spend := func(user, api string, n int) {
		for range n {
			require.True(t, s.Check(user, api).Allowed)
		}
	}
	spend("alice", "/orders", 5) // default
	spend("alice", "/cart", 5)   // default, becomes an API rule with the same rule
	spend("alice", "/login", 2)  // API rule, unchanged
	spend("alice", "/pay", 3)    // API rule, changed
	spend("vip-1", "/orders", 8) // user rule, unchanged
	spend("vip-2", "/orders", 8) // user rule, removed: vip-2 falls back to the default
	spend("bob", "/orders", 5)   // default, bob gets a user rule equal to the default

	require.NoError(t, s.Reload(parse(t, `
default    = token-bucket,5,10
api./login = fixed-window,2,10
api./pay   = fixed-window,4,10
api./cart  = token-bucket,5,10
user.vip-1 = token-bucket,8,10
user.bob   = token-bucket,5,10
`), policy.WithCarry(policy.CarryNothing)))
	runChecks(t, s, fake, []check{
		// Unchanged rules keep their state, wherever the rule comes from: no
		// fresh budget on reload.
		{0, "alice", "/orders", denied(5, 2*sec, 10*sec)},
		{0, "alice", "/cart", denied(5, 2*sec, 10*sec)},
		{0, "alice", "/login", denied(2, 10*sec, 10*sec)},
		{0, "vip-1", "/orders", denied(8, 1250*time.Millisecond, 10*sec)},
		{0, "bob", "/orders", denied(5, 2*sec, 10*sec)},
		// Changed rules start fresh under the new rule.
		{0, "alice", "/pay", allowed(4, 3, 10*sec)},
		{0, "vip-2", "/orders", allowed(5, 4, 2*sec)},
	})

	// Back to the first book: /pay resumes its fixed-window,3 state? No: that
	// rule left the book, so its state was released and /pay starts fresh.
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,5,10\napi./pay = fixed-window,3,10\n"), policy.WithCarry(policy.CarryNothing)))
	runChecks(t, s, fake, []check{
		{0, "alice", "/pay", allowed(3, 2, 10*sec)},
		{0, "alice", "/orders", denied(5, 2*sec, 10*sec)}, // the default never changed
		{0, "vip-1", "/orders", allowed(5, 4, 2*sec)},     // vip-1 now runs under the default
	})
}

func TestReloadRejectsBadBooks(t *testing.T) {
	fake := clock.NewFake()
	var failPay atomic.Bool
	f := &factory{fail: func(r admit.Rule) bool { return failPay.Load() && r.Limit == 4 }}
	s := service(t, parse(t, seedConfig), admit.WithClock(fake), policy.WithFactory(f.New))
	for range 5 {
		s.Check("alice", "/orders")
	}
	old := s.Book()

	assert.EqualError(t, s.Reload(nil), "policy: Reload(nil): want a *Book from Parse, ParseJSON or Load; the current book stays in force")
	assert.ErrorIs(t, s.Reload(&policy.Book{}), admit.ErrInvalidRule)
	failPay.Store(true)
	err := s.Reload(parse(t, "default = token-bucket,5,10\napi./pay = fixed-window,4,10\n"))
	assert.EqualError(t, err, "policy: building the limiter of api./pay = fixed-window,4,10s: factory says no")
	err = s.Reload(parse(t, "default = token-bucket,5,10\nuser.x = fixed-window,4,10\n"))
	assert.EqualError(t, err, "policy: building the limiter of user.x = fixed-window,4,10s: factory says no")

	// The old book is still in force, state included.
	assert.Same(t, old, s.Book())
	assert.Equal(t, denied(5, 2*time.Second, 10*time.Second), s.Check("alice", "/orders"))
	assert.Equal(t, allowed(2, 1, 10*time.Second), s.Check("alice", "/login"))
}

// TestReloadRace checks while another goroutine reloads between two books,
// with each strategy. Every decision must come from one of the two books'
// rules for its pair (the books give the pairs different Limits, so
// Decision.Limit says which), and the pairs whose rule both books share
// must keep their state: with the clock frozen, exactly Limit of their
// requests pass over the whole run.
func TestReloadRace(t *testing.T) {
	for _, c := range []policy.Carry{policy.CarryConsumed, policy.CarryProportional, policy.CarryNothing} {
		t.Run("carry="+c.String(), func(t *testing.T) { testReloadRace(t, c) })
	}
}

func testReloadRace(t *testing.T, carry policy.Carry) {
	bookA := parse(t, `
default    = token-bucket,30,1h
api./flip  = fixed-window,10,1h
api./same  = sliding-log,20,1h
user.vip   = token-bucket,40,1h
user.gold  = fixed-window,7,1h
`)
	bookB := parse(t, `
default    = token-bucket,30,1h
api./flip  = fixed-window,11,1h
api./same  = sliding-log,20,1h
api./moved = token-bucket,30,1h
user.vip   = token-bucket,41,1h
user.gold  = sliding-counter,7,1h
user.plat  = token-bucket,30,1h
`)
	type pair struct{ user, api string }
	var pairs []pair
	for _, u := range []string{"alice", "bob", "vip", "gold", "plat"} {
		for _, a := range []string{"/orders", "/flip", "/same", "/moved"} {
			pairs = append(pairs, pair{u, a})
		}
	}
	stable := map[pair]int{} // the pairs whose rule is the same in both books, and its Limit
	for _, p := range pairs {
		if ra, rb := bookA.RuleFor(p.user, p.api), bookB.RuleFor(p.user, p.api); ra == rb {
			stable[p] = ra.Limit
		}
	}
	require.Len(t, stable, 8, "alice and bob on /orders, /same and /moved; plat, whose user rule in B equals the default, on /orders and /moved")

	s := service(t, bookA, admit.WithClock(clock.NewFake()))
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	var (
		wg       sync.WaitGroup
		admitted = make([]atomic.Int64, len(pairs))
		reloads  atomic.Int64
		stop     atomic.Bool
		start    = make(chan struct{})
		errs     = make(chan string, 16)
	)
	for g := range 8 {
		wg.Go(func() {
			<-start
			for r := 0; r < rounds || !stop.Load(); r++ {
				for i := range pairs {
					p := pairs[(i+g)%len(pairs)]
					d := s.Check(p.user, p.api)
					la, lb := bookA.RuleFor(p.user, p.api).Limit, bookB.RuleFor(p.user, p.api).Limit
					if d.Limit != la && d.Limit != lb {
						select {
						case errs <- fmt.Sprintf("Check(%q, %q).Limit = %d, want %d (book A) or %d (book B)", p.user, p.api, d.Limit, la, lb):
						default:
						}
					}
					if d.Allowed {
						admitted[(i+g)%len(pairs)].Add(1)
					}
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for i := 0; i < 2*rounds; i++ {
			book := bookA
			if i%2 == 0 {
				book = bookB
			}
			if err := s.Reload(book, policy.WithCarry(carry)); err != nil {
				errs <- err.Error()
			}
			reloads.Add(1)
		}
		stop.Store(true)
	})
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	assert.Equal(t, int64(2*rounds), reloads.Load())
	for i, p := range pairs {
		if limit, ok := stable[p]; ok {
			assert.Equal(t, int64(limit), admitted[i].Load(), "admitted for (%q, %q), whose rule never changed", p.user, p.api)
		}
	}
}

// TestReloadResumesEarlierState pins the documented corner of a Reload
// with WithCarry(policy.CarryNothing): a pair whose rule changes back to one
// it ran under before resumes that earlier state, provided the rule stayed
// in use in between (its state was kept).
func TestReloadResumesEarlierState(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, "default = token-bucket,5,10\nuser.u = fixed-window,2,10\n"), admit.WithClock(fake))
	s.Check("u", "/x")
	s.Check("u", "/x")
	// u moves to another rule; v keeps fixed-window,2,10 in use.
	nothing := policy.WithCarry(policy.CarryNothing)
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,5,10\nuser.u = fixed-window,3,10\nuser.v = fixed-window,2,10\n"), nothing))
	assert.Equal(t, allowed(3, 2, 10*time.Second), s.Check("u", "/x"), "a new rule starts fresh")
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,5,10\nuser.u = fixed-window,2,10\n"), nothing))
	assert.Equal(t, denied(2, 10*time.Second, 10*time.Second), s.Check("u", "/x"), "back under fixed-window,2,10: still spent")
}
