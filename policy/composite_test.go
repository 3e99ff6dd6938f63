package policy_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// compositeBook has a composite default, a composite user entry and a
// one-rule API entry.
const compositeBook = `
default    = token-bucket,2,1s + fixed-window,5,1h
api./login = fixed-window,2,10s
user.vip-1 = token-bucket,4,1s + sliding-log,6,1m
`

// whichCheck is one scripted request: at the fake clock's time at,
// CheckNWhich(user, api, n), and the decision and binding rule's index it
// must return.
type whichCheck struct {
	at        time.Duration
	user, api string
	n         int
	want      admit.Decision
	which     int
}

func runWhichChecks(t *testing.T, s *policy.Service, fake *clock.Fake, steps []whichCheck) {
	t.Helper()
	for i, st := range steps {
		fake.Set(st.at)
		d, l, which := s.CheckNWhich(st.user, st.api, st.n)
		if d != st.want || which != st.which {
			t.Errorf("step %d: CheckNWhich(t=%v, %q, %q, %d) = %+v, rule %d, want %+v, rule %d",
				i, st.at, st.user, st.api, st.n, d, which, st.want, st.which)
		}
		if want := s.Book().LimitsFor(st.user, st.api); l != want {
			t.Errorf("step %d: CheckNWhich(t=%v, %q, %q, %d) limits %v, want %v", i, st.at, st.user, st.api, st.n, l, want)
		}
	}
}

// TestServiceComposite scripts a Service over composites, every rule's
// decision at the fake clock's readings: a request is admitted only if every
// rule admits it, a denial charges no rule, and CheckNWhich names the rule
// that bound.
func TestServiceComposite(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, compositeBook), admit.WithClock(fake))
	ms, sec, hour := time.Millisecond, time.Second, time.Hour
	runWhichChecks(t, s, fake, []whichCheck{
		// The default: 2 per second (token bucket) and 5 per hour (fixed
		// window). The bucket binds first.
		{0, "alice", "/orders", 1, allowed(2, 1, hour), 0},
		{0, "alice", "/orders", 1, allowed(2, 0, hour), 0},
		{0, "alice", "/orders", 1, denied(2, 500*ms, hour), 0},
		{sec, "alice", "/orders", 2, allowed(2, 0, hour-sec), 0},
		// 4 of the window's 5 are spent: the window binds, and a denial by
		// the window leaves the bucket's tokens where they are.
		{3 * sec, "alice", "/orders", 1, allowed(5, 0, hour-3*sec), 1},
		{3 * sec, "alice", "/orders", 1, denied(5, hour-3*sec, hour-3*sec), 1},
		{hour, "alice", "/orders", 2, allowed(2, 0, hour), 0},
		// bob has budgets of his own; a one-rule API entry binds with index 0.
		{hour, "bob", "/orders", 1, allowed(2, 1, hour), 0},
		{hour, "alice", "/login", 1, allowed(2, 1, 10*sec), 0},
		{hour, "alice", "/login", 1, allowed(2, 0, 10*sec), 0},
		{hour, "alice", "/login", 1, denied(2, 10*sec, 10*sec), 0},
		// vip-1's composite, on every API, with a budget on each. n above
		// the smallest Limit can never be admitted.
		{hour, "vip-1", "/login", 4, allowed(4, 0, time.Minute), 0},
		{hour, "vip-1", "/login", 5, denied(4, admit.Never, time.Minute), 0},
		{hour + sec, "vip-1", "/login", 3, denied(6, time.Minute-sec, time.Minute-sec), 1},
		{hour + sec, "vip-1", "/login", 2, allowed(6, 0, time.Minute), 1},
		{hour + sec, "vip-1", "/orders", 1, allowed(4, 3, time.Minute), 0},
	})
	// Check and CheckN decide as CheckNWhich does.
	fake.Set(2 * hour)
	assert.Equal(t, allowed(2, 1, hour), s.Check("carol", "/orders"))
	assert.Equal(t, allowed(2, 1, hour), s.CheckN("carol", "/orders", 0))
}

