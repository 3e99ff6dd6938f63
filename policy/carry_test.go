package policy_test

import (
	"strconv"
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

// The tests of Reload carrying state (WithCarry): the strategies' numbers,
// for a token bucket and a fixed window and for every kind of entry; the
// pairs a Reload must not touch; calls racing the move; and the refusals.

var strategies = []policy.Carry{policy.CarryConsumed, policy.CarryProportional, policy.CarryNothing}

// remaining returns the Remaining of a probe of (user, api): what the pair
// would still be admitted now.
func remaining(s *policy.Service, user, api string) int {
	return s.CheckN(user, api, 0).Remaining
}

// spendN checks (user, api) n times, each admitted.
func spendN(t *testing.T, s *policy.Service, user, api string, n int) {
	t.Helper()
	for i := range n {
		require.True(t, s.Check(user, api).Allowed, "Check(%q, %q) #%d", user, api, i+1)
	}
}

// TestReloadCarry: a pair that spent 7 of 10 keeps what docs/algorithms.md's
// table gives after its limit becomes 20 (raised) or 5 (lowered), for each
// strategy, for a token bucket and a fixed window, whether the limits come
// from the default, an API entry or a user entry: raised, 13, 6 and 20
// remain; lowered, 0, 1 and 5.
func TestReloadCarry(t *testing.T) {
	for _, alg := range []string{"token-bucket", "fixed-window"} {
		for _, tc := range []struct {
			limit int
			want  map[policy.Carry]int
		}{
			{20, map[policy.Carry]int{policy.CarryConsumed: 13, policy.CarryProportional: 6, policy.CarryNothing: 20}},
			{5, map[policy.Carry]int{policy.CarryConsumed: 0, policy.CarryProportional: 1, policy.CarryNothing: 5}},
		} {
			for _, entry := range []string{"default", "api./x", "user.u"} {
				for _, c := range strategies {
					book := func(limit int) *policy.Book {
						e := entry + " = " + alg + "," + strconv.Itoa(limit) + ",1m\n"
						if entry == "default" {
							return parse(t, e)
						}
						return parse(t, "default = token-bucket,1000,1h\n"+e)
					}
					what := alg + " " + entry + " 10→" + strconv.Itoa(tc.limit) + " carry " + c.String()
					fake := clock.NewFake()
					s := service(t, book(10), admit.WithClock(fake))
					spendN(t, s, "u", "/x", 7)
					fake.Advance(time.Second) // inside the window, and the bucket refills nothing whole
					require.NoError(t, s.Reload(book(tc.limit), policy.WithCarry(c)), what)
					d := s.CheckN("u", "/x", 0)
					assert.Equal(t, tc.limit, d.Limit, what)
					assert.Equal(t, tc.want[c], d.Remaining, what)
				}
			}
		}
	}
}

// TestReloadCarryDefault: without WithCarry, Reload carries what was
// consumed (CarryConsumed), converted at the reading of the WithClock
// clock: a token bucket of 10 per minute, 7 spent and 30 seconds later
// (5 refilled), raised to 20 per minute, keeps the 2 still owed.
func TestReloadCarryDefault(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, "default = token-bucket,10,1m\n"), admit.WithClock(fake))
	spendN(t, s, "u", "/x", 7)
	fake.Advance(30 * time.Second)
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,20,1m\n")))
	assert.Equal(t, 18, remaining(s, "u", "/x"))
}

// TestReloadCarryComposite: each rule of a composite carries from the old
// rule with its window and algorithm (docs/algorithms.md): 7 spent of a
// bucket of 10 per minute and a window of 100 per hour, the bucket raised
// to 20, leave 13 in the bucket (which binds) and 93 in the window; after
// 13 more, the composite becoming the window's rule alone, 50 per hour,
// leaves 30: the window kept all 20.
func TestReloadCarryComposite(t *testing.T) {
	fake := clock.NewFake()
	s := service(t, parse(t, "default = token-bucket,10,1m + fixed-window,100,1h\n"), admit.WithClock(fake))
	spendN(t, s, "u", "/x", 7)
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,20,1m + fixed-window,100,1h\n")))
	d, l, which := s.CheckNWhich("u", "/x", 0)
	assert.Equal(t, "token-bucket,20,1m + fixed-window,100,1h", l.String())
	assert.Equal(t, 0, which, "the bucket binds")
	assert.Equal(t, 13, d.Remaining)
	spendN(t, s, "u", "/x", 13)
	d, _, which = s.CheckNWhich("u", "/x", 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, 0, which)

	require.NoError(t, s.Reload(parse(t, "default = fixed-window,50,1h\n")))
	assert.Equal(t, 30, remaining(s, "u", "/x"))
}

