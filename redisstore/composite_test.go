package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/redisstore"
)

// TestCompositeConformance runs the composite suite every local variant
// passes against Keyed limiters of NewLimits on a real server, with the
// suite's fake clock passed as time, admit options mapped as
// TestConformance maps them.
func TestCompositeConformance(t *testing.T) {
	runCompositeConformance(t, newClient(t, redistest.Start(t)))
}

func runCompositeConformance(t *testing.T, client redis.Scripter) {
	newKeyed := func(limits admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
		s, err := plumb.ResolveLimiter("redisstore", opts)
		if err != nil {
			return nil, err
		}
		if names := s.StoreOptions(); names != "" {
			return nil, fmt.Errorf("%w: %s: a Redis store keeps no keys in this process", admit.ErrUnsupported, names)
		}
		ropts := []redisstore.Option{freshPrefix("composite-conformance")}
		if s.Clock != clock.System() {
			ropts = append(ropts, redisstore.WithTestClock(s.Clock))
		}
		l, err := redisstore.NewLimits(client, limits, ropts...)
		if err != nil {
			return nil, err
		}
		k, err := redisstore.NewKeyed(l, redisstore.Policy{
			Mode:    redisstore.FailClosed,
			Timeout: time.Minute,
			OnError: func(key string, err error) { t.Errorf("key %q: %v", key, err) },
		})
		if err != nil {
			return nil, err
		}
		return k, nil
	}
	conformance.RunComposite(t, conformance.CompositeVariant{
		Name:      "redisstore",
		NewLimits: newKeyed,
		Supports:  func(admit.Algorithm) bool { return true },
		Remote:    true,
	})
}

// drawLimits draws valid Limits of 1 to 4 rules of any algorithms, with
// small limits, in nanoseconds. The windows are small multiples of one
// scale, so that each rule's state is often partly spent and partly expired
// when another rule decides.
func drawLimits(rt *rapid.T) admit.Limits {
	scale := rapid.Int64Range(12, int64(time.Second)).Draw(rt, "scale")
	var rules []admit.Rule
	for range rapid.SampledFrom([]int{1, 2, 2, 3, 4}).Draw(rt, "rules") { // mostly composites
		r := admit.Rule{
			Algorithm: rapid.SampledFrom(algorithms).Draw(rt, "algo"),
			Limit:     rapid.IntRange(1, 12).Draw(rt, "limit"),
			Window:    time.Duration(scale * rapid.Int64Range(1, 8).Draw(rt, "windows")),
		}
		repeat := false
		for _, q := range rules {
			repeat = repeat || q == r
		}
		if !repeat {
			rules = append(rules, r)
		}
	}
	limits, err := admit.NewLimits(rules...)
	require.NoError(rt, err)
	return limits
}

// persist removes the time to live of the state at redisKey. Redis counts
// a TTL in real time while these tests' clock is fake: a slow run (the race
// detector, a loaded machine) could see a key expire while the fake clock
// stands still, and the kernel, which never forgets, would then disagree.
// Called after each decision, it leaves a real-time expiry only the span of
// one round trip. Expiry itself is tested at fake readings
// (TestCompositeExpiryIsLossless deletes keys when their ResetAfter has
// passed) and by the TTL each write sets (TestCompositeKeyLayout).
func persist(t require.TestingT, c redis.Scripter, redisKey string) {
	require.NoError(t, c.(interface {
		Persist(ctx context.Context, key string) *redis.BoolCmd
	}).Persist(context.Background(), redisKey).Err())
}

// TestCompositeDifferential holds composite limiters in Redis to
// kernel.Composite: the same generated calls, keys and clock moves
// (forwards by small and huge steps, and backwards) must give the same
// Decisions and the same binding rule, through Limiter.AllowNWhich, through
// Keyed.AllowNWhich on the same keys, and through AllowBatch.
func TestCompositeDifferential(t *testing.T) {
	runCompositeDifferential(t, newClient(t, redistest.Start(t)))
}

