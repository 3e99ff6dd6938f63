package redisstore_test

import (
	"context"
	"errors"
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
	"github.com/admit-go/admit/redisstore"
)

// errorLog records the errors a Policy's OnError is given.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorLog) record(_ string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errorLog) take() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	errs := e.errs
	e.errs = nil
	return errs
}

// TestServerStops stops the server in the middle of a stream of decisions and
// starts it again: each policy decides as documented while it is down, every
// failure reaches OnError, nothing panics, and decisions come from Redis again
// once it is back (with a fresh budget: the test server keeps no data).
func TestServerStops(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Hour}
	fake := clock.NewFake()
	for _, mode := range []redisstore.Mode{redisstore.FailClosed, redisstore.FailOpen, redisstore.FailLocal} {
		t.Run("mode="+mode.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			c := newClient(t, srv)
			l, err := redisstore.New(c, rule, redisstore.WithClock(fake))
			require.NoError(t, err)
			var local admit.KeyedLimiter
			if mode == redisstore.FailLocal {
				// Two of the five per process while Redis is away.
				local, err = locked.New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Hour}, admit.WithClock(fake))
				require.NoError(t, err)
			}
			errs := new(errorLog)
			k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: mode, Timeout: 200 * time.Millisecond, Local: local, OnError: errs.record})
			require.NoError(t, err)

			for i := range 3 {
				assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 4 - i, ResetAfter: time.Duration(i+1) * 12 * time.Minute}, k.Allow("k"), "up, call %d", i)
			}
			require.Empty(t, errs.take())

			srv.Stop()
			var down []admit.Decision
			for range 3 {
				down = append(down, k.Allow("k"))
			}
			never := k.AllowN("k", 6)
			probe := k.AllowN("k", 0)
			errs1 := errs.take()
			assert.Len(t, errs1, 5, "every failed call reaches OnError")
			for _, err := range errs1 {
				assert.Error(t, err)
			}
			assert.Equal(t, admit.Decision{Limit: 5, RetryAfter: admit.Never}, never, "n > Limit never passes")
			switch mode {
			case redisstore.FailClosed:
				denied := admit.Decision{Limit: 5, RetryAfter: 12 * time.Minute} // one token's interval
				assert.Equal(t, []admit.Decision{denied, denied, denied}, down)
				assert.Equal(t, admit.Decision{Allowed: true, Limit: 5}, probe, "a probe passes")
			case redisstore.FailOpen:
				open := admit.Decision{Allowed: true, Limit: 5}
				assert.Equal(t, []admit.Decision{open, open, open}, down)
				assert.Equal(t, open, probe)
			case redisstore.FailLocal:
				assert.Equal(t, []bool{true, true, false}, []bool{down[0].Allowed, down[1].Allowed, down[2].Allowed}, "the local limiter's two")
				assert.Equal(t, 2, down[0].Limit, "the local limiter's Decision")
				assert.Equal(t, 0, probe.Remaining, "the local limiter's probe")
			}

			srv.Start()
			// After failed dials go-redis fails fast with the last dial error
			// until its background redial (once a second) succeeds.
			require.Eventually(t, func() bool { return c.Ping(context.Background()).Err() == nil }, 30*time.Second, 10*time.Millisecond, "the client reconnects")
			d := k.Allow("k")
			assert.Empty(t, errs.take(), "the first call after the restart")
			assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 12 * time.Minute}, d, "from Redis again")
		})
	}
}

// TestSlowServer pauses the server past the policy's timeout: the call gives
// up at its deadline and the policy decides, then decisions resume.
func TestSlowServer(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	admin := newClient(t, srv)
	ctx := context.Background()
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Hour}, redisstore.WithClock(clock.NewFake()))
	require.NoError(t, err)
	errs := new(errorLog)
	k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: 50 * time.Millisecond, OnError: errs.record})
	require.NoError(t, err)
	require.True(t, k.Allow("k").Allowed)
	require.Empty(t, errs.take())

	// The pause (of writes, which include every script) outlasts any timeout
	// here; the test lifts it.
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err())
	d := k.AllowN("k", 5)
	require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 5}, d, "fail-open while the server is paused")
	got := errs.take()
	require.Len(t, got, 1)
	assert.True(t, errors.Is(got[0], context.DeadlineExceeded), "the call ended at its deadline: %v", got[0])

	d = k.AllowN("k", 4)
	assert.Empty(t, errs.take())
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: time.Hour}, d, "from Redis again: the paused call wrote nothing")
}