// TestReloadCarryVariants pins docs/configuration.md's list of the
// limiters that carry state: every keyed store of sharded, locked and
// atomic, one rule or a composite, with full keys. A token bucket of 10
// per minute with 7 spent becomes a fixed window of 20 per minute with 13
// left; a composite whose bucket is raised from 10 to 20 leaves 13.
func TestReloadCarryVariants(t *testing.T) {
	for _, v := range variants {
		for _, tc := range [][2]string{
			{"token-bucket,10,1m", "fixed-window,20,1m"},
			{"token-bucket,10,1m + fixed-window,100,1h", "token-bucket,20,1m + fixed-window,100,1h"},
		} {
			s := service(t, parse(t, "default = "+tc[0]+"\n"), admit.WithClock(clock.NewFake()), policy.WithFactory(v.f), policy.WithLimitsFactory(v.limits))
			spendN(t, s, "u", "/x", 7)
			require.NoError(t, s.Reload(parse(t, "default = "+tc[1]+"\n")), "%s: %s", v.name, tc[0])
			assert.Equal(t, 13, remaining(s, "u", "/x"), "%s: %s to %s", v.name, tc[0], tc[1])
		}
	}
}

// TestReloadCarryKeepsOthers: the pairs whose limits do not change keep
// their state whatever the strategy, and a Reload that changes nothing
// changes no pair: a pair on unchanged limits, a pair whose user entry
// came and went to the limits it had, and a pair on another API.
func TestReloadCarryKeepsOthers(t *testing.T) {
	for _, c := range strategies {
		fake := clock.NewFake()
		book := "default = fixed-window,10,1m\napi./x = token-bucket,10,1m\n"
		s := service(t, parse(t, book), admit.WithClock(fake))
		spendN(t, s, "u", "/x", 7)
		spendN(t, s, "u", "/y", 4)
		spendN(t, s, "v", "/y", 2)
		want := map[[2]string]admit.Decision{}
		for _, p := range [][2]string{{"u", "/x"}, {"u", "/y"}, {"v", "/y"}} {
			want[p] = s.CheckN(p[0], p[1], 0)
		}
		// v gets an entry equal to the default: its pairs keep their limits.
		require.NoError(t, s.Reload(parse(t, book+"user.v = fixed-window,10,1m\napi./z = token-bucket,3,1s\n"), policy.WithCarry(c)))
		require.NoError(t, s.Reload(parse(t, book), policy.WithCarry(c)))
		for p, d := range want {
			assert.Equal(t, d, s.CheckN(p[0], p[1], 0), "carry %v: (%s, %s)", c, p[0], p[1])
		}
	}
}

// TestReloadCarrySharedLimiter: an API entry and a user entry with the
// same limits share the pair's (limits, API) limiter; when only one of
// them changes, its pairs move and the other's stay where they were, their
// state untouched. Both ways.
func TestReloadCarrySharedLimiter(t *testing.T) {
	const base = "default = token-bucket,1000,1h\n"
	for _, tc := range []struct {
		name          string
		before, after string
		moved, stayed string // the user whose pair moves, the one whose pair stays
	}{
		{"the API entry changes", "api./x = fixed-window,10,1m\nuser.u = fixed-window,10,1m\n", "api./x = fixed-window,20,1m\nuser.u = fixed-window,10,1m\n", "v", "u"},
		{"the user entry changes", "api./x = fixed-window,10,1m\nuser.u = fixed-window,10,1m\n", "api./x = fixed-window,10,1m\nuser.u = fixed-window,20,1m\n", "u", "v"},
	} {
		fake := clock.NewFake()
		s := service(t, parse(t, base+tc.before), admit.WithClock(fake))
		spendN(t, s, "u", "/x", 7)
		spendN(t, s, "v", "/x", 7)
		stayed := s.CheckN(tc.stayed, "/x", 0)
		fake.Advance(10 * time.Second)
		require.NoError(t, s.Reload(parse(t, base+tc.after)), tc.name)
		d := s.CheckN(tc.moved, "/x", 0)
		assert.Equal(t, 20, d.Limit, "%s: %s moved", tc.name, tc.moved)
		assert.Equal(t, 13, d.Remaining, "%s: %s moved", tc.name, tc.moved)
		stayed.ResetAfter -= 10 * time.Second
		assert.Equal(t, stayed, s.CheckN(tc.stayed, "/x", 0), "%s: %s stayed", tc.name, tc.stayed)
	}
}

