package redisstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/redisstore"
)

// TestReset, for every algorithm, with time frozen, through a client and
// through a scripterOnly one (Reset then unlinks from a script): a key admits Limit and is
// denied; after Reset the next decisions, made by another client (another
// process, as far as Redis can tell) at the same reading, are a fresh key's,
// the kernel's own; another key's state is untouched.
func TestReset(t *testing.T) {
	srv := redistest.Start(t)
	c, other := newClient(t, srv), newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	for _, alg := range algorithms {
		for _, via := range []string{"unlink", "script"} {
			t.Run("algo="+alg.String()+"/via="+via, func(t *testing.T) {
				rule := admit.Rule{Algorithm: alg, Limit: 3, Window: time.Minute}
				prefix := freshPrefix("reset")
				var client redis.Scripter = c
				if via == "script" {
					client = scripterOnly{c}
				}
				l, err := redisstore.New(client, rule, redisstore.WithTestClock(fake), prefix)
				require.NoError(t, err)
				l2, err := redisstore.New(other, rule, redisstore.WithTestClock(fake), prefix)
				require.NoError(t, err)
				want := conformance.NewOracle(rule)
				now := fake.Now()
				step := func(i int, l *redisstore.Limiter, key string, exp admit.Decision) {
					t.Helper()
					got, err := l.AllowN(ctx, key, 1)
					require.NoError(t, err)
					assert.Equal(t, exp, got, "step %d: AllowN(t=%v, %q, 1)", i, now, key)
				}

				step(0, l, "bystander", want.Allow("bystander", now, 1))
				var first []admit.Decision
				for i := range rule.Limit + 1 {
					d := want.Allow("k", now, 1)
					step(1+i, l, "k", d)
					first = append(first, d)
				}
				require.False(t, first[rule.Limit].Allowed, "the key is spent")

				require.NoError(t, l.Reset(ctx, "k"))
				n, err := c.Exists(ctx, l.Key("k")).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "the Redis key is gone")
				for i, d := range first {
					step(10+i, l2, "k", d) // the same frozen reading: a fresh key's decisions again
				}
				step(20, l2, "bystander", want.Allow("bystander", now, 1))
			})
		}
	}
}

// TestResetUnwrittenKey: resetting a key never written is not an error and
// writes nothing.
func TestResetUnwrittenKey(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.SlidingLog, Limit: 3, Window: time.Minute}, redisstore.WithPrefix("never:"))
	require.NoError(t, err)
	for _, key := range []string{"k", "", "a}b{c"} {
		assert.NoError(t, l.Reset(ctx, key), "Reset(%q)", key)
	}
	keys, err := c.Keys(ctx, "never:*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// TestResetOneRoundTrip: each Reset is one command, counted by the client,
// and one UNLINK on the server (through EVAL for a client that offers only
// redis.Scripter).
func TestResetOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	hook := new(countingHook)
	c := newClient(t, srv)
	c.AddHook(hook)
	ctx := context.Background()
	require.NoError(t, c.Ping(ctx).Err()) // connect before counting
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Minute}
	for _, via := range []string{"unlink", "script"} {
		var client redis.Scripter = c
		if via == "script" {
			client = scripterOnly{c}
		}
		l, err := redisstore.New(client, rule, freshPrefix("rt-reset"))
		require.NoError(t, err)
		for i := range 10 {
			_, err := l.Allow(ctx, "k"+string(rune('0'+i%2)))
			require.NoError(t, err)
		}
		require.NoError(t, c.ConfigResetStat(ctx).Err())
		hook.all.Store(0)
		for i := range 10 {
			require.NoError(t, l.Reset(ctx, "k"+string(rune('0'+i%2))))
		}
		assert.Equal(t, int64(10), hook.all.Load(), "%s: round trips for 10 resets", via)
		calls := serverCalls(t, c)
		assert.Equal(t, 10, calls["unlink"], "%s: UNLINK calls", via)
		assert.Zero(t, calls["del"], "%s: DEL calls", via)
		if via == "script" {
			assert.Equal(t, 10, calls["eval"], "%s: EVAL calls", via)
			assert.Zero(t, calls["evalsha"], "%s: EVALSHA calls", via)
		}
	}
}

// TestResetReturnsErrors: Reset reports a done context and a dead server,
// with an error that names the limiter and key, and does not panic.
func TestResetReturnsErrors(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, l.Reset(ctx, "k"), context.Canceled)

	srv.Stop()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = l.Reset(ctx, "k")
	require.Error(t, err)
	assert.ErrorContains(t, err, `redisstore: fixed-window,5,1h, key "k": reset: `)
	var rerr redis.Error
	assert.False(t, errors.As(err, &rerr), "a network error, not a server reply: %v", err)
}

// The reset of a Redis key returns its error: Limiter.Reset(ctx, key), not
// admit.Store's Reset(key) (README.md).
var _ func(context.Context, string) error = (*redisstore.Limiter)(nil).Reset

// TestKeyedIsNoResetter: neither Keyed nor KeyedReserver has a Reset(key)
// that returns nothing, as an admit.Store's does (a failed reset would be
// silent), so a Service's Reset refuses them; each reaches its Limiter,
// whose Reset returns the error. Needs no server.
func TestKeyedIsNoResetter(t *testing.T) {
	resetter := reflect.TypeFor[interface{ Reset(key string) }]()
	for _, typ := range []reflect.Type{reflect.TypeFor[*redisstore.Keyed](), reflect.TypeFor[*redisstore.KeyedReserver]()} {
		assert.False(t, typ.Implements(resetter), "%v has Reset(key string)", typ)
		m, ok := typ.MethodByName("Limiter")
		if assert.True(t, ok, "%v has no Limiter method", typ) {
			assert.Equal(t, reflect.TypeFor[*redisstore.Limiter](), m.Type.Out(0), "%v.Limiter returns", typ)
		}
	}
}
