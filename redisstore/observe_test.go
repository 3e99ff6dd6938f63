package redisstore_test

import (
	"context"
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
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/redisstore"
)

// observer is an observe.Observer for tests: it records the Labels of every
// Instrument it is asked for, and its instruments count, per outcome, the
// observations and their requests. With none it returns nil instruments;
// with timed its instruments ask for latencies.
type observer struct {
	timed, none bool

	mu    sync.Mutex
	asked []observe.Labels
	insts []*instrument
}

func (o *observer) Instrument(labels observe.Labels) observe.Instrument {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, labels)
	if o.none {
		return nil
	}
	inst := &instrument{timed: o.timed}
	o.insts = append(o.insts, inst)
	return inst
}

// only requires that exactly one Instrument was asked for, with labels, and
// returns it.
func (o *observer) only(t *testing.T, labels observe.Labels) *instrument {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Equal(t, []observe.Labels{labels}, o.asked, "one Instrument per limiter, asked for when it is built")
	require.Len(t, o.insts, 1)
	return o.insts[0]
}

type instrument struct {
	timed bool

	calls, requests [observe.NumOutcomes]atomic.Int64
	latencies       atomic.Int64 // observations given a latency other than 0
}

func (i *instrument) Observe(o observe.Outcome, n int, latency time.Duration) {
	i.calls[o].Add(1)
	i.requests[o].Add(int64(n))
	if latency != 0 {
		i.latencies.Add(1)
	}
}

func (i *instrument) Timed() bool { return i.timed }

// take returns the observations since the last take, by outcome name: the
// number of observations and the sum of their n.
func (i *instrument) take() map[string][2]int64 {
	got := map[string][2]int64{}
	for o := range i.calls {
		if calls := i.calls[o].Swap(0); calls != 0 {
			got[observe.Outcome(o).String()] = [2]int64{calls, i.requests[o].Swap(0)}
		}
	}
	return got
}

type counts = map[string][2]int64

func TestWithObserverLabels(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer c.Close()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}

	_, err := redisstore.New(c, rule, redisstore.WithObserver(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	assert.ErrorContains(t, err, "leave the option out")

	obs := new(observer)
	l, err := redisstore.New(c, rule, redisstore.WithObserver(obs))
	require.NoError(t, err)
	obs.only(t, observe.Labels{Source: "redis", Name: redisstore.DefaultPrefix, Limits: l.Limits()})

	obs = new(observer)
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")
	_, err = redisstore.NewLimits(c, limits, redisstore.WithObserver(obs), redisstore.WithPrefix("api:orders:"))
	require.NoError(t, err, "the option's place does not matter")
	obs.only(t, observe.Labels{Source: "redis", Name: "api:orders:", Limits: limits})

	// A limiter that is not built asks for no Instrument.
	obs = new(observer)
	_, err = redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 1000, Window: time.Microsecond}, redisstore.WithObserver(obs))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	_, err = redisstore.NewLimits(c, limits, redisstore.WithObserver(obs), redisstore.WithPrefix("{"))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	assert.Empty(t, obs.asked)
}