// TestReloadCarryRace: with the clock frozen, goroutines hammer one pair
// while its limits change from 10 to 20 per minute under CarryConsumed:
// whatever the interleaving (calls decided before the move, calls that
// find the key moved and are decided again under the new book, a key
// adopted by its new limiter before the Reload's own pass reaches it), the
// pair is admitted exactly 20 times. Every decision is under one of the two
// books, and CheckNWhich's limits are the ones that decided.
func TestReloadCarryRace(t *testing.T) {
	rounds, goroutines, after := 30, 32, 4
	if testing.Short() {
		rounds = 5
	}
	for _, alg := range []string{"fixed-window", "token-bucket"} {
		bookA := parse(t, "default = token-bucket,1000,1h\napi./x = "+alg+",10,1m\n")
		bookB := parse(t, "default = token-bucket,1000,1h\napi./x = "+alg+",20,1m\n")
		la, lb := bookA.LimitsFor("u", "/x"), bookB.LimitsFor("u", "/x")
		for round := range rounds {
			s := service(t, bookA, admit.WithClock(clock.NewFake()))
			var (
				wg       sync.WaitGroup
				admitted atomic.Int64
				reloaded atomic.Bool
				start    = make(chan struct{})
				some     = make(chan struct{})
				once     sync.Once
				errs     = make(chan string, 4)
			)
			for range goroutines {
				wg.Go(func() {
					<-start
					for extra := 0; extra < after; {
						if reloaded.Load() {
							extra++
						}
						d, l, which := s.CheckNWhich("u", "/x", 1)
						if (l != la && l != lb) || d.Limit != l.At(which).Limit {
							select {
							case errs <- "CheckNWhich = " + l.String() + " " + strconv.Itoa(d.Limit):
							default:
							}
						}
						if d.Allowed && admitted.Add(1) == 5 {
							once.Do(func() { close(some) })
						}
					}
				})
			}
			wg.Go(func() {
				<-some
				if err := s.Reload(bookB); err != nil {
					errs <- err.Error()
				}
				reloaded.Store(true)
			})
			close(start)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("%s round %d: %s", alg, round, e)
			}
			require.EqualValues(t, 20, admitted.Load(), "%s round %d", alg, round)
		}
	}
}

// TestReloadRacingCall: a Check that loaded the old book and its limiter's
// state word before the Reload, and publishes after the Reload moved the
// key, fails to publish, finds the key gone, and is decided again under
// the new book, on the state carried: its admission counts once, under the
// new limits.
func TestReloadRacingCall(t *testing.T) {
	s, old := spentOnOldLimits(t, admitatomic.New) // the table, whose pause point is after the state word's load
	pauseTable(t, old, func() {
		require.NoError(t, s.Reload(parse(t, "default = token-bucket,1000,1h\napi./x = fixed-window,20,1m\n")))
	})
	d, l, which := s.CheckNWhich("u", "/x", 1)
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 20, Remaining: 12, ResetAfter: time.Minute}, d)
	assert.Equal(t, "fixed-window,20,1m", l.String())
	assert.Zero(t, which)
	assert.Zero(t, old.Len(), "the old limiter keeps nothing")
	assert.Equal(t, 12, remaining(s, "u", "/x"))
}

