package policy_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// TestReloadHashedUnreached: with hashed keys, a Reload that changes an API
// entry no user ever reached carries (there is nothing to carry): the
// entry's limiter, built at start-up, holds no pair. Once a user has
// reached it, a Reload that changes it again is refused with
// admit.ErrUnsupported, as the limiter cannot list its users, and changes
// nothing.
func TestReloadHashedUnreached(t *testing.T) {
	s := service(t, parse(t, "default = token-bucket,5,10\napi./x = fixed-window,3,10\n"), admit.WithHashedKeys(), admit.WithClock(clock.NewFake()))
	spendN(t, s, "u", "/y", 2)

	require.NoError(t, s.Reload(parse(t, "default = token-bucket,5,10\napi./x = fixed-window,4,10\n")), "no user reached /x")
	spendN(t, s, "u", "/x", 4)
	assert.False(t, s.Check("u", "/x").Allowed, "the new limit, 4")
	assert.Equal(t, 3, remaining(s, "u", "/y"), "a pair whose limits did not change keeps its state")

	old := s.Book()
	err := s.Reload(parse(t, "default = token-bucket,5,10\napi./x = fixed-window,5,10\n"))
	require.ErrorIs(t, err, admit.ErrUnsupported, "u reached /x")
	assert.ErrorContains(t, err, `the limits of the users without an entry of their own on API "/x" change from fixed-window,4,10s to fixed-window,5,10s, and their limiter keeps hashed keys, which it cannot list`)
	assert.Same(t, old, s.Book())
	assert.Zero(t, remaining(s, "u", "/x"), "the refused Reload changed nothing")
}

// TestReloadHashedRacingFirstCheck: a Reload that finds an API entry's
// limiter unreached, with hashed keys, is ordered with the first Check that
// stores a pair there. A Check that Keep let in, stopped right after Keep
// under the key's lock, has marked the limiter: the Reload is refused, and
// the Check's admission stays in the pair's state. (Were the Reload let
// through, the state the Check then stores would be left behind in the old
// limiter, which cannot list it, and the pair would start afresh under the
// new limits.)
func TestReloadHashedRacingFirstCheck(t *testing.T) {
	g := &gate{key: "u", limit: 3, enter: newStop(), keep: newStop(), put: newStop()}
	f := func(r admit.Rule, o ...admit.Option) (admit.KeyedLimiter, error) {
		l, err := sharded.New(r, o...)
		if err != nil {
			return nil, err
		}
		return &gated{KeyedLimiter: l, Mover: l.(keyed.Mover), g: g, after: true}, nil
	}
	s := service(t, parse(t, "default = token-bucket,5,10\napi./x = fixed-window,3,10\n"),
		policy.WithFactory(f), admit.WithHashedKeys(), admit.WithClock(clock.NewFake()))
	g.keep.armed.Store(true)
	var wg sync.WaitGroup
	var d admit.Decision
	wg.Go(func() { d = s.Check("u", "/x") })
	<-g.keep.arrived // Keep let u in; the Check holds u's lock
	err := s.Reload(parse(t, "default = token-bucket,5,10\napi./x = fixed-window,4,10\n"))
	close(g.keep.release)
	wg.Wait()
	require.ErrorIs(t, err, admit.ErrUnsupported, "the Check reached /x")
	assert.True(t, d.Allowed)
	assert.Equal(t, 2, remaining(s, "u", "/x"), "the Check's admission is in u's state")
}
