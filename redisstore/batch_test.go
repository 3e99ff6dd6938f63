package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/redisstore"
)

// TestAllowBatchIsSequential: a batch over limiters of every algorithm
// decides exactly as the same calls made one by one, by the kernels, with
// the clock moving between batches, in one round trip per batch.
func TestAllowBatchIsSequential(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	hook := new(countingHook)
	c.AddHook(hook)
	checkBatchIsSequential(t, c, hook, 1)
}

// checkBatchIsSequential runs batches through c and requires the kernels'
// Decisions, each batch costing at most trips pipelines (one per node).
func checkBatchIsSequential(t *testing.T, c redis.Scripter, hook *countingHook, trips int64) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		var lims []*redisstore.Limiter
		var oracles []conformance.Oracle
		for _, alg := range algorithms {
			limit := rapid.IntRange(1, 6).Draw(rt, "limit")
			rule := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Duration(rapid.Int64Range(int64(limit), int64(time.Second)).Draw(rt, "window"))}
			l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), freshPrefix("batch"))
			require.NoError(rt, err)
			_, err = l.AllowN(ctx, "warm", 0) // load the script
			require.NoError(rt, err)
			lims, oracles = append(lims, l), append(oracles, conformance.NewOracle(rule))
		}
		for b := range rapid.IntRange(1, 10).Draw(rt, "batches") {
			fake.Advance(time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(rt, "advance")))
			calls := make([]redisstore.Call, rapid.IntRange(1, 20).Draw(rt, "calls"))
			for i := range calls {
				j := rapid.IntRange(0, len(lims)-1).Draw(rt, "limiter")
				calls[i] = redisstore.Call{Limiter: lims[j], Key: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key"), N: rapid.IntRange(-1, 7).Draw(rt, "n")}
			}
			hook.cmds.Store(0)
			require.NoError(rt, redisstore.AllowBatch(ctx, calls))
			require.LessOrEqual(rt, hook.cmds.Load(), trips, "pipelines per batch")
			for i, call := range calls {
				require.NoError(rt, call.Err)
				j := 0
				for lims[j] != call.Limiter {
					j++
				}
				if want := oracles[j].Allow(call.Key, fake.Now(), call.N); call.Decision != want {
					rt.Fatalf("batch %d call %d: %v AllowN(t=%v, %q, %d) = %+v, want %+v", b, i, call.Limiter.Rule(), fake.Now(), call.Key, call.N, call.Decision, want)
				}
			}
		}
	})
}

// TestAllowBatchAfterScriptFlush: calls that meet NOSCRIPT are sent again
// with EVAL, in a second round trip, and decided as usual.
func TestAllowBatchAfterScriptFlush(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	hook := new(countingHook)
	c.AddHook(hook)
	ctx := context.Background()
	fake := clock.NewFake()
	tb, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Minute}, redisstore.WithTestClock(fake), freshPrefix("flush"))
	require.NoError(t, err)
	fw, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Minute}, redisstore.WithTestClock(fake), freshPrefix("flush"))
	require.NoError(t, err)
	calls := []redisstore.Call{{Limiter: tb, Key: "k", N: 1}, {Limiter: fw, Key: "k", N: 1}, {Limiter: tb, Key: "k", N: 1}, {Limiter: fw, Key: "k", N: 1}, {Limiter: tb, Key: "k", N: 1}}
	require.NoError(t, c.ScriptFlush(ctx).Err())
	hook.cmds.Store(0)
	require.NoError(t, redisstore.AllowBatch(ctx, calls))
	assert.Equal(t, int64(2), hook.cmds.Load(), "EVALSHA pipeline, then EVAL pipeline")
	var got []bool
	for _, call := range calls {
		require.NoError(t, call.Err)
		got = append(got, call.Decision.Allowed)
	}
	assert.Equal(t, []bool{true, true, true, false, false}, got)
}

// TestAllowBatchErrors: bad batches are refused whole; a call's own failure
// is its own; a dead server fails every call.
func TestAllowBatchErrors(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	other := newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Minute}
	a, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), freshPrefix("errs"))
	require.NoError(t, err)
	b, err := redisstore.New(other, rule, redisstore.WithTestClock(fake), freshPrefix("errs"))
	require.NoError(t, err)

	assert.NoError(t, redisstore.AllowBatch(ctx, nil))
	assert.ErrorIs(t, redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: a}, {}}), admit.ErrInvalidOption)
	assert.ErrorIs(t, redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: a}, {Limiter: b}}), admit.ErrInvalidOption)
	single, err := redisstore.New(scripterOnly{c}, rule, redisstore.WithTestClock(fake))
	require.NoError(t, err)
	err = redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: single, Key: "k", N: 1}})
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	assert.ErrorContains(t, err, "cannot pipeline")

	// A reading out of range fails its call only, and each call's previous
	// answer is cleared.
	far := clock.NewFake()
	far.Set(redisstore.MaxReading + 1)
	out, err := redisstore.New(c, rule, redisstore.WithTestClock(far), freshPrefix("errs"))
	require.NoError(t, err)
	calls := []redisstore.Call{{Limiter: a, Key: "k", N: 1}, {Limiter: out, Key: "k", N: 1, Decision: admit.Decision{Allowed: true}}, {Limiter: a, Key: "k", N: 9}}
	require.NoError(t, redisstore.AllowBatch(ctx, calls))
	assert.NoError(t, calls[0].Err)
	assert.True(t, calls[0].Decision.Allowed)
	assert.ErrorIs(t, calls[1].Err, redisstore.ErrClockRange)
	assert.Zero(t, calls[1].Decision)
	assert.Equal(t, admit.Decision{Limit: 5, RetryAfter: admit.Never, ResetAfter: 12 * time.Second}, calls[2].Decision)

	srv.Stop()
	calls = []redisstore.Call{{Limiter: a, Key: "k", N: 1}, {Limiter: a, Key: "j", N: 1}}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, redisstore.AllowBatch(short, calls))
	for i, call := range calls {
		assert.Error(t, call.Err, "call %d", i)
		assert.Zero(t, call.Decision, "call %d", i)
	}
}

// scripterOnly hides every method of a client but redis.Scripter's.
type scripterOnly struct{ redis.Scripter }
