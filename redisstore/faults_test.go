package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// askHook counts the decisions a client asks Redis for: each starts with one
// EVALSHA, whatever follows it (an EVAL after NOSCRIPT, go-redis's retries).
type askHook struct{ asked atomic.Int64 }

func (h *askHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *askHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.asked.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *askHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestServerStops stops the server in the middle of a stream of decisions and
// starts it again: each policy decides as documented while it is down, every
// failure reaches OnError, nothing panics, one call goes to the dead server
// and the others are decided at once (the circuit is open), and decisions
// come from Redis again once it is back and a probe has found it (with a
// fresh budget: the test server keeps no data).
func TestServerStops(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Hour}
	fake := clock.NewFake()
	for _, mode := range []redisstore.Mode{redisstore.FailClosed, redisstore.FailOpen, redisstore.FailLocal} {
		t.Run("mode="+mode.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			hook := new(askHook)
			c := newClient(t, srv)
			c.AddHook(hook)
			l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake))
			require.NoError(t, err)
			var local admit.KeyedLimiter
			if mode == redisstore.FailLocal {
				// Two of the five per process while Redis is away.
				local, err = locked.New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Hour}, admit.WithClock(fake))
				require.NoError(t, err)
			}
			errs := new(errorLog)
			breakerClock := clock.NewFake()
			k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: mode, Timeout: upTimeout, Local: local, OnError: errs.record, Clock: breakerClock})
			require.NoError(t, err)

			for i := range 3 {
				assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 4 - i, ResetAfter: time.Duration(i+1) * 12 * time.Minute}, k.Allow("k"), "up, call %d", i)
			}
			require.Empty(t, errs.take())

			srv.Stop()
			sent := hook.asked.Load()
			var down []admit.Decision
			for range 3 {
				down = append(down, k.Allow("k"))
			}
			never := k.AllowN("k", 6)
			probe := k.AllowN("k", 0)
			assert.Equal(t, int64(1), hook.asked.Load()-sent, "one call goes to the dead server, then the circuit is open")
			errs1 := errs.take()
			require.Len(t, errs1, 5, "every failed call reaches OnError")
			assert.NotErrorIs(t, errs1[0], redisstore.ErrCircuitOpen, "the first call went to Redis")
			for _, err := range errs1[1:] {
				assert.ErrorIs(t, err, redisstore.ErrCircuitOpen)
				assert.ErrorContains(t, err, "key \"k\"")
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
			redistest.Await(t, "the client reconnects", func() bool { return c.Ping(context.Background()).Err() == nil })
			sent = hook.asked.Load()
			k.Allow("k")
			assert.Equal(t, sent, hook.asked.Load(), "the circuit stays open until the backoff has passed")
			assert.ErrorIs(t, errors.Join(errs.take()...), redisstore.ErrCircuitOpen)
			breakerClock.Advance(redisstore.DefaultBackoff)
			d := k.Allow("k")
			assert.Empty(t, errs.take(), "the probe after the backoff")
			assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 12 * time.Minute}, d, "from Redis again")
			d = k.Allow("k")
			assert.Empty(t, errs.take())
			assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: 24 * time.Minute}, d, "the circuit is closed")
			assert.Equal(t, sent+2, hook.asked.Load())
		})
	}
}

// TestSlowServer pauses the server past the policy's timeout: the call gives
// up at its deadline and the policy decides, the next is decided at once,
// and decisions resume once a probe finds the server answering.
func TestSlowServer(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	hook := new(askHook)
	c.AddHook(hook)
	admin := newClient(t, srv)
	ctx := context.Background()
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Hour}, redisstore.WithTestClock(clock.NewFake()))
	require.NoError(t, err)
	errs := new(errorLog)
	breakerClock := clock.NewFake()
	k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: pausedTimeout, Backoff: time.Second, Clock: breakerClock, OnError: errs.record})
	require.NoError(t, err)
	require.True(t, k.Allow("k").Allowed)
	require.Empty(t, errs.take())

	// The pause (of writes, which include every script) outlasts any timeout
	// here; the test lifts it.
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err())
	d := k.AllowN("k", 5)
	again := k.AllowN("k", 5)
	breakerClock.Advance(time.Second - 1)
	still := k.AllowN("k", 5)
	require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
	open := admit.Decision{Allowed: true, Limit: 5}
	assert.Equal(t, []admit.Decision{open, open, open}, []admit.Decision{d, again, still}, "fail-open while the server is paused")
	assert.Equal(t, int64(2), hook.asked.Load(), "one call before the pause, one during it")
	got := errs.take()
	require.Len(t, got, 3)
	assert.True(t, errors.Is(got[0], context.DeadlineExceeded), "the call ended at its deadline: %v", got[0])
	assert.ErrorIs(t, got[1], redisstore.ErrCircuitOpen)
	assert.ErrorIs(t, got[2], redisstore.ErrCircuitOpen, "1ns short of the backoff")
	assert.ErrorContains(t, got[2], "context deadline exceeded", "the refusal names the failure")

	breakerClock.Advance(1)
	d = k.AllowN("k", 4)
	assert.Empty(t, errs.take())
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: time.Hour}, d, "from Redis again: the paused call wrote nothing")
}

// TestCircuitIgnoresKeyErrors: an error about one key (a state of another
// rule, or of another type) is Redis answering, so it does not open the
// circuit; and a probe that meets one closes it.
func TestCircuitIgnoresKeyErrors(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	hook := new(askHook)
	c.AddHook(hook)
	ctx := context.Background()
	opts := []redisstore.Option{redisstore.WithPrefix("shared:"), redisstore.WithTestClock(clock.NewFake())}
	five, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}, opts...)
	require.NoError(t, err)
	six, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 6, Window: time.Second}, opts...)
	require.NoError(t, err)
	_, err = five.Allow(ctx, "five's")
	require.NoError(t, err)
	require.NoError(t, c.RPush(ctx, six.Key("list"), "x").Err())

	errs := new(errorLog)
	breakerClock := clock.NewFake()
	k, err := redisstore.NewKeyed(six, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second, Clock: breakerClock, OnError: errs.record})
	require.NoError(t, err)
	for _, key := range []string{"five's", "list", "five's"} {
		before := hook.asked.Load()
		assert.False(t, k.Allow(key).Allowed, "%s", key)
		assert.Equal(t, before+1, hook.asked.Load(), "%s: asked Redis", key)
	}
	got := errs.take()
	require.Len(t, got, 3)
	assert.ErrorContains(t, got[0], "holds state of another rule")
	assert.ErrorContains(t, got[1], "WRONGTYPE")
	assert.NotErrorIs(t, errors.Join(got...), redisstore.ErrCircuitOpen)
	assert.True(t, k.Allow("mine").Allowed)
	assert.Empty(t, errs.take())
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
		lims[i], err = redisstore.New(c, admit.Rule{Algorithm: alg, Limit: 3, Window: time.Second}, redisstore.WithTestClock(fake), freshPrefix("oom"))
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
