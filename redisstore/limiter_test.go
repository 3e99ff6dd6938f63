package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
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

var algorithms = conformance.Algorithms

func TestNewRefusesBadInput(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer c.Close()
	good := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}

	_, err := redisstore.New(nil, good)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.New((*redis.Client)(nil), good)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 0, Window: time.Second})
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = redisstore.New(c, good, nil)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.New(c, good, redisstore.WithClock(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.New(c, good, redisstore.WithClock((*clock.Fake)(nil)))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	for _, p := range []string{"a{", "}", "x{y}"} {
		_, err = redisstore.New(c, good, redisstore.WithPrefix(p))
		assert.ErrorIs(t, err, admit.ErrInvalidOption, "WithPrefix(%q)", p)
	}

	// Rules beyond what the scripts decide exactly, or finer than server time.
	fake := redisstore.WithClock(clock.NewFake())
	for _, tc := range []struct {
		rule admit.Rule
		opts []redisstore.Option
		msg  string
	}{
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: 1500 * time.Nanosecond}, nil, "whole number of microseconds"},
		{admit.Rule{Algorithm: admit.FixedWindow, Limit: 1000, Window: 999 * time.Microsecond}, nil, "at least Limit microseconds"},
		{admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: (1<<51 + 1) * time.Nanosecond}, []redisstore.Option{fake}, "2^51"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 1 << 20, Window: (1<<32 + 1) * time.Nanosecond}, []redisstore.Option{fake}, "2^52"},
		// admit's own bound is Limit × Window <= 2^62 ns; in microseconds the
		// scripts' 2^52 is 2.3% short of it.
		{admit.Rule{Algorithm: admit.SlidingCounter, Limit: 53_000, Window: 24 * time.Hour}, nil, "2^52"},
	} {
		_, err := redisstore.New(c, tc.rule, tc.opts...)
		assert.ErrorIs(t, err, admit.ErrUnsupported, "%v", tc.rule)
		assert.ErrorContains(t, err, tc.msg, "%v", tc.rule)
	}
	// The same rules are fine where they fit.
	for _, r := range []admit.Rule{
		{Algorithm: admit.TokenBucket, Limit: 1, Window: 1500 * time.Nanosecond},
		{Algorithm: admit.TokenBucket, Limit: 1 << 20, Window: 1 << 32},
		{Algorithm: admit.FixedWindow, Limit: 53_000, Window: 24 * time.Hour},
	} {
		_, err := redisstore.New(c, r, fake)
		assert.NoError(t, err, "%v", r)
	}
	_, err = redisstore.New(c, admit.Rule{Algorithm: admit.SlidingCounter, Limit: 50_000, Window: 24 * time.Hour})
	assert.NoError(t, err, "50,000 per day with server time")
}

// TestDomainAsDocumented holds each number docs/redis.md and New's doc give
// for the scripts' exact domain to what New does: the largest rule said to
// fit is accepted, and the next one up is refused.
func TestDomainAsDocumented(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer c.Close()
	const day = 24 * time.Hour
	fake := redisstore.WithClock(clock.NewFake())
	for _, tc := range []struct {
		statement string
		alg       admit.Algorithm
		fits      admit.Rule // Algorithm taken from alg
		refused   admit.Rule // the next one up
		opts      []redisstore.Option
	}{
		{"server time: 52,124 per day", admit.TokenBucket,
			admit.Rule{Limit: 52_124, Window: day}, admit.Rule{Limit: 52_125, Window: day}, nil},
		{"server time: 52,124 per day", admit.SlidingCounter,
			admit.Rule{Limit: 52_124, Window: day}, admit.Rule{Limit: 52_125, Window: day}, nil},
		{"server time: a window of 2^51 µs, 71 years", admit.FixedWindow,
			admit.Rule{Limit: 1, Window: 1 << 51 * time.Microsecond}, admit.Rule{Limit: 1, Window: (1<<51 + 1) * time.Microsecond}, nil},
		{"WithClock: 1,000 per 75 minutes", admit.TokenBucket,
			admit.Rule{Limit: 1000, Window: 75 * time.Minute}, admit.Rule{Limit: 1001, Window: 75 * time.Minute}, []redisstore.Option{fake}},
		{"WithClock: 4,503,599 per second", admit.SlidingCounter,
			admit.Rule{Limit: 4_503_599, Window: time.Second}, admit.Rule{Limit: 4_503_600, Window: time.Second}, []redisstore.Option{fake}},
		{"WithClock: a window of 2^51 ns, 26 days", admit.SlidingLog,
			admit.Rule{Limit: 1, Window: 1 << 51}, admit.Rule{Limit: 1, Window: 1<<51 + 1}, []redisstore.Option{fake}},
	} {
		tc.fits.Algorithm, tc.refused.Algorithm = tc.alg, tc.alg
		_, err := redisstore.New(c, tc.fits, tc.opts...)
		assert.NoError(t, err, "%s: %v fits", tc.statement, tc.fits)
		require.NoError(t, tc.refused.Validate(), "%s: admit itself accepts %v", tc.statement, tc.refused)
		_, err = redisstore.New(c, tc.refused, tc.opts...)
		assert.ErrorIs(t, err, admit.ErrUnsupported, "%s: %v is refused", tc.statement, tc.refused)
	}

	// admit's own bound, Limit × Window <= 2^62 ns, which the scripts'
	// 2^52 µs falls 2.3% short of: 53,375 per day.
	assert.NoError(t, admit.Rule{Algorithm: admit.TokenBucket, Limit: 53_375, Window: day}.Validate())
	assert.ErrorIs(t, admit.Rule{Algorithm: admit.TokenBucket, Limit: 53_376, Window: day}.Validate(), admit.ErrInvalidRule)
}