// TestServiceCheckNWhichOneRule: for a one-rule entry CheckNWhich is CheckN
// with the entry's Limits and index 0.
func TestServiceCheckNWhichOneRule(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, seedConfig), admit.WithClock(fake))
	for _, p := range [][2]string{{"alice", "/orders"}, {"alice", "/login"}, {"vip-1", "/orders"}} {
		d, l, which := s.CheckNWhich(p[0], p[1], 1)
		assert.True(t, d.Allowed)
		assert.Equal(t, s.Book().LimitsFor(p[0], p[1]), l, "CheckNWhich(%q, %q) limits", p[0], p[1])
		assert.Equal(t, 1, l.Len())
		assert.Zero(t, which, "CheckNWhich(%q, %q) index", p[0], p[1])
	}
}

// limitsFactory records the limits it is asked to build and fails while
// fail says so.
type limitsFactory struct {
	mu    sync.Mutex
	built []string
	fail  atomic.Bool
}

func (f *limitsFactory) New(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.built = append(f.built, l.String())
	if f.fail.Load() {
		return nil, errFactory
	}
	return locked.NewLimits(l, opts...)
}

func (f *limitsFactory) limits() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.built...)
}

// TestServiceFactories: one-rule entries are built by the Factory
// (WithFactory, else sharded.New), composites by the LimitsFactory
// (WithLimitsFactory, else sharded.NewLimits unless WithFactory was given),
// with every other option.
func TestServiceFactories(t *testing.T) {
	book := parse(t, compositeBook)

	t.Run("both", func(t *testing.T) {
		var rf factory
		var lf limitsFactory
		fake := clock.NewFake()
		s := service(t, book, policy.WithFactory(rf.New), policy.WithLimitsFactory(lf.New), admit.WithClock(fake))
		assert.Equal(t, []string{"fixed-window,2,10s"}, rf.rules(), "the one-rule entry, by the Factory")
		assert.ElementsMatch(t, []string{"token-bucket,2,1s + fixed-window,5,1h", "token-bucket,4,1s + sliding-log,6,1m"}, lf.limits(), "the composites, by the LimitsFactory")
		// The limiters read the fake clock.
		for range 2 {
			require.True(t, s.Check("a", "/orders").Allowed)
		}
		assert.Equal(t, denied(2, 500*time.Millisecond, time.Hour), s.Check("a", "/orders"))
		fake.Advance(500 * time.Millisecond)
		assert.True(t, s.Check("a", "/orders").Allowed)
	})

	t.Run("limits factory only", func(t *testing.T) {
		var lf limitsFactory
		s := service(t, book, policy.WithLimitsFactory(lf.New), admit.WithClock(clock.NewFake()))
		assert.Len(t, lf.limits(), 2)
		assert.True(t, s.Check("a", "/login").Allowed, "a one-rule entry, by sharded.New")
	})

	t.Run("factory only", func(t *testing.T) {
		var rf factory
		_, err := policy.NewService(book, policy.WithFactory(rf.New))
		require.Error(t, err)
		assert.ErrorIs(t, err, admit.ErrUnsupported)
		assert.EqualError(t, err, "policy: building the limiter of default = token-bucket,2,1s + fixed-window,5,1h: admit: unsupported: WithFactory builds the limiters of single rules, and this is a composite of 2; pass WithLimitsFactory too, such as WithLimitsFactory(locked.NewLimits) beside WithFactory(locked.New)")

		// Reload refuses it too, and the old book stays in force.
		s := service(t, parse(t, seedConfig), policy.WithFactory(rf.New))
		old := s.Book()
		err = s.Reload(parse(t, "default = token-bucket,5,10\nuser.x = fixed-window,1,1s + fixed-window,5,1m\n"))
		assert.ErrorIs(t, err, admit.ErrUnsupported)
		assert.ErrorContains(t, err, "policy: building the limiter of user.x = fixed-window,1,1s + fixed-window,5,1m: ")
		assert.ErrorContains(t, err, "pass WithLimitsFactory")
		assert.Same(t, old, s.Book())
	})

	t.Run("errors", func(t *testing.T) {
		_, err := policy.NewService(book, policy.WithLimitsFactory[admit.KeyedLimiter](nil))
		assert.ErrorIs(t, err, admit.ErrInvalidOption)
		assert.ErrorContains(t, err, "WithLimitsFactory(nil)")

		var lf limitsFactory
		lf.fail.Store(true)
		_, err = policy.NewService(book, policy.WithLimitsFactory(lf.New))
		assert.ErrorIs(t, err, errFactory)

		_, err = policy.NewService(book, policy.WithLimitsFactory(func(admit.Limits, ...admit.Option) (admit.KeyedLimiter, error) { return nil, nil }))
		assert.EqualError(t, err, "policy: building the limiter of default = token-bucket,2,1s + fixed-window,5,1h: the limits factory returned a nil limiter and no error")

		// A composite's limiter must name the rule that bound.
		_, err = policy.NewService(book, policy.WithLimitsFactory(func(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
			lim, err := sharded.NewLimits(l, opts...)
			return opaque{lim}, err
		}))
		assert.ErrorIs(t, err, admit.ErrUnsupported)
		assert.ErrorContains(t, err, "policy_test.opaque, has no AllowNWhich")

		// Only NewService takes a limits factory.
		_, err = sharded.NewLimits(limits(t, "token-bucket,2,1s + fixed-window,5,1h"), policy.WithLimitsFactory(sharded.NewLimits))
		assert.ErrorIs(t, err, admit.ErrUnsupported)
		assert.ErrorContains(t, err, "policy.WithLimitsFactory")
		_, err = sharded.New(rule(t, "token-bucket,2,1s"), policy.WithLimitsFactory(sharded.NewLimits))
		assert.ErrorIs(t, err, admit.ErrUnsupported)
	})
}