// TestAllowNReturnsErrors: the error-returning API reports a dead server and
// a done context, with a zero Decision.
func TestAllowNReturnsErrors(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.SlidingLog, Limit: 5, Window: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.Allow(ctx, "k")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, d)

	srv.Stop()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err = l.Allow(ctx, "k")
	assert.Error(t, err)
	assert.ErrorContains(t, err, "redisstore: sliding-log,5,1h")
	assert.Zero(t, d)
	var rerr redis.Error
	assert.False(t, errors.As(err, &rerr), "a network error, not a server reply: %v", err)
}

// TestOutOfMemory runs every algorithm's script on a server out of memory
// under noeviction (maxmemory set to one byte once the states are written):
// an admission fails with Redis's OOM error and writes nothing, not even to
// a sliding log whose expired entries it would trim, however many times it is
// tried; a denial is still answered; a new key is not created. Once memory is
// back, decisions resume where the states were.
func TestOutOfMemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	lims := make([]*redisstore.Limiter, len(algorithms))
	for i, alg := range algorithms {
		var err error
		lims[i], err = redisstore.New(c, admit.Rule{Algorithm: alg, Limit: 3, Window: time.Second}, redisstore.WithClock(fake), freshPrefix("oom"))
		require.NoError(t, err)
		for range 3 {
			d, err := lims[i].Allow(ctx, "full")
			require.NoError(t, err)
			require.True(t, d.Allowed, "%v", alg)
		}
	}
	// state returns what the server holds at key: its serialized value
	// and its absolute expiry, nil for a missing key.
	state := func(key string) []any {
		dump, err := c.Dump(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		require.NoError(t, err)
		at, err := c.Do(ctx, "PEXPIRETIME", key).Int64()
		require.NoError(t, err)
		return []any{dump, at}
	}
	before := make([][]any, len(lims))
	for i, l := range lims {
		before[i] = state(l.Key("full"))
		require.NotNil(t, before[i])
	}

	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
	require.True(t, redis.IsOOMError(c.Set(ctx, "probe", "x", 0).Err()), "the server is out of memory")
	for _, l := range lims {
		d, err := l.Allow(ctx, "full")
		require.NoError(t, err, "%v: a denial writes nothing, so it is answered", l.Rule())
		assert.False(t, d.Allowed, "%v", l.Rule())
	}
	for i, l := range lims {
		alg := l.Rule().Algorithm
		for step := range 20 {
			// Every earlier admission has expired: each script would write.
			fake.Advance(2 * time.Second)
			d, err := l.Allow(ctx, "full")
			assert.True(t, redis.IsOOMError(err), "%v, step %d: want Redis's OOM error, got %v", alg, step, err)
			assert.Zero(t, d, "%v, step %d", alg, step)
		}
		assert.Equal(t, before[i], state(l.Key("full")), "%v: the state is as it was before the server ran out of memory", alg)
		_, err := l.Allow(ctx, "new")
		assert.True(t, redis.IsOOMError(err), "%v: a new key: %v", alg, err)
		assert.Nil(t, state(l.Key("new")), "%v: no new key", alg)
	}

	// Every admission has expired by now: the key decides as a fresh one.
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "0").Err())
	for _, l := range lims {
		d, err := l.Allow(ctx, "full")
		require.NoError(t, err)
		fresh, err := l.Allow(ctx, "fresh")
		require.NoError(t, err)
		assert.True(t, d.Allowed, "%v: decided again", l.Rule())
		assert.Equal(t, fresh, d, "%v: decided again", l.Rule())
	}
}