// spentOnOldLimits returns a Service whose limiters newStore builds, on a
// frozen clock, with 7 of the 10 per minute of pair (u, /x) spent, and the
// limiter that holds the pair: the one the next Reload, to 20 per minute,
// moves it out of.
func spentOnOldLimits(t *testing.T, newStore func(admit.Rule, ...admit.Option) (admit.Store, error)) (*policy.Service, admit.Store) {
	t.Helper()
	var mu sync.Mutex
	var built []admit.Store
	f := func(r admit.Rule, opts ...admit.Option) (admit.Store, error) {
		l, err := newStore(r, opts...)
		mu.Lock()
		built = append(built, l)
		mu.Unlock()
		return l, err
	}
	s := service(t, parse(t, "default = token-bucket,1000,1h\napi./x = fixed-window,10,1m\n"), admit.WithClock(clock.NewFake()), policy.WithFactory(f))
	spendN(t, s, "u", "/x", 7)
	var old admit.Store
	for _, l := range built {
		if l.Rule().Limit == 10 && l.Len() == 1 {
			old = l
		}
	}
	require.NotNil(t, old, "no limiter holds the spent pair")
	return s, old
}

// TestMovedPairDirectCall: a limiter a Service built, called directly (a
// factory's caller may keep it), on a pair that a Reload moved to other
// limits, decides the call as a Check of the pair would, under the current
// book: a decision of the new limits, with the admission counted there
// once, never a marker the Service alone could read (a Limit of -1). So
// does its AllowNWhich, and its ReserveN reserves under the new limits.
func TestMovedPairDirectCall(t *testing.T) {
	factories := []struct {
		name string
		new  func(admit.Rule, ...admit.Option) (admit.Store, error)
	}{
		{"atomic", admitatomic.New},
		{"sharded", sharded.New},
		{"locked", locked.New},
	}
	for _, fc := range factories {
		s, old := spentOnOldLimits(t, fc.new)
		require.NoError(t, s.Reload(parse(t, "default = token-bucket,1000,1h\napi./x = fixed-window,20,1m\n")), fc.name)
		require.Equal(t, 13, remaining(s, "u", "/x"), "%s: 7 of 10 spent, carried to 20", fc.name)

		d := old.AllowN("u", 1)
		assert.Equal(t, admit.Decision{Allowed: true, Limit: 20, Remaining: 12, ResetAfter: time.Minute}, d, "%s: the old limiter's AllowN on the moved pair", fc.name)
		d, which := old.AllowNWhich("u", 1)
		assert.Equal(t, admit.Decision{Allowed: true, Limit: 20, Remaining: 11, ResetAfter: time.Minute}, d, "%s: the old limiter's AllowNWhich on the moved pair", fc.name)
		assert.Zero(t, which, fc.name)
		res, ok := old.ReserveN("u", 1, time.Second)
		assert.True(t, ok, "%s: the old limiter's ReserveN on the moved pair", fc.name)
		assert.Zero(t, res.Delay, fc.name)
		assert.Zero(t, old.Len(), "%s: the old limiter stores nothing", fc.name)
		assert.Equal(t, 10, remaining(s, "u", "/x"), "%s: each direct call counted once, under the new limits", fc.name)
	}
}

// hidden is a keyed limiter that hides every method of the one it wraps
// but the KeyedLimiter's: a variant without the protocol that moves keys.
type hidden struct{ admit.KeyedLimiter }

// hiddenWhich is hidden for a composite, with AllowNWhich.
type hiddenWhich struct {
	admit.KeyedLimiter
	w interface {
		AllowNWhich(string, int) (admit.Decision, int)
	}
}

func (h hiddenWhich) AllowNWhich(key string, n int) (admit.Decision, int) {
	return h.w.AllowNWhich(key, n)
}