func runCompositeDifferential(t *testing.T, c redis.Scripter) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		limits := drawLimits(rt)
		maxLimit := 0
		var windows []int64
		for _, r := range limits.Rules() {
			maxLimit, windows = max(maxLimit, r.Limit), append(windows, int64(r.Window))
		}
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), freshPrefix("composite"))
		require.NoError(rt, err)
		k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Minute,
			OnError: func(key string, err error) { rt.Errorf("key %q: %v", key, err) }})
		require.NoError(rt, err)
		want := conformance.NewCompositeOracle(limits)
		drawCall := func() (string, int) {
			key := rapid.SampledFrom([]string{"a", "a", "b", "c"}).Draw(rt, "key")
			return key, rapid.OneOf(rapid.IntRange(0, limits.Limit()), rapid.IntRange(-1, maxLimit+1)).Draw(rt, "n")
		}
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1:
				// on the scale of one rule's window, so that each rule's
				// state is seen partly expired, not only whole
				w := rapid.SampledFrom(windows).Draw(rt, "scale")
				fake.Advance(time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "advance")))
			case 2:
				fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
			case 3:
				w := rapid.SampledFrom(windows).Draw(rt, "scale")
				fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, w).Draw(rt, "back")))
			case 4:
				if _, ok := c.(interface{ Pipeline() redis.Pipeliner }); !ok {
					continue // AllowBatch needs a client that can pipeline
				}
				calls := make([]redisstore.Call, rapid.IntRange(1, 4).Draw(rt, "calls"))
				for j := range calls {
					key, n := drawCall()
					calls[j] = redisstore.Call{Limiter: l, Key: key, N: n}
				}
				require.NoError(rt, redisstore.AllowBatch(ctx, calls))
				for _, call := range calls {
					persist(rt, c, l.Key(call.Key))
				}
				for j, call := range calls {
					require.NoError(rt, call.Err)
					if exp, _ := want.Allow(call.Key, fake.Now(), call.N); call.Decision != exp {
						rt.Fatalf("%v op %d, batch call %d: AllowN(t=%v, %q, %d) = %+v, want %+v", limits, i, j, fake.Now(), call.Key, call.N, call.Decision, exp)
					}
				}
			default:
				key, n := drawCall()
				now := fake.Now()
				exp, expWhich := want.Allow(key, now, n)
				var got admit.Decision
				var which int
				if key == "c" {
					got, which = k.AllowNWhich(key, n)
				} else {
					got, which, err = l.AllowNWhich(ctx, key, n)
					require.NoError(rt, err)
				}
				persist(rt, c, l.Key(key))
				if got != exp || which != expWhich {
					rt.Fatalf("%v op %d: AllowNWhich(t=%v, %q, %d) = %+v, %d, want %+v, %d", limits, i, now, key, n, got, which, exp, expWhich)
				}
			}
		}
	})
}

func mustLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// TestCompositeLogRing walks a sliding log of a composite around its ring
// several times, with some of its entries expired at each admission (they
// are dropped from the ring's head as the new ones go in at its tail), and
// requires the kernel's Decisions at every step.
func TestCompositeLogRing(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	limits := mustLimits(t, "sliding-log,3,1s + fixed-window,100,1h")
	fake := clock.NewFake()
	l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), freshPrefix("ring"))
	require.NoError(t, err)
	want := conformance.NewCompositeOracle(limits)
	const ms = time.Millisecond
	steps := []struct {
		at time.Duration
		n  int
	}{
		{0, 1}, {500 * ms, 1}, {1001 * ms, 1}, {1002 * ms, 1}, {1003 * ms, 1},
		{1600 * ms, 2}, {1700 * ms, 0}, {2002 * ms, 1}, {2003 * ms, 1}, {2700 * ms, 1},
		{3100 * ms, 3}, {3200 * ms, 1}, {4100 * ms, 2}, {4101 * ms, 1}, {4102 * ms, 1},
	}
	for i, st := range steps {
		fake.Set(st.at)
		exp, expWhich := want.Allow("k", st.at, st.n)
		got, which, err := l.AllowNWhich(ctx, "k", st.n)
		require.NoError(t, err)
		if got != exp || which != expWhich {
			t.Errorf("step %d: AllowNWhich(t=%v, %d) = %+v, %d, want %+v, %d", i, st.at, st.n, got, which, exp, expWhich)
		}
	}
}