func TestNewKeyedRefusesBadPolicy(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second})
	require.NoError(t, err)
	local := redisstore.Policy{Mode: redisstore.FailLocal, Timeout: time.Second}
	for _, tc := range []struct {
		p   redisstore.Policy
		msg string
	}{
		{redisstore.Policy{Timeout: time.Second}, "choose FailClosed"},
		{redisstore.Policy{Mode: 7, Timeout: time.Second}, "Mode(7)"},
		{redisstore.Policy{Mode: redisstore.FailOpen}, "Timeout 0s"},
		{redisstore.Policy{Mode: redisstore.FailClosed, Timeout: -1}, "Timeout -1ns"},
		{local, "needs a Local limiter"},
		{redisstore.Policy{Mode: redisstore.FailOpen, Timeout: time.Second, Local: new(stubLimiter)}, "only in FailLocal"},
		{redisstore.Policy{Mode: redisstore.FailOpen, Timeout: time.Second, Backoff: -1}, "Backoff -1ns"},
		{redisstore.Policy{Mode: redisstore.FailOpen, Timeout: time.Second, Clock: (*clock.Fake)(nil)}, "nil *clock.Fake"},
	} {
		_, err := redisstore.NewKeyed(l, tc.p)
		assert.ErrorIs(t, err, admit.ErrInvalidOption, "%+v", tc.p)
		assert.ErrorContains(t, err, tc.msg, "%+v", tc.p)
	}
	_, err = redisstore.NewKeyed(nil, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: time.Second})
	assert.ErrorIs(t, err, admit.ErrInvalidOption)

	// A client that ignores context deadlines could not keep the timeout.
	deaf := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer deaf.Close()
	l, err = redisstore.New(deaf, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second})
	require.NoError(t, err)
	_, err = redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: time.Second})
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	assert.ErrorContains(t, err, "ContextTimeoutEnabled")
}

// stubLimiter admits everything and counts its calls.
type stubLimiter struct{ calls atomic.Int64 }

func (s *stubLimiter) Allow(key string) admit.Decision { return s.AllowN(key, 1) }
func (s *stubLimiter) AllowN(string, int) admit.Decision {
	s.calls.Add(1)
	return admit.Decision{Allowed: true, Limit: 1, Remaining: 1}
}

// countingHook counts the round trips a client makes to run scripts: one
// per EVAL or EVALSHA command, one per pipeline of them (not the HELLO and
// CLIENT SETINFO of a new connection). all counts every command and every
// pipeline, whatever it runs.
type countingHook struct{ cmds, all atomic.Int64 }

func isScript(cmd redis.Cmder) bool {
	name := cmd.Name()
	return name == "evalsha" || name == "eval"
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			h.cmds.Add(1)
		}
		h.all.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && isScript(cmds[0]) {
			h.cmds.Add(1)
		}
		h.all.Add(1)
		return next(ctx, cmds)
	}
}

// serverCalls returns how many times the server ran each command since the
// last CONFIG RESETSTAT, from INFO commandstats.
func serverCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	calls := map[string]int{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		var n int
		for _, r := range rest {
			if r < '0' || r > '9' {
				break
			}
			n = n*10 + int(r-'0')
		}
		calls[name] = n
	}
	return calls
}