// TestObserveLimiter counts a Limiter's decisions by outcome: Redis's
// admissions and denials, each kind of error, and the calls of a batch.
func TestObserveLimiter(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	obs := new(observer)
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 3, Window: time.Minute}, redisstore.WithTestClock(fake), redisstore.WithPrefix("window:"), redisstore.WithObserver(obs))
	require.NoError(t, err)
	inst := obs.only(t, observe.Labels{Source: "redis", Name: "window:", Limits: l.Limits()})

	for i, step := range []struct {
		n       int
		allowed bool
	}{{1, true}, {2, true}, {0, true}, {1, false}, {9, false}} {
		d, _, err := l.AllowNWhich(ctx, "k", step.n)
		require.NoError(t, err)
		require.Equal(t, step.allowed, d.Allowed, "step %d: AllowNWhich(k, %d)", i, step.n)
	}
	assert.Equal(t, counts{"admitted": {3, 3}, "denied": {2, 10}}, inst.take(), "a probe is an admission of 0")

	// An expired deadline, a cancelled context, a clock reading out of range.
	expired, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	_, err = l.AllowN(expired, "k", 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, counts{"timed_out": {1, 1}}, inst.take())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.AllowN(cancelled, "k", 2)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, counts{"errored": {1, 2}}, inst.take(), "a cancellation is not a deadline")
	fake.Set(redisstore.MaxReading + 1)
	_, err = l.Allow(ctx, "k")
	require.ErrorIs(t, err, redisstore.ErrClockRange)
	assert.Equal(t, counts{"errored": {1, 1}}, inst.take())
	fake.Set(time.Minute)

	// Each call of a batch is counted on its own limiter's Instrument; a
	// batch refused as a whole decides nothing and counts nothing.
	other := new(observer)
	m, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Minute}, redisstore.WithTestClock(fake), redisstore.WithPrefix("bucket:"), redisstore.WithObserver(other))
	require.NoError(t, err)
	plain, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Minute}, redisstore.WithTestClock(fake), redisstore.WithPrefix("plain:"))
	require.NoError(t, err)
	otherInst := other.only(t, observe.Labels{Source: "redis", Name: "bucket:", Limits: m.Limits()})
	calls := []redisstore.Call{{Limiter: l, Key: "k", N: 3}, {Limiter: m, Key: "k", N: 1}, {Limiter: plain, Key: "k", N: 1}, {Limiter: m, Key: "k", N: 1}, {Limiter: l, Key: "k", N: 4}}
	require.NoError(t, redisstore.AllowBatch(ctx, calls))
	assert.Equal(t, counts{"admitted": {1, 3}, "denied": {1, 4}}, inst.take())
	assert.Equal(t, counts{"admitted": {1, 1}, "denied": {1, 1}}, otherInst.take())
	require.ErrorIs(t, redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: l, Key: "k", N: 1}, {}}), admit.ErrInvalidOption)
	assert.Empty(t, inst.take())
	fake.Set(redisstore.MaxReading + 1)
	require.NoError(t, redisstore.AllowBatch(ctx, calls[:2]))
	assert.Equal(t, counts{"errored": {1, 3}}, inst.take(), "a call whose reading is out of range")
	assert.Equal(t, counts{"errored": {1, 1}}, otherInst.take())
	fake.Set(2 * time.Minute)

	// Neither instrument asked for latencies, and none was given.
	assert.Zero(t, inst.latencies.Load())
	assert.Zero(t, otherInst.latencies.Load())
	require.Len(t, obs.asked, 1, "no Instrument asked for per decision")
}

// TestObserveNetworkTimeout: a read that passes the connection's deadline
// is a net.Error whose Timeout is true, counted as timed out like the
// context's deadline. The client leaves context deadlines to ReadTimeout,
// which the paused server outlasts.
func TestObserveNetworkTimeout(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: pausedTimeout, MaxRetries: -1})
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	admin := newClient(t, srv)
	ctx := context.Background()
	obs := new(observer)
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Hour}, redisstore.WithTestClock(clock.NewFake()), redisstore.WithObserver(obs))
	require.NoError(t, err)
	_, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err())
	_, err = l.Allow(ctx, "k")
	require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
	require.Error(t, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the network's deadline, not the context's")
	inst := obs.only(t, observe.Labels{Source: "redis", Name: redisstore.DefaultPrefix, Limits: l.Limits()})
	assert.Equal(t, counts{"admitted": {1, 1}, "timed_out": {1, 1}}, inst.take(), "%v", err)
}

// TestObserveKeyed counts a Keyed limiter's decisions: Redis's as the
// Limiter counts them, and each Decision of the Policy as fell back, beside
// the failure of the call that Redis failed, alone for a call the open
// circuit decided without asking Redis.
func TestObserveKeyed(t *testing.T) {
	for _, mode := range []redisstore.Mode{redisstore.FailClosed, redisstore.FailOpen, redisstore.FailLocal} {
		t.Run("mode="+mode.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			c := newClient(t, srv)
			hook := new(askHook)
			c.AddHook(hook)
			admin := newClient(t, srv)
			ctx := context.Background()
			fake := clock.NewFake()
			obs := new(observer)
			l, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 3, Window: time.Hour}, redisstore.WithTestClock(fake), redisstore.WithPrefix("keyed:"), redisstore.WithObserver(obs))
			require.NoError(t, err)
			var local admit.KeyedLimiter
			if mode == redisstore.FailLocal {
				local, err = locked.New(admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Hour}, admit.WithClock(fake))
				require.NoError(t, err)
			}
			errs := new(errorLog)
			breakerClock := clock.NewFake()
			k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: mode, Local: local, Timeout: pausedTimeout, Backoff: time.Second, Clock: breakerClock, OnError: errs.record})
			require.NoError(t, err)
			inst := obs.only(t, observe.Labels{Source: "redis", Name: "keyed:", Limits: l.Limits()})

			for range 4 {
				k.Allow("k")
			}
			k.AllowN("k", 0)
			assert.Equal(t, counts{"admitted": {4, 3}, "denied": {1, 1}}, inst.take(), "Redis's decisions")

			// Redis answers with an error about one key: the call failed,
			// the Policy decided, and the circuit stays closed.
			require.NoError(t, c.RPush(ctx, l.Key("list"), "x").Err())
			k.AllowN("list", 2)
			assert.Equal(t, counts{"errored": {1, 2}, "fell_back": {1, 2}}, inst.take())

			// The server paused past the Timeout: the call times out and the
			// Policy decides; then the open circuit decides without Redis.
			require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err())
			asked := hook.asked.Load()
			k.Allow("j")
			k.AllowN("j", 2)
			k.AllowN("j", 9)
			require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
			assert.Equal(t, asked+1, hook.asked.Load(), "one call asked Redis")
			assert.Equal(t, counts{"timed_out": {1, 1}, "fell_back": {3, 12}}, inst.take())
			assert.Len(t, errs.take(), 4, "OnError saw every failure, the open circuit's included")

			// A probe after the Backoff: Redis's decision again.
			breakerClock.Advance(time.Second)
			assert.True(t, k.Allow("j").Allowed)
			assert.Equal(t, counts{"admitted": {1, 1}}, inst.take())
			assert.Zero(t, inst.latencies.Load(), "an untimed instrument is given no latency")
		})
	}
}