// TestNewLimitsOfOneRule: Limits of one rule give New's limiter, which
// reads and writes the same keys in the same form: two limiters, one from
// each constructor, share each key's budget without a tag mismatch, and
// their Decisions are the kernel's.
func TestNewLimitsOfOneRule(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	for _, alg := range algorithms {
		rule := admit.Rule{Algorithm: alg, Limit: 3, Window: time.Minute}
		prefix := freshPrefix("one")
		single, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), prefix)
		require.NoError(t, err)
		limits, err := admit.NewLimits(rule)
		require.NoError(t, err)
		one, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), prefix)
		require.NoError(t, err)
		assert.Equal(t, rule, one.Rule(), "%v", alg)
		assert.Equal(t, limits, one.Limits(), "%v", alg)
		assert.Equal(t, limits, single.Limits(), "%v", alg)
		want := conformance.NewCompositeOracle(limits)
		for i := range 8 {
			fake.Advance(7 * time.Second)
			l := single
			if i%2 == 1 {
				l = one
			}
			got, which, err := l.AllowNWhich(ctx, "k", 1+i%2)
			require.NoError(t, err, "%v step %d", alg, i)
			exp, _ := want.Allow("k", fake.Now(), 1+i%2)
			assert.Equal(t, exp, got, "%v step %d", alg, i)
			assert.Zero(t, which, "%v step %d", alg, i)
		}
	}
}

