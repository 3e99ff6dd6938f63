package policy_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// targets is a LimiterFactory that records the Targets it is asked for and
// builds sharded limiters on a fake clock: local stores, which a Service
// given a LimiterFactory must not migrate.
type targets struct {
	fake  *clock.Fake
	mu    sync.Mutex
	asked []string
	bare  bool // composites get a limiter without AllowNWhich
}

func (f *targets) New(t policy.Target) (admit.KeyedLimiter, error) {
	f.mu.Lock()
	f.asked = append(f.asked, fmt.Sprintf("%q %v %v proof=%v", t.API, t.Limits, t.Carry, t.Proof))
	f.mu.Unlock()
	if t.Limits.Len() == 1 {
		return sharded.New(t.Limits.At(0), admit.WithClock(f.fake))
	}
	lim, err := sharded.NewLimits(t.Limits, admit.WithClock(f.fake))
	if f.bare {
		return struct{ admit.KeyedLimiter }{lim}, err
	}
	return lim, err
}

// take returns the Targets asked for since the last call.
func (f *targets) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.asked
	f.asked = nil
	return out
}

const targetBook = `
default  = token-bucket,5,10s
api./a   = fixed-window,10,1m
api./b   = fixed-window,10,1m
user.vip = token-bucket,8,10s + fixed-window,100,1h
`

// TestLimiterFactoryTargets: the Service asks the factory for each (limits,
// API) limiter with its API and limits, at NewService for API entries (and
// a proof of each other limits), at first use otherwise, and at a Reload for
// the limits it builds, with the Reload's strategy as Carry; it moves no
// state itself, so a pair whose limits change starts afresh in these local
// limiters where a Reload of the Service's own limiters would carry it.
func TestLimiterFactoryTargets(t *testing.T) {
	f := &targets{fake: clock.NewFake()}
	s := service(t, parse(t, targetBook), policy.WithLimiterFactory(f.New))
	assert.ElementsMatch(t, []string{
		`"/a" fixed-window,10,1m consumed proof=false`,
		`"/b" fixed-window,10,1m consumed proof=false`,
		`"" token-bucket,5,10s consumed proof=true`,
		`"" token-bucket,8,10s + fixed-window,100,1h consumed proof=true`,
	}, f.take())

	// Two APIs of equal limits have two limiters: separate budgets.
	for range 7 {
		require.True(t, s.Check("u", "/a").Allowed)
	}
	assert.Equal(t, 3, s.CheckN("u", "/a", 0).Remaining)
	assert.Equal(t, 10, s.CheckN("u", "/b", 0).Remaining)
	assert.Empty(t, f.take(), "the API entries' limiters are built")

	// First use of an API by default, and of a user's composite on an API.
	assert.True(t, s.Check("u", "/c").Allowed)
	d, l, which := s.CheckNWhich("vip", "/a", 1)
	assert.True(t, d.Allowed)
	assert.Equal(t, "token-bucket,8,10s + fixed-window,100,1h", l.String())
	assert.Equal(t, 0, which, "the token bucket has the fewest left")
	assert.ElementsMatch(t, []string{
		`"/c" token-bucket,5,10s consumed proof=false`,
		`"/a" token-bucket,8,10s + fixed-window,100,1h consumed proof=false`,
	}, f.take())

	// A Reload with the same strategy builds only the limits it adds, and
	// moves nothing: u spent 7 of 10 on /a, and starts afresh under 20 (a
	// Reload of the Service's own limiters would leave 13).
	raised := parse(t, "default = token-bucket,5,10s\napi./a = fixed-window,20,1m\napi./b = fixed-window,10,1m\nuser.vip = token-bucket,8,10s + fixed-window,100,1h\n")
	require.NoError(t, s.Reload(raised))
	assert.Equal(t, []string{`"/a" fixed-window,20,1m consumed proof=false`}, f.take())
	assert.Equal(t, 20, s.CheckN("u", "/a", 0).Remaining, "no migration")
	for range 4 {
		require.True(t, s.Check("u", "/b").Allowed)
	}

	// Another strategy rebuilds every limiter, kept limits too, so that
	// each converts as the Reload in force says; these local ones forget.
	require.NoError(t, s.Reload(raised, policy.WithCarry(policy.CarryProportional)))
	assert.ElementsMatch(t, []string{
		`"/a" fixed-window,20,1m proportional proof=false`,
		`"/b" fixed-window,10,1m proportional proof=false`,
		`"" token-bucket,5,10s proportional proof=true`,
		`"" token-bucket,8,10s + fixed-window,100,1h proportional proof=true`,
	}, f.take())
	assert.Equal(t, 10, s.CheckN("u", "/b", 0).Remaining)
	assert.True(t, s.Check("u", "/c").Allowed)
	assert.Equal(t, []string{`"/c" token-bucket,5,10s proportional proof=false`}, f.take())

	// A composite whose limits change is not refused (nothing moves), and
	// CarryNothing is passed on.
	require.NoError(t, s.Reload(parse(t, "default = token-bucket,5,10s\nuser.vip = token-bucket,9,10s + fixed-window,100,1h\n"), policy.WithCarry(policy.CarryNothing)))
	assert.ElementsMatch(t, []string{
		`"" token-bucket,5,10s nothing proof=true`,
		`"" token-bucket,9,10s + fixed-window,100,1h nothing proof=true`,
	}, f.take())
	d, l, _ = s.CheckNWhich("vip", "/a", 1)
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 9, Remaining: 8, ResetAfter: d.ResetAfter}, d)
	assert.Equal(t, "token-bucket,9,10s + fixed-window,100,1h", l.String())
	assert.Equal(t, []string{`"/a" token-bucket,9,10s + fixed-window,100,1h nothing proof=false`}, f.take())

	// The limiters are the factory's: sharded's stores reset.
	require.NoError(t, s.Reset("vip", "/a"))
	assert.Equal(t, 9, s.CheckN("vip", "/a", 0).Remaining)
}