// TestOneRoundTrip: each decision is one EVALSHA, counted by the client and
// by the server, and a flushed script cache costs one NOSCRIPT and one EVAL,
// after which EVALSHA works again.
func TestOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	hook := new(countingHook)
	c := newClient(t, srv)
	c.AddHook(hook)
	ctx := context.Background()
	for _, alg := range algorithms {
		l, err := redisstore.New(c, admit.Rule{Algorithm: alg, Limit: 100, Window: time.Minute}, freshPrefix("rt"))
		require.NoError(t, err)
		_, err = l.Allow(ctx, "warm") // the first call may load the script
		require.NoError(t, err)
		require.NoError(t, c.ConfigResetStat(ctx).Err())
		hook.cmds.Store(0)
		for i := range 50 {
			_, err := l.AllowN(ctx, "k", i%3-1) // -1, 0 and 1: every path
			require.NoError(t, err)
		}
		assert.Equal(t, int64(50), hook.cmds.Load(), "%v: commands sent for 50 decisions", alg)
		calls := serverCalls(t, c)
		assert.Equal(t, 50, calls["evalsha"], "%v: EVALSHA calls", alg)
		assert.Zero(t, calls["eval"], "%v: EVAL calls", alg)

		require.NoError(t, c.ScriptFlush(ctx).Err())
		hook.cmds.Store(0)
		d, err := l.Allow(ctx, "k")
		require.NoError(t, err, "%v: after SCRIPT FLUSH", alg)
		assert.True(t, d.Allowed)
		assert.Equal(t, int64(2), hook.cmds.Load(), "%v: EVALSHA (NOSCRIPT) then EVAL", alg)
		hook.cmds.Store(0)
		_, err = l.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(1), hook.cmds.Load(), "%v: the script is cached again", alg)
	}
}

// TestKeysAndTTL: keys are prefix{key}, and each write sets a time to live of
// the state's time until fresh (the Decision's ResetAfter), rounded up to the
// millisecond, plus 100 ms. The expiry Redis records (PEXPIRETIME, absolute)
// must be that TTL past the moment of the write, which the server's own TIME
// brackets: no real-time duration is assumed.
func TestKeysAndTTL(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	serverTime := func() time.Time {
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return now
	}
	fake := clock.NewFake()
	fake.Set(time.Hour + 300*time.Microsecond)
	for _, alg := range algorithms {
		// 4 per 10s: after 2 admissions at t, every state is fresh 5s
		// (token bucket), 10s (log) or until the window(s) roll out.
		rule := admit.Rule{Algorithm: alg, Limit: 4, Window: 10 * time.Second}
		prefix := "ttl-" + alg.String() + ":"
		l, err := redisstore.New(c, rule, redisstore.WithClock(fake), redisstore.WithPrefix(prefix))
		require.NoError(t, err)
		before := serverTime().Truncate(time.Millisecond)
		d, err := l.AllowN(ctx, "user:1", 2)
		require.NoError(t, err)
		after := serverTime()
		require.True(t, d.Allowed)
		assert.Equal(t, prefix+"{user:1}", l.Key("user:1"))
		expires, err := c.PExpireTime(ctx, l.Key("user:1")).Result()
		require.NoError(t, err)
		ttl := (d.ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond) + 100*time.Millisecond
		written := time.UnixMilli(int64((expires - ttl) / time.Millisecond))
		assert.False(t, written.Before(before) || written.After(after),
			"%v: expiry %v minus TTL %v is %v, not within the call's server times [%v, %v]", alg, expires, ttl, written, before, after)
		keys, err := c.Keys(ctx, prefix+"*").Result()
		require.NoError(t, err)
		assert.Equal(t, []string{prefix + "{user:1}"}, keys, "%v: one Redis key per limiter key", alg)
	}
}