// TestCompositeKeyLayout: a composite's state is one Redis key per limiter
// key, prefix{key}, a hash: its tag (each rule's algorithm, Limit and
// Window in the scripts' units, after "ns:" in nanoseconds), each rule's
// state, and a sliding log's
// ring slots; every admission sets a time
// to live of the Decision's ResetAfter (the largest of the rules' times
// until fresh), rounded up to the millisecond, plus 100 ms, as the single
// rules' scripts do.
func TestCompositeKeyLayout(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour + 300*time.Microsecond)
	limits := mustLimits(t, "token-bucket,4,10s + sliding-log,3,1m + fixed-window,100,1h + sliding-counter,50,1m")
	l, err := redisstore.NewLimits(c, limits, redisstore.WithClock(fake), redisstore.WithPrefix("layout:"))
	require.NoError(t, err)
	now, err := c.Time(ctx).Result()
	require.NoError(t, err)
	d, which, err := l.AllowNWhich(ctx, "user:1", 2)
	require.NoError(t, err)
	// 2 of 3 of the log spent: it binds, with 1 left, and the fixed
	// window is the last to be fresh, at the end of its hour.
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: time.Hour - 300*time.Microsecond}, d)
	assert.Equal(t, 1, which)

	keys, err := c.Keys(ctx, "layout:*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"layout:{user:1}"}, keys, "one Redis key per limiter key")
	assert.Equal(t, "hash", c.Type(ctx, l.Key("user:1")).Val())
	h, err := c.HGetAll(ctx, l.Key("user:1")).Result()
	require.NoError(t, err)
	at := int64(fake.Now())
	assert.Equal(t, map[string]string{
		"tag": "ns:t4/10000000000+l3/60000000000+f100/3600000000000+s50/60000000000",
		"0":   strings.Join([]string{itoa(at + 5*int64(time.Second)), "0"}, " "), // TAT: 2 of 4 per 10s
		"1":   "0 2",                                                             // the log's ring: head 0, two entries
		"1:0": itoa(at),
		"1:1": itoa(at),
		"2":   "1 2",             // window 1 of an hour, count 2
		"3":   itoa(60) + " 0 2", // minute 60, no previous count, 2 in this one
	}, h)
	expires, err := c.PExpireTime(ctx, l.Key("user:1")).Result()
	require.NoError(t, err)
	ttl := (d.ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond) + 100*time.Millisecond
	written := time.UnixMilli(int64((expires - ttl) / time.Millisecond))
	after, err := c.Time(ctx).Result()
	require.NoError(t, err)
	assert.False(t, written.Before(now.Truncate(time.Millisecond)) || written.After(after),
		"expiry %v minus TTL %v is %v, not within the call's server times [%v, %v]", expires, ttl, written, now, after)

	// With server time the windows are in microseconds, and the tag has no
	// "ns:".
	us, err := redisstore.NewLimits(c, limits, redisstore.WithPrefix("layout-us:"))
	require.NoError(t, err)
	_, err = us.Allow(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "t4/10000000+l3/60000000+f100/3600000000+s50/60000000", c.HGet(ctx, us.Key("k"), "tag").Val())
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestNewLimitsRefusesBadInput: each bad input is an error wrapping the
// sentinel that names its kind, never a panic or a default: a nil client,
// the zero Limits, a bad option, and a rule the scripts could not decide
// exactly, named in the error, whichever its place in the Limits.
func TestNewLimitsRefusesBadInput(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer c.Close()
	good := mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")

	_, err := redisstore.NewLimits(nil, good)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.NewLimits((*redis.Client)(nil), good)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.NewLimits(c, admit.Limits{})
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = redisstore.NewLimits(c, good, nil)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.NewLimits(c, good, redisstore.WithPrefix("a{"))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = redisstore.NewLimits(c, good, redisstore.WithClock(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)

	fake := redisstore.WithClock(clock.NewFake())
	for _, tc := range []struct {
		text string
		opts []redisstore.Option
		msg  string
	}{
		{"token-bucket,10,1s + token-bucket,1,1500ns", nil, "token-bucket,1,1500ns: with server time (microseconds) the window must be a whole number"},
		{"fixed-window,1000,999us + token-bucket,10,1s", nil, "fixed-window,1000,999us: with server time (microseconds) the window must be at least Limit"},
		{"sliding-counter,53000,24h + fixed-window,10,1s", nil, "sliding-counter,53000,24h: Limit × Window over 2^52"},
		{"fixed-window,10,1s + token-bucket,1001,75m", []redisstore.Option{fake}, "token-bucket,1001,75m: Limit × Window over 2^52"},
		{"fixed-window,10,1s + sliding-log,1,2251799813685249ns", []redisstore.Option{fake}, "over 2^51"},
	} {
		limits := mustLimits(t, tc.text)
		_, err := redisstore.NewLimits(c, limits, tc.opts...)
		assert.ErrorIs(t, err, admit.ErrUnsupported, "%v", limits)
		assert.ErrorContains(t, err, tc.msg, "%v", limits)
	}
	// The bounds are per rule: rules each at their own edge fit together.
	edges := mustLimits(t, "token-bucket,52124,24h + sliding-counter,52124,24h + fixed-window,1,2251799813685248us")
	_, err = redisstore.NewLimits(c, edges)
	assert.NoError(t, err)
}

// TestCompositeAnotherRulesKey: a composite limiter never misreads state
// other rules wrote under the same prefix: another composite's (other
// rules, or the same rules counted in other units) is refused by the tag,
// a single rule's by Redis's WRONGTYPE, and a single rule's limiter refuses
// a composite's hash the same way.
func TestCompositeAnotherRulesKey(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := redisstore.WithTestClock(clock.NewFake())
	prefix := redisstore.WithPrefix("shared:")
	limits := mustLimits(t, "token-bucket,5,1s + sliding-log,10,1m")
	a, err := redisstore.NewLimits(c, limits, fake, prefix)
	require.NoError(t, err)
	b, err := redisstore.NewLimits(c, mustLimits(t, "token-bucket,5,1s + sliding-log,11,1m"), fake, prefix)
	require.NoError(t, err)
	micro, err := redisstore.NewLimits(c, limits, prefix) // server time: µs
	require.NoError(t, err)
	tb, err := redisstore.New(c, limits.At(0), fake, prefix)
	require.NoError(t, err)
	sl, err := redisstore.New(c, limits.At(1), fake, prefix)
	require.NoError(t, err)

	_, err = a.Allow(ctx, "k")
	require.NoError(t, err)
	for _, other := range []*redisstore.Limiter{b, micro} {
		_, err = other.Allow(ctx, "k")
		assert.ErrorContains(t, err, "holds state of another rule (ns:t5/1000000000+l10/60000000000, want ")
	}
	for _, single := range []*redisstore.Limiter{tb, sl} {
		_, err = single.Allow(ctx, "k")
		assert.ErrorContains(t, err, "WRONGTYPE", "%v", single.Rule())
		_, err = single.Allow(ctx, single.Rule().String())
		require.NoError(t, err)
		_, err = a.Allow(ctx, single.Rule().String())
		assert.ErrorContains(t, err, "WRONGTYPE", "%v", single.Rule())
	}
	d, err := a.AllowN(ctx, "k", 0)
	require.NoError(t, err)
	assert.Equal(t, 4, d.Remaining, "the refusals wrote nothing")
}

// TestCompositeReset: with time frozen, a composite key spent in one rule
// and partly in another is, after Reset, a fresh key again at the same
// reading, from another client; another key is untouched.
func TestCompositeReset(t *testing.T) {
	srv := redistest.Start(t)
	c, other := newClient(t, srv), newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	limits := mustLimits(t, "sliding-log,3,1m + token-bucket,5,1h")
	prefix := freshPrefix("reset")
	l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), prefix)
	require.NoError(t, err)
	l2, err := redisstore.NewLimits(other, limits, redisstore.WithTestClock(fake), prefix)
	require.NoError(t, err)
	want := conformance.NewCompositeOracle(limits)
	now := fake.Now()
	step := func(i int, l *redisstore.Limiter, key string) {
		t.Helper()
		exp, expWhich := want.Allow(key, now, 1)
		got, which, err := l.AllowNWhich(ctx, key, 1)
		require.NoError(t, err)
		assert.Equal(t, exp, got, "step %d: AllowNWhich(t=%v, %q, 1)", i, now, key)
		assert.Equal(t, expWhich, which, "step %d", i)
	}
	step(0, l, "bystander")
	for i := range 4 {
		step(1+i, l, "k")
	}
	d, err := l.AllowN(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed, "the key is spent")

	require.NoError(t, l.Reset(ctx, "k"))
	want = conformance.NewCompositeOracle(limits) // a fresh k
	want.Allow("bystander", now, 1)
	for i := range 4 {
		step(5+i, l2, "k")
	}
	step(9, l2, "bystander")
	require.NoError(t, l.Reset(ctx, "never written"))
}