// TestServiceCompositeLateFactoryFailure: a limits factory that fails after
// start-up makes Check fail closed under the rule with the longest Window,
// and the next request tries again.
func TestServiceCompositeLateFactoryFailure(t *testing.T) {
	var lf limitsFactory
	s := service(t, parse(t, "default = token-bucket,2,1s + fixed-window,5,1h + sliding-log,3,1m"), policy.WithLimitsFactory(lf.New), admit.WithClock(clock.NewFake()))
	lf.fail.Store(true)
	d, _, which := s.CheckNWhich("alice", "/orders", 1)
	assert.Equal(t, admit.Decision{Limit: 5, RetryAfter: time.Hour}, d)
	assert.Equal(t, 1, which)
	lf.fail.Store(false)
	d, _, which = s.CheckNWhich("alice", "/orders", 1)
	assert.Equal(t, allowed(2, 1, time.Hour), d)
	assert.Zero(t, which)
}

// TestReloadComposite: a pair whose limits are the same in both books keeps
// its budget under every rule, whether the limits are a composite or one
// rule; a composite that changes in any way (a rule changed, added or
// dropped, or the rules reordered) is new limits, with a fresh budget under
// WithCarry(policy.CarryNothing).
func TestReloadComposite(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, `
default    = token-bucket,2,1h + fixed-window,3,1h
api./same  = token-bucket,2,1h + fixed-window,3,1h
api./swap  = token-bucket,2,1h + fixed-window,3,1h
api./grow  = token-bucket,2,1h + fixed-window,3,1h
api./one   = fixed-window,2,1h
user.vip-1 = sliding-log,2,1h + sliding-counter,3,1h
`), admit.WithClock(fake))
	pairs := [][2]string{{"alice", "/orders"}, {"alice", "/same"}, {"alice", "/swap"}, {"alice", "/grow"}, {"alice", "/one"}, {"vip-1", "/x"}}
	for _, p := range pairs {
		require.Equal(t, 2, spend(t, s, p[0], p[1]), "spending (%s, %s)", p[0], p[1])
	}
	require.NoError(t, s.Reload(parse(t, `
default    = token-bucket,2,1h + fixed-window,3,1h
api./same  = token-bucket,2,1h + fixed-window,3,1h
api./swap  = fixed-window,3,1h + token-bucket,2,1h
api./grow  = token-bucket,2,1h + fixed-window,3,1h + sliding-log,9,1h
api./one   = fixed-window,2,1h + token-bucket,9,1h
user.vip-1 = sliding-log,2,1h + sliding-counter,3,1h
`), policy.WithCarry(policy.CarryNothing)))
	for _, tc := range []struct {
		user, api string
		want      int
	}{
		{"alice", "/orders", 0}, {"alice", "/same", 0}, {"vip-1", "/x", 0}, // unchanged: still spent
		{"alice", "/swap", 2}, {"alice", "/grow", 2}, {"alice", "/one", 2}, // changed: fresh
	} {
		assert.Equal(t, tc.want, spend(t, s, tc.user, tc.api), "Checks admitted for (%s, %s) after the reload", tc.user, tc.api)
	}
	// A composite becomes one rule: fresh under the rule.
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,2,1h\n"), policy.WithCarry(policy.CarryNothing)))
	assert.Equal(t, 2, spend(t, s, "alice", "/orders"))
}