// TestAnotherRulesKey: a limiter never misreads state another rule wrote.
func TestAnotherRulesKey(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	opts := []redisstore.Option{redisstore.WithPrefix("shared:"), redisstore.WithTestClock(clock.NewFake())}
	a, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}, opts...)
	require.NoError(t, err)
	b, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 6, Window: time.Second}, opts...)
	require.NoError(t, err)
	fw, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Second}, opts...)
	require.NoError(t, err)
	sl, err := redisstore.New(c, admit.Rule{Algorithm: admit.SlidingLog, Limit: 5, Window: time.Second}, opts...)
	require.NoError(t, err)
	sl2, err := redisstore.New(c, admit.Rule{Algorithm: admit.SlidingLog, Limit: 5, Window: 2 * time.Second}, opts...)
	require.NoError(t, err)

	_, err = a.Allow(ctx, "k")
	require.NoError(t, err)
	for _, other := range []*redisstore.Limiter{b, fw} {
		_, err = other.Allow(ctx, "k")
		assert.ErrorContains(t, err, "holds state of another rule")
	}
	_, err = sl.Allow(ctx, "k")
	assert.ErrorContains(t, err, "WRONGTYPE")
	_, err = sl.Allow(ctx, "log")
	require.NoError(t, err)
	_, err = sl2.Allow(ctx, "log")
	assert.ErrorContains(t, err, "holds state of another rule")
	_, err = a.Allow(ctx, "log")
	assert.ErrorContains(t, err, "WRONGTYPE")
}

// TestServerTime: without WithClock the server's TIME decides, in
// microseconds, and every client agrees on it.
func TestServerTime(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	for _, alg := range algorithms {
		rule := admit.Rule{Algorithm: alg, Limit: 5, Window: time.Hour}
		l, err := redisstore.New(c, rule, freshPrefix("server"))
		require.NoError(t, err)
		for i := range 5 {
			d, err := l.Allow(ctx, "k")
			require.NoError(t, err)
			assert.True(t, d.Allowed, "%v: request %d", alg, i)
			assert.Equal(t, 4-i, d.Remaining, "%v", alg)
		}
		d, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		assert.False(t, d.Allowed, "%v: the sixth", alg)
		assert.Positive(t, d.RetryAfter, "%v", alg)
		assert.LessOrEqual(t, d.RetryAfter, 2*time.Hour, "%v", alg)
		assert.Zero(t, d.RetryAfter%time.Microsecond, "%v: server time has microseconds", alg)
		assert.Zero(t, d.ResetAfter%time.Microsecond, "%v", alg)
	}
}

// TestClockRange: readings beyond ±MaxReading are an error, not a guess.
func TestClockRange(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	fake := clock.NewFake()
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}, redisstore.WithTestClock(fake), freshPrefix("range"))
	require.NoError(t, err)
	for _, at := range []time.Duration{redisstore.MaxReading, -redisstore.MaxReading} {
		fake.Set(at)
		_, err = l.Allow(context.Background(), "k")
		assert.NoError(t, err, "at %d", at)
	}
	for _, at := range []time.Duration{redisstore.MaxReading + 1, -redisstore.MaxReading - 1, math.MaxInt64} {
		fake.Set(at)
		_, err = l.Allow(context.Background(), "k")
		assert.ErrorIs(t, err, redisstore.ErrClockRange, "at %d", at)
	}
}

// drawEdgeRule draws a rule anywhere in the scripts' exact domain, most
// often near its edges: a huge Limit, a huge Window, Limit × Window at 2^52.
func drawEdgeRule(rt *rapid.T, alg admit.Algorithm) admit.Rule {
	product := alg == admit.TokenBucket || alg == admit.SlidingCounter
	maxLimit := int64(admit.MaxLimit)
	switch {
	case alg == admit.SlidingLog:
		maxLimit = 300 // a log stores every admission
	case product:
		maxLimit = 1 << 26 // Window >= Limit and Limit × Window <= 2^52
	}
	limit := rapid.OneOf(rapid.Int64Range(1, 16), rapid.Int64Range(1, maxLimit), rapid.Just(maxLimit)).Draw(rt, "limit")
	maxWindow := min(int64(1<<51), admit.MaxLimitTimesWindow/limit)
	if product {
		maxWindow = min(maxWindow, (1<<52)/limit)
	}
	window := rapid.OneOf(rapid.Int64Range(limit, min(maxWindow, limit+1000)), rapid.Int64Range(limit, maxWindow), rapid.Just(maxWindow)).Draw(rt, "window")
	return admit.Rule{Algorithm: alg, Limit: int(limit), Window: time.Duration(window)}
}