// TestCompositeExpiryIsLossless: Redis may expire a composite's key once
// its TTL has run, and the TTL is never shorter than the ResetAfter of the
// admission that wrote it, the largest of its rules' times until fresh
// (TestCompositeKeyLayout). Deleting every key at exactly that point, with
// time moving forwards, must change no Decision.
func TestCompositeExpiryIsLossless(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		limits := drawLimits(rt)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), freshPrefix("expiry"))
		require.NoError(rt, err)
		want := conformance.NewCompositeOracle(limits)
		var windows []int64
		for _, r := range limits.Rules() {
			windows = append(windows, int64(r.Window))
		}
		expires := map[string]time.Duration{}
		deleted := 0
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0:
				w := rapid.SampledFrom(windows).Draw(rt, "scale")
				fake.Advance(time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "advance")))
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
				n := rapid.IntRange(0, limits.Limit()).Draw(rt, "n")
				got, which, err := l.AllowNWhich(ctx, key, n)
				require.NoError(rt, err)
				persist(rt, c, l.Key(key))
				if exp, expWhich := want.Allow(key, now, n); got != exp || which != expWhich {
					rt.Fatalf("%v op %d: AllowNWhich(t=%v, %q, %d) = %+v, %d, want %+v, %d (%d keys expired so far)", limits, i, now, key, n, got, which, exp, expWhich, deleted)
				}
				if got.Allowed && n > 0 {
					expires[key] = now + got.ResetAfter
				}
			}
		}
	})
}