// TestLimiterFactoryErrors: what NewService refuses beside a LimiterFactory,
// and what it refuses of its limiters.
func TestLimiterFactoryErrors(t *testing.T) {
	book := parse(t, targetBook)
	f := &targets{fake: clock.NewFake()}
	_, err := policy.NewService(book, policy.WithLimiterFactory(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	for _, o := range []admit.Option{policy.WithFactory(locked.New), policy.WithLimitsFactory(locked.NewLimits)} {
		_, err = policy.NewService(book, policy.WithLimiterFactory(f.New), o)
		assert.ErrorIs(t, err, admit.ErrInvalidOption)
		assert.ErrorContains(t, err, "pass one or the other")
	}
	for _, o := range []admit.Option{admit.WithShards(4), admit.WithMaxKeys(10), admit.WithHashedKeys()} {
		_, err = policy.NewService(book, policy.WithLimiterFactory(f.New), o)
		assert.ErrorIs(t, err, admit.ErrUnsupported)
		assert.ErrorContains(t, err, "give their options to the factory")
	}
	_, err = policy.NewService(book, policy.WithLimiterFactory(f.New), admit.WithClock(clock.NewFake()))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "give the clock to the factory's limiters")

	// The variants refuse it.
	_, err = sharded.New(book.Default(), policy.WithLimiterFactory(f.New))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "pass it to policy.NewService")
	_, err = locked.NewLimits(book.LimitsFor("vip", "/a"), policy.WithLimiterFactory(f.New))
	assert.ErrorIs(t, err, admit.ErrUnsupported)

	// The factory's errors, a nil limiter, a composite without AllowNWhich.
	errNo := errors.New("no")
	_, err = policy.NewService(book, policy.WithLimiterFactory(func(policy.Target) (admit.KeyedLimiter, error) { return nil, errNo }))
	assert.ErrorIs(t, err, errNo)
	_, err = policy.NewService(book, policy.WithLimiterFactory(func(policy.Target) (admit.KeyedLimiter, error) { return nil, nil }))
	assert.ErrorContains(t, err, "the limiter factory returned a nil limiter and no error")
	_, err = policy.NewService(book, policy.WithLimiterFactory((&targets{fake: clock.NewFake(), bare: true}).New))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "has no AllowNWhich")

	// Reset of a limiter without Reset.
	s := service(t, parse(t, "default = token-bucket,5,10s\napi./a = fixed-window,10,1m\n"), policy.WithLimiterFactory(func(t policy.Target) (admit.KeyedLimiter, error) {
		lim, err := locked.NewLimits(t.Limits)
		return struct{ admit.KeyedLimiter }{lim}, err
	}))
	s.Check("u", "/a")
	err = s.Reset("u", "/a")
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "the limiter factory's limiter")
}