// TestObserveTimed: a timed Instrument is given each decision's latency, a
// Keyed one's fallbacks' included; one that is nil counts nothing and
// costs nothing but the check.
func TestObserveTimed(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := context.Background()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Hour}
	timed := &observer{timed: true}
	l, err := redisstore.New(c, rule, redisstore.WithTestClock(clock.NewFake()), redisstore.WithPrefix("timed:"), redisstore.WithObserver(timed))
	require.NoError(t, err)
	inst := timed.only(t, observe.Labels{Source: "redis", Name: "timed:", Limits: l.Limits()})
	for range 3 {
		_, err := l.Allow(ctx, "k")
		require.NoError(t, err)
	}
	require.NoError(t, redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: l, Key: "k", N: 1}, {Limiter: l, Key: "j", N: 1}}))
	k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second, Clock: clock.NewFake()})
	require.NoError(t, err)
	require.NoError(t, c.RPush(ctx, l.Key("list"), "x").Err())
	k.Allow("list")
	assert.Equal(t, counts{"admitted": {3, 3}, "denied": {2, 2}, "errored": {1, 1}, "fell_back": {1, 1}}, inst.take())
	assert.Equal(t, int64(7), inst.latencies.Load(), "every observation timed")

	none := &observer{none: true}
	l, err = redisstore.New(c, rule, redisstore.WithTestClock(clock.NewFake()), redisstore.WithPrefix("none:"), redisstore.WithObserver(none))
	require.NoError(t, err)
	require.Len(t, none.asked, 1)
	d, err := l.Allow(ctx, "k")
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	require.NoError(t, redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: l, Key: "k", N: 1}}))
	k, err = redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: time.Second, Clock: clock.NewFake()})
	require.NoError(t, err)
	assert.False(t, k.Allow("k").Allowed)
}

// TestObserveAllocs: observing adds no allocation to a decision, timed or
// not, through a Limiter or a Keyed one. The test's instrument allocates
// nothing itself.
func TestObserveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Hour}
	policy := redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second}
	var base [2]float64
	for i, obs := range []*observer{nil, {}, {timed: true}} {
		opts := []redisstore.Option{freshPrefix("allocs")}
		if obs != nil {
			opts = append(opts, redisstore.WithObserver(obs))
		}
		l, err := redisstore.New(c, rule, opts...)
		require.NoError(t, err)
		k, err := redisstore.NewKeyed(l, policy)
		require.NoError(t, err)
		_, err = l.Allow(ctx, "k") // load the script
		require.NoError(t, err)
		allocs := [2]float64{
			testing.AllocsPerRun(200, func() {
				if _, err := l.Allow(ctx, "k"); err != nil {
					panic(err)
				}
			}),
			testing.AllocsPerRun(200, func() {
				if !k.Allow("k").Allowed {
					panic("every call is admitted")
				}
			}),
		}
		if obs == nil {
			base = allocs
			t.Logf("without an observer: Limiter.Allow %v allocations, Keyed.Allow %v", allocs[0], allocs[1])
			continue
		}
		assert.Equal(t, base, allocs, "observer %d (timed %v): [Limiter.Allow, Keyed.Allow] allocations, want as without", i, obs.timed)
		assert.Equal(t, counts{"admitted": {403, 403}}, obs.insts[0].take())
	}
}