// TestServiceResetComposite: Reset gives a composite pair its budget back
// under every rule, and touches no other pair, with each factory.
func TestServiceResetComposite(t *testing.T) {
	for _, f := range []struct {
		name string
		book string
		opts []admit.Option
	}{
		{"default", compositeBook, nil},
		// atomic has no sliding log (a sliding counter stands in for it) and
		// no keyed composite (sharded's builds them).
		{"atomic", strings.Replace(compositeBook, "sliding-log", "sliding-counter", 1), []admit.Option{policy.WithFactory(admitatomic.New), policy.WithLimitsFactory(sharded.NewLimits)}},
		{"locked", compositeBook, []admit.Option{policy.WithFactory(locked.New), policy.WithLimitsFactory(locked.NewLimits)}},
	} {
		t.Run(f.name, func(t *testing.T) {
			fake := clock.NewFake()
			s := service(t, parse(t, f.book), append(f.opts, admit.WithClock(fake))...)
			require.Equal(t, 2, spend(t, s, "alice", "/orders"))
			require.Equal(t, 2, spend(t, s, "bob", "/orders"))
			require.Equal(t, 4, spend(t, s, "vip-1", "/orders"))
			fake.Advance(time.Second) // the buckets refill; the window keeps its 2 of 5
			require.NoError(t, s.Reset("alice", "/orders"))
			require.NoError(t, s.Reset("vip-1", "/orders"))
			d, _, _ := s.CheckNWhich("alice", "/orders", 0)
			assert.Equal(t, allowed(2, 2, 0), d, "alice's window is fresh too")
			assert.Equal(t, 4, spend(t, s, "vip-1", "/orders"), "vip-1's second rule is fresh too")
			d, _, which := s.CheckNWhich("bob", "/orders", 0)
			assert.Equal(t, allowed(2, 2, time.Hour-time.Second), d, "bob's window is untouched")
			assert.Zero(t, which)
			require.Equal(t, 2, spend(t, s, "bob", "/orders"))
			fake.Advance(time.Second)
			d, _, which = s.CheckNWhich("bob", "/orders", 0)
			assert.Equal(t, allowed(5, 1, time.Hour-2*time.Second), d, "bob's window holds 4 of 5, his bucket 2 of 2")
			assert.Equal(t, 1, which)
		})
	}
}

// TestServiceCompositeCheckAllocs: Check on an existing pair of a composite
// allocates nothing with the default limits factory, whose store makes no
// allocation per call either.
func TestServiceCompositeCheckAllocs(t *testing.T) {
	for _, text := range []string{
		"token-bucket,10,1s + fixed-window,1000,1h",
		"sliding-counter,10,1s + fixed-window,5,1m + token-bucket,3,1s",
		"token-bucket,10,1s + sliding-log,20,1m",
	} {
		book := parse(t, "default = "+text+"\napi./login = "+text+"\nuser.vip-1 = "+text+"\n")
		s := service(t, book, admit.WithClock(clock.NewFake()))
		for _, pair := range [][2]string{{"alice", "/orders"}, {"alice", "/login"}, {"vip-1", "/orders"}} {
			user, api := strings.Clone(pair[0]), strings.Clone(pair[1])
			s.Check(user, api) // the pair exists from now on
			allocs := testing.AllocsPerRun(1000, func() {
				s.Check(user, api)
				s.CheckNWhich(user, api, 0)
			})
			assert.Zero(t, allocs, "%s: Check(%q, %q) on an existing pair", text, user, api)
		}
	}
}