// TestCompositeExactAtTheEdges holds the composite script to the kernel
// where doubles are tightest: two rules, each drawn at the edges of the
// domain New accepts (drawEdgeRule), readings up to ±MaxReading, the clock
// moving forwards, backwards and to the ends.
func TestCompositeExactAtTheEdges(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		a := drawEdgeRule(rt, rapid.SampledFrom(algorithms).Draw(rt, "algo"))
		b := drawEdgeRule(rt, rapid.SampledFrom(algorithms).Draw(rt, "algo"))
		if a == b {
			return // NewLimits refuses a rule twice
		}
		limits, err := admit.NewLimits(a, b)
		require.NoError(rt, err)
		fake := clock.NewFake()
		move := func(to int64) { fake.Set(time.Duration(max(-redisstore.MaxReading, min(to, redisstore.MaxReading)))) }
		move(rapid.OneOf(rapid.Int64Range(-redisstore.MaxReading, redisstore.MaxReading), rapid.Int64Range(-1000, 1000)).Draw(rt, "start"))
		l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), freshPrefix("edge"))
		require.NoError(rt, err)
		want := conformance.NewCompositeOracle(limits)
		w := []int64{int64(a.Window), int64(b.Window)}
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			now := int64(fake.Now())
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				move(now + rapid.Int64Range(0, 2*rapid.SampledFrom(w).Draw(rt, "scale")).Draw(rt, "advance"))
			case 1:
				move(now + rapid.Int64Range(0, 10).Draw(rt, "nudge"))
			case 2:
				move(now - rapid.Int64Range(0, rapid.SampledFrom(w).Draw(rt, "scale")).Draw(rt, "back"))
			case 3:
				move(rapid.SampledFrom([]int64{-redisstore.MaxReading, redisstore.MaxReading, 0}).Draw(rt, "jump"))
			default:
				lim := limits.Limit()
				n := rapid.OneOf(rapid.IntRange(-1, 3), rapid.IntRange(-1, lim+1), rapid.SampledFrom([]int{lim, lim - 1, lim / 2, max(a.Limit, b.Limit)})).Draw(rt, "n")
				key := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key")
				exp, expWhich := want.Allow(key, time.Duration(now), n)
				got, which, err := l.AllowNWhich(ctx, key, n)
				require.NoError(rt, err)
				persist(rt, c, l.Key(key))
				if got != exp || which != expWhich {
					rt.Fatalf("%v op %d: AllowNWhich(t=%d, %q, %d) = %+v, %d, want %+v, %d", limits, i, now, key, n, got, which, exp, expWhich)
				}
			}
		}
	})
}