// TestReloadCarryUnsupported: a Reload that would carry the state of pairs
// kept by a limiter that cannot hand it over (a factory's own; a store of
// hashed keys, which cannot list its users) or take it (the limits it
// moves to) returns an error wrapping admit.ErrUnsupported that names the
// first such pair and WithCarry(policy.CarryNothing), and leaves the
// Service as it was: its book and every pair's state.
// WithCarry(policy.CarryNothing) then goes through, and so does, with the
// default, a Reload whose changed pairs no such limiter was built for.
func TestReloadCarryUnsupported(t *testing.T) {
	hide := func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		l, err := locked.New(r, opts...)
		return hidden{l}, err
	}
	hideLimits := func(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
		lim, err := locked.NewLimits(l, opts...)
		if err != nil {
			return nil, err
		}
		return hiddenWhich{lim, lim}, nil
	}
	for _, tc := range []struct {
		name       string
		opts       []admit.Option
		after      string
		msg        string
		unaffected string // a book whose changed pairs no limiter without the protocol holds
	}{
		{
			name:       "a factory's limiter",
			opts:       []admit.Option{policy.WithFactory(hide)},
			after:      "default = token-bucket,5,10\napi./x = fixed-window,4,10\n",
			msg:        `the limits of the users without an entry of their own on API "/x" change from fixed-window,3,10s to fixed-window,4,10s, and their limiter, a policy_test.hidden, cannot hand over its users' states`,
			unaffected: "default = token-bucket,5,10\napi./x = fixed-window,3,10\napi./never = fixed-window,4,10\n",
		},
		{
			name:  "hashed keys",
			opts:  []admit.Option{admit.WithHashedKeys()},
			after: "default = token-bucket,5,10\napi./x = fixed-window,3,10\nuser.u = token-bucket,9,10\n",
			msg:   `the limits of user "u" on API "/y" change from token-bucket,5,10s to token-bucket,9,10s, and their limiter keeps hashed keys, which it cannot list`,
		},
		{
			name:  "the new limits' limiter",
			opts:  []admit.Option{policy.WithLimitsFactory(hideLimits)},
			after: "default = token-bucket,5,10\napi./x = fixed-window,3,10 + token-bucket,100,1h\n",
			msg:   `the limits of the users without an entry of their own on API "/x" change from fixed-window,3,10s to fixed-window,3,10s + token-bucket,100,1h, and the limiter of the new limits, a policy_test.hiddenWhich, cannot take a carried state`,
		},
	} {
		fake := clock.NewFake()
		s := service(t, parse(t, "default = token-bucket,5,10\napi./x = fixed-window,3,10\n"), append(tc.opts, admit.WithClock(fake))...)
		spendN(t, s, "u", "/x", 2)
		spendN(t, s, "v", "/x", 1)
		spendN(t, s, "u", "/y", 3)
		old := s.Book()
		before := map[[2]string]admit.Decision{}
		for _, p := range [][2]string{{"u", "/x"}, {"v", "/x"}, {"u", "/y"}} {
			before[p] = s.CheckN(p[0], p[1], 0)
		}

		err := s.Reload(parse(t, tc.after))
		require.ErrorIs(t, err, admit.ErrUnsupported, tc.name)
		assert.ErrorContains(t, err, tc.msg, tc.name)
		assert.ErrorContains(t, err, "pass WithCarry(policy.CarryNothing)", tc.name)
		assert.Same(t, old, s.Book(), tc.name)
		for p, d := range before {
			assert.Equal(t, d, s.CheckN(p[0], p[1], 0), "%s: (%s, %s) after the refused Reload", tc.name, p[0], p[1])
		}

		if tc.unaffected != "" {
			require.NoError(t, s.Reload(parse(t, tc.unaffected)), tc.name)
		}
		require.NoError(t, s.Reload(parse(t, tc.after), policy.WithCarry(policy.CarryNothing)), tc.name)
		assert.NotSame(t, old, s.Book(), tc.name)
	}
}

// TestWithCarryInvalid: a Carry that is no strategy (the zero Carry, one
// past the last) or a nil option makes Reload return an error wrapping
// admit.ErrInvalidOption, and changes nothing.
func TestWithCarryInvalid(t *testing.T) {
	s := service(t, parse(t, seedConfig), admit.WithClock(clock.NewFake()))
	spendN(t, s, "u", "/login", 1)
	old := s.Book()
	next := parse(t, "default = token-bucket,5,10\napi./login = fixed-window,3,10\n")
	for _, o := range []policy.ReloadOption{policy.WithCarry(0), policy.WithCarry(policy.CarryNothing + 1), nil} {
		err := s.Reload(next, o)
		require.ErrorIs(t, err, admit.ErrInvalidOption)
		assert.Same(t, old, s.Book())
	}
	assert.EqualError(t, s.Reload(next, policy.WithCarry(0)), "admit: invalid option: policy.WithCarry(Carry(0)); pass policy.CarryConsumed, policy.CarryProportional or policy.CarryNothing")
	assert.Equal(t, 1, remaining(s, "u", "/login"))
}