// TestServiceCompositeFirstUseRace: many goroutines make the first requests
// of one composite pair at once, with the clock frozen: its limiter is built
// once, so exactly the smallest Limit of them pass.
func TestServiceCompositeFirstUseRace(t *testing.T) {
	for range 20 {
		s := service(t, parse(t, "default = token-bucket,10,1h + fixed-window,12,1h"), admit.WithClock(clock.NewFake()))
		var (
			wg    sync.WaitGroup
			n     atomic.Int64
			start = make(chan struct{})
		)
		for range 8 {
			wg.Go(func() {
				<-start
				for range 5 {
					if d, _, _ := s.CheckNWhich("alice", "/new", 1); d.Allowed {
						n.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, int64(10), n.Load(), "40 first requests of one pair admitted")
	}
}

// TestReloadRaceComposite checks composite pairs while another goroutine
// reloads between two books: every decision is made under one of the two
// books' limits for its pair, and the pairs whose composite both books share
// keep their state: with the clock frozen, exactly its smallest Limit of
// their requests pass over the whole run. The pairs whose limits change
// carry what they spent (the default, CarryConsumed).
func TestReloadRaceComposite(t *testing.T) {
	bookA := parse(t, `
default    = token-bucket,30,1h + fixed-window,40,1h
api./flip  = fixed-window,10,1h + sliding-log,20,1h
api./same  = sliding-counter,20,1h + token-bucket,25,1h
user.vip   = token-bucket,40,1h
`)
	bookB := parse(t, `
default    = token-bucket,30,1h + fixed-window,40,1h
api./flip  = fixed-window,11,1h + sliding-log,20,1h
api./same  = sliding-counter,20,1h + token-bucket,25,1h
user.vip   = token-bucket,40,1h + fixed-window,45,1h
`)
	type pair struct{ user, api string }
	var pairs []pair
	for _, u := range []string{"alice", "bob", "vip"} {
		for _, a := range []string{"/orders", "/flip", "/same"} {
			pairs = append(pairs, pair{u, a})
		}
	}
	stable := map[pair]int{}
	for _, p := range pairs {
		if la, lb := bookA.LimitsFor(p.user, p.api), bookB.LimitsFor(p.user, p.api); la == lb {
			stable[p] = la.Limit()
		}
	}
	require.Len(t, stable, 4, "alice and bob on /orders and /same")

	s := service(t, bookA, admit.WithClock(clock.NewFake()))
	rounds := 100
	if testing.Short() {
		rounds = 25
	}
	var (
		wg       sync.WaitGroup
		admitted = make([]atomic.Int64, len(pairs))
		stop     atomic.Bool
		start    = make(chan struct{})
		errs     = make(chan string, 16)
	)
	for g := range 4 {
		wg.Go(func() {
			<-start
			for r := 0; r < rounds || !stop.Load(); r++ {
				for i := range pairs {
					k := (i + g) % len(pairs)
					p := pairs[k]
					d, l, which := s.CheckNWhich(p.user, p.api, 1)
					if la, lb := bookA.LimitsFor(p.user, p.api), bookB.LimitsFor(p.user, p.api); l != la && l != lb {
						select {
						case errs <- fmt.Sprintf("CheckNWhich(%q, %q) under %v, want %v (book A) or %v (book B)", p.user, p.api, l, la, lb):
						default:
						}
					} else if which < 0 || which >= l.Len() || d.Limit != l.At(which).Limit {
						select {
						case errs <- fmt.Sprintf("CheckNWhich(%q, %q) = %+v, rule %d of %v", p.user, p.api, d, which, l):
						default:
						}
					}
					if d.Allowed {
						admitted[k].Add(1)
					}
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for i := range 2 * rounds {
			book := bookA
			if i%2 == 0 {
				book = bookB
			}
			if err := s.Reload(book); err != nil {
				errs <- err.Error()
			}
		}
		stop.Store(true)
	})
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for i, p := range pairs {
		if limit, ok := stable[p]; ok {
			assert.Equal(t, int64(limit), admitted[i].Load(), "admitted for (%q, %q), whose composite never changed", p.user, p.api)
		}
	}
}