// TestExactAtTheEdges holds the scripts to the kernels where doubles are
// tightest: rules at the edges of the domain New accepts, readings up to
// ±MaxReading, clock moves forwards, backwards and to the ends.
func TestExactAtTheEdges(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run("algo="+alg.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				rule := drawEdgeRule(rt, alg)
				w := int64(rule.Window)
				fake := clock.NewFake()
				move := func(to int64) { fake.Set(time.Duration(max(-redisstore.MaxReading, min(to, redisstore.MaxReading)))) }
				move(rapid.OneOf(rapid.Int64Range(-redisstore.MaxReading, redisstore.MaxReading), rapid.Int64Range(-1000, 1000)).Draw(rt, "start"))
				l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), freshPrefix("edge"))
				require.NoError(rt, err)
				want := conformance.NewOracle(rule)
				keys := []string{"a", "b"}
				for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
					now := int64(fake.Now())
					switch rapid.IntRange(0, 9).Draw(rt, "op") {
					case 0:
						move(now + rapid.Int64Range(0, 2*w).Draw(rt, "advance"))
					case 1:
						move(now + rapid.Int64Range(0, 10).Draw(rt, "nudge"))
					case 2:
						move(now - rapid.Int64Range(0, w).Draw(rt, "back"))
					case 3:
						move(rapid.SampledFrom([]int64{-redisstore.MaxReading, redisstore.MaxReading, 0}).Draw(rt, "jump"))
					default:
						n := rapid.OneOf(rapid.IntRange(-1, 3), rapid.IntRange(-1, rule.Limit+1), rapid.SampledFrom([]int{rule.Limit, rule.Limit - 1, rule.Limit / 2})).Draw(rt, "n")
						key := rapid.SampledFrom(keys).Draw(rt, "key")
						exp := want.Allow(key, time.Duration(now), n)
						got, err := l.AllowN(ctx, key, n)
						require.NoError(rt, err)
						if got != exp {
							rt.Fatalf("%v op %d: AllowN(t=%d, %q, %d) = %+v, want %+v", rule, i, now, key, n, got, exp)
						}
					}
				}
			})
		})
	}
}

// TestExpiryIsLossless: Redis may expire a key once its TTL has run, and the
// TTL is never shorter than the ResetAfter of the admission that wrote it
// (TestKeysAndTTL). Deleting every key at exactly that point, with time
// moving forwards as server time does, must change no Decision: at
// now + ResetAfter a state is as good as a missing one.
func TestExpiryIsLossless(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run("algo="+alg.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				limit := rapid.IntRange(1, 12).Draw(rt, "limit")
				rule := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Duration(rapid.Int64Range(int64(limit), int64(10*time.Second)).Draw(rt, "window"))}
				fake := clock.NewFake()
				fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
				l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), freshPrefix("expiry"))
				require.NoError(rt, err)
				want := conformance.NewOracle(rule)
				expires := map[string]time.Duration{}
				deleted := 0
				for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
					switch rapid.IntRange(0, 4).Draw(rt, "op") {
					case 0:
						fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*rule.Window)).Draw(rt, "advance")))
					case 1:
						fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
					default:
						now := fake.Now()
						for k, at := range expires {
							if at <= now {
								require.NoError(rt, c.Del(ctx, l.Key(k)).Err())
								delete(expires, k)
								deleted++
							}
						}
						key := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key")
						n := rapid.IntRange(0, limit).Draw(rt, "n")
						got, err := l.AllowN(ctx, key, n)
						require.NoError(rt, err)
						if exp := want.Allow(key, now, n); got != exp {
							rt.Fatalf("%v op %d: AllowN(t=%v, %q, %d) = %+v, want %+v (%d keys expired so far)", rule, i, now, key, n, got, exp, deleted)
						}
						if got.Allowed && n > 0 {
							expires[key] = now + got.ResetAfter
						}
					}
				}
			})
		})
	}
}

// TestMemoryPerKey reports what one key's state costs Redis (MEMORY USAGE,
// with 12-byte user keys in 30- to 34-byte Redis key names), and holds the
// string states to a bound. From the repository root:
//
//	cd redisstore && go test -run '^TestMemoryPerKey$' -v .
func TestMemoryPerKey(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	for _, alg := range algorithms {
		rule := admit.Rule{Algorithm: alg, Limit: 1000, Window: time.Minute}
		l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), redisstore.WithPrefix("mem-"+alg.String()+":"))
		require.NoError(t, err)
		for _, n := range []int{1, 100} {
			key := fmt.Sprintf("user:%07d", n)
			for range n {
				_, err := l.Allow(ctx, key)
				require.NoError(t, err)
			}
			bytes, err := c.MemoryUsage(ctx, l.Key(key)).Result()
			require.NoError(t, err)
			t.Logf("%v, %d admitted: %d bytes", rule, n, bytes)
			if alg != admit.SlidingLog {
				assert.LessOrEqual(t, bytes, int64(160), "%v: bytes per key", rule)
			}
		}
	}
}