// TestCompositeOutOfMemory: on a server out of memory under noeviction, a
// composite's admission fails with Redis's OOM error and writes nothing,
// its sliding log's ring included, however many times it is tried; a
// denial is still answered; a new key is not created; once memory is back,
// the key decides as a fresh one (every admission has expired by then).
func TestCompositeOutOfMemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	l, err := redisstore.NewLimits(c, mustLimits(t, "token-bucket,3,1s + sliding-log,3,1s"), redisstore.WithTestClock(fake), freshPrefix("oom"))
	require.NoError(t, err)
	for range 3 {
		d, err := l.Allow(ctx, "full")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	dump := func(key string) string {
		v, err := c.Dump(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return ""
		}
		require.NoError(t, err)
		return v
	}
	before := dump(l.Key("full"))
	require.NotEmpty(t, before)

	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
	require.True(t, redis.IsOOMError(c.Set(ctx, "probe", "x", 0).Err()), "the server is out of memory")
	d, err := l.Allow(ctx, "full")
	require.NoError(t, err, "a denial writes nothing, so it is answered")
	assert.False(t, d.Allowed)
	for step := range 20 {
		fake.Advance(2 * time.Second) // every earlier admission has expired: the script would write
		d, err := l.Allow(ctx, "full")
		assert.True(t, redis.IsOOMError(err), "step %d: want Redis's OOM error, got %v", step, err)
		assert.Zero(t, d, "step %d", step)
	}
	assert.Equal(t, before, dump(l.Key("full")), "the state is as it was before the server ran out of memory")
	_, err = l.Allow(ctx, "new")
	assert.True(t, redis.IsOOMError(err), "a new key: %v", err)
	assert.Empty(t, dump(l.Key("new")), "no new key")

	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "0").Err())
	d, err = l.Allow(ctx, "full")
	require.NoError(t, err)
	fresh, err := l.Allow(ctx, "fresh")
	require.NoError(t, err)
	assert.Equal(t, fresh, d, "decided again, as a fresh key")
}

// TestCompositeSharedBudget: clients on separate connections share one
// composite budget: with time frozen (a fake clock) or too short to refill
// anything (server time, windows of a day), exactly the smallest Limit is
// admitted between them, whichever rule holds it.
func TestCompositeSharedBudget(t *testing.T) {
	srv := redistest.Start(t)
	for _, text := range []string{
		"fixed-window,300,%s + token-bucket,200,%[1]s",
		"sliding-counter,250,%s + sliding-log,200,%[1]s + fixed-window,400,%[1]s",
	} {
		t.Run("limits="+strings.ReplaceAll(fmt.Sprintf(text, "24h"), " ", ""), func(t *testing.T) {
			// nanoseconds: a day is beyond 2^52 / 250
			frozenLimits := mustLimits(t, fmt.Sprintf(text, "1h"))
			fake := clock.NewFake()
			fake.Set(time.Hour)
			frozen := freshPrefix("frozen")
			got := hammer(t, srv.Addr, 8, func(c *redis.Client) (*redisstore.Limiter, error) {
				return redisstore.NewLimits(c, frozenLimits, redisstore.WithTestClock(fake), frozen)
			}, nil)
			assert.Equal(t, 200, got, "fake clock, 8 connections")
			limits := mustLimits(t, fmt.Sprintf(text, "24h"))
			server := freshPrefix("server")
			got = hammer(t, srv.Addr, 8, func(c *redis.Client) (*redisstore.Limiter, error) {
				return redisstore.NewLimits(c, limits, server)
			}, nil)
			assert.Equal(t, 200, got, "server time, 8 connections")
		})
	}
}

// whichStub is a local limiter whose AllowNWhich names a rule of its own.
type whichStub struct{}

func (whichStub) Allow(key string) admit.Decision { return admit.Decision{Allowed: true, Limit: 7} }
func (whichStub) AllowN(key string, n int) admit.Decision {
	return admit.Decision{Allowed: true, Limit: 7}
}
func (whichStub) AllowNWhich(key string, n int) (admit.Decision, int) {
	return admit.Decision{Allowed: true, Limit: 7}, 2
}

// TestCompositeKeyedWhenDown: with the server stopped, a composite Keyed
// limiter's Decisions are the Policy's, each naming the rule whose Limit it
// carries: fail-closed, the longest of the rules' token intervals; a
// request that can never pass, the first rule it exceeds; fail-local, the
// local limiter's own Decision and index.
func TestCompositeKeyedWhenDown(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	// Token intervals: 100 ms, then 3 s (the longest), then 1 s.
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,20,1m + sliding-window,60,1m")
	l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(clock.NewFake()))
	require.NoError(t, err)
	newKeyed := func(mode redisstore.Mode, local admit.KeyedLimiter) *redisstore.Keyed {
		k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: mode, Timeout: upTimeout, Local: local, Clock: clock.NewFake()})
		require.NoError(t, err)
		assert.Equal(t, limits, k.Limits())
		return k
	}
	closed := newKeyed(redisstore.FailClosed, nil)
	d, which := closed.AllowNWhich("k", 1)
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Minute}, d, "Redis is up")
	assert.Zero(t, which)

	srv.Stop()
	type call struct {
		d     admit.Decision
		which int
	}
	ask := func(k *redisstore.Keyed, n int) call {
		d, which := k.AllowNWhich("k", n)
		return call{d, which}
	}
	open := newKeyed(redisstore.FailOpen, nil)
	local, err := locked.NewLimits(mustLimits(t, "token-bucket,5,1s + fixed-window,1,1m"), admit.WithClock(clock.NewFake()))
	require.NoError(t, err)
	fromLocal := newKeyed(redisstore.FailLocal, local)
	fromStub := newKeyed(redisstore.FailLocal, whichStub{})
	for _, tc := range []struct {
		name string
		got  call
		want call
	}{
		{"fail-closed", ask(closed, 1), call{admit.Decision{Limit: 20, RetryAfter: 3 * time.Second}, 1}},
		{"fail-closed probe", ask(closed, 0), call{admit.Decision{Allowed: true, Limit: 10}, 0}},
		{"fail-closed n beyond rule 0", ask(closed, 11), call{admit.Decision{Limit: 10, RetryAfter: admit.Never}, 0}},
		{"fail-closed n < 0", ask(closed, -1), call{admit.Decision{Limit: 10, RetryAfter: admit.Never}, 0}},
		{"fail-open", ask(open, 1), call{admit.Decision{Allowed: true, Limit: 10}, 0}},
		{"fail-local", ask(fromLocal, 1), call{admit.Decision{Allowed: true, Limit: 1, ResetAfter: time.Minute}, 1}},
		{"fail-local, denied", ask(fromLocal, 1), call{admit.Decision{Limit: 1, RetryAfter: time.Minute, ResetAfter: time.Minute}, 1}},
		{"fail-local, its own index", ask(fromStub, 1), call{admit.Decision{Allowed: true, Limit: 7}, 2}},
	} {
		assert.Equal(t, tc.want, tc.got, tc.name)
	}
}

// TestCompositeMemoryPerKey reports what one composite key costs Redis
// (MEMORY USAGE, with 12-byte user keys in 28-byte Redis key names), and
// holds composites without a sliding log to a bound, which a tag over 64
// bytes (a hash out of Redis's compact encoding) would break. From the
// repository root:
//
//	cd redisstore && go test -run '^TestCompositeMemoryPerKey$' -v .
func TestCompositeMemoryPerKey(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	for _, text := range []string{
		"token-bucket,1000,1m + fixed-window,10000,1h",
		"token-bucket,1000,1m + fixed-window,10000,1h + sliding-counter,1000,30m",
		"token-bucket,1000,1m + sliding-log,1000,1m",
	} {
		limits := mustLimits(t, text)
		l, err := redisstore.NewLimits(c, limits, redisstore.WithTestClock(fake), redisstore.WithPrefix("mem-composite:"))
		require.NoError(t, err)
		for _, n := range []int{1, 100, 1000} {
			key := fmt.Sprintf("user:%07d", n+len(text))
			for range n {
				_, err := l.Allow(ctx, key)
				require.NoError(t, err)
			}
			bytes, err := c.MemoryUsage(ctx, l.Key(key)).Result()
			require.NoError(t, err)
			t.Logf("%v, %d admitted: %d bytes", limits, n, bytes)
			if !strings.Contains(text, "sliding-log") {
				assert.LessOrEqual(t, bytes, int64(256), "%v: bytes per key", limits)
			}
		}
	}
}
