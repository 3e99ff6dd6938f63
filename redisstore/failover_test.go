package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
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
	"github.com/admit-go/admit/redisstore"
)

// The failover tests' deployment: a primary, one replica and three
// Sentinels, quorum 2, all on loopback.
const (
	failoverName      = "admit"
	failoverQuorum    = 2
	failoverDownAfter = 500 * time.Millisecond
	failoverTimeout   = 3 * time.Second        // Sentinel's failover-timeout
	waitTimeout       = 100 * time.Millisecond // WithWaitReplicas' timeout
)

// primaryArgs start a primary that sends its replicas their first full
// copy at once, not after the default 5 s that lets several replicas share
// one transfer.
var primaryArgs = []string{"--repl-diskless-sync-delay", "0"}

// sentinelled is a primary with one replica, watched by three Sentinels.
type sentinelled struct {
	primary, replica *redistest.Server
	sentinels        []string // their addresses
}

// startSentinelled starts a primary, its replica and three Sentinels, and
// returns once the replica is in sync and every Sentinel knows the replica
// and the two other Sentinels, so that a failover can happen.
func startSentinelled(t *testing.T) *sentinelled {
	t.Helper()
	redistest.SentinelBinary(t) // skip before starting anything
	d := &sentinelled{primary: redistest.Start(t, primaryArgs...)}
	host, port, err := net.SplitHostPort(d.primary.Addr)
	require.NoError(t, err)
	d.replica = redistest.Start(t, "--replicaof", host, port)
	ctx := context.Background()
	awaitReplica(t, newClient(t, d.primary), newClient(t, d.replica))
	for range 3 {
		s := redistest.StartSentinel(t, redistest.SentinelConfig{
			Name: failoverName, Primary: d.primary.Addr, Quorum: failoverQuorum,
			DownAfter: failoverDownAfter, FailoverTimeout: failoverTimeout,
		})
		d.sentinels = append(d.sentinels, s.Addr)
	}
	for _, addr := range d.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		redistest.Await(t, fmt.Sprintf("Sentinel %s knows the replica and the other Sentinels", addr), func() bool {
			m, err := sc.Master(ctx, failoverName).Result()
			return err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2"
		})
		require.NoError(t, sc.Close())
	}
	return d
}

// awaitReplica waits until the replica of primary is in sync and the
// primary lists it online, the replicas WAIT counts: after a full sync the
// primary puts a replica online only when the replica's first
// acknowledgement arrives, which may be after the replica reports its
// link up, and a WAIT sent in between counts no replica (seen once under
// load: an admission WAIT(1, 1s) refused right after the sync).
func awaitReplica(t testing.TB, primary, replica *redis.Client) {
	t.Helper()
	ctx := context.Background()
	redistest.Await(t, "the replica syncs with the primary", func() bool {
		info, err := replica.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	redistest.Await(t, "the primary counts its replica online", func() bool {
		info, err := primary.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, ",state=online,")
	})
}

// failoverClient returns a go-redis failover client of d's Sentinels,
// closed when the test ends.
func (d *sentinelled) failoverClient(t *testing.T) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            failoverName,
		SentinelAddrs:         d.sentinels,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// failoverRun is the traffic of one limiter through a failover: its
// goroutines' counts, and when decisions came from Redis again.
type failoverRun struct {
	name string
	lim  *redisstore.Limiter

	admitted     []atomic.Int64 // per key: admissions acknowledged
	calls        atomic.Int64   // decisions returned
	fromRedis    atomic.Int64   // Redis answered (an admission acknowledged, a denial)
	open         atomic.Int64   // fell back: circuit open, Redis not asked
	failed       atomic.Int64   // fell back: the call to Redis failed
	unreplicated atomic.Int64   // fell back: admitted on the primary, not acknowledged (ErrNotReplicated)

	killed  atomic.Int64 // when the killed primary had exited, Unix ns; 0 before
	resumed atomic.Int64 // the end of the first call started after that which Redis answered, Unix ns
}

// Rule of the failover tests: time frozen (a fake clock), so a key admits
// exactly Limit in all; each admission adds Window/Limit = 5 minutes to
// the key's time to live, so no key expires while the test runs.
var failoverRule = admit.Rule{Algorithm: admit.TokenBucket, Limit: 100, Window: 500 * time.Minute}

const (
	failoverKeys       = 64
	failoverGoroutines = 4
)

// run calls r.lim through its own Keyed in each of failoverGoroutines
// goroutines until stop is closed; each goroutine has its own Keyed (and
// circuit breaker), so that its OnError tells it how each call was decided.
// Their Timeout is upTimeout: no call to a server that runs may time out,
// however busy the machine, for one that did would be denied, its
// admission written but not counted, and the admissions the failover lost
// would be counted short. A call to the killed primary fails on its own
// (its connections refused).
func (r *failoverRun) run(t *testing.T, stop <-chan struct{}, wg *sync.WaitGroup) {
	r.admitted = make([]atomic.Int64, failoverKeys)
	for g := range failoverGoroutines {
		var failure error
		k, err := redisstore.NewKeyed(r.lim, redisstore.Policy{
			Mode: redisstore.FailClosed, Timeout: upTimeout,
			OnError: func(_ string, err error) { failure = err }, // called in this goroutine
		})
		require.NoError(t, err)
		wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := i % failoverKeys
				failure = nil
				start := time.Now().UnixNano()
				d := k.Allow(strconv.Itoa(key))
				end := time.Now().UnixNano()
				r.calls.Add(1)
				switch {
				case failure == nil:
					r.fromRedis.Add(1)
					if d.Allowed { // FailClosed admits only what Redis admitted
						r.admitted[key].Add(1)
					}
				case errors.Is(failure, redisstore.ErrCircuitOpen):
					r.open.Add(1)
				case errors.Is(failure, redisstore.ErrNotReplicated):
					r.unreplicated.Add(1)
				default:
					r.failed.Add(1)
				}
				if killed := r.killed.Load(); killed != 0 && start > killed && r.resumed.Load() == 0 &&
					(failure == nil || errors.Is(failure, redisstore.ErrNotReplicated)) {
					r.resumed.CompareAndSwap(0, end)
				}
			}
		})
	}
}

// excess returns, summed over the keys and for the keys where it is
// positive, the admissions acknowledged plus those the new primary still
// offers, minus the Limit: the admissions above the rule that writes lost
// in the failover allow. Remaining is read with a probe (n = 0) through
// probe, a limiter of r's rule and prefix that does not wait.
func (r *failoverRun) excess(t *testing.T, probe *redisstore.Limiter) (total, keys int) {
	for key := range failoverKeys {
		d, err := probe.AllowN(context.Background(), strconv.Itoa(key), 0)
		require.NoError(t, err, "probe of key %d on the new primary", key)
		if over := int(r.admitted[key].Load()) + d.Remaining - failoverRule.Limit; over > 0 {
			total += over
			keys++
		}
	}
	return total, keys
}

// TestFailover kills the primary of a Sentinel deployment (a primary, one
// replica, three Sentinels, quorum 2) while goroutines call two Keyed
// limiters through go-redis's failover client, one limiter acknowledging
// admissions as Redis does (asynchronous replication), one with
// WithWaitReplicas(1, 100ms); in the second case the replica's link is cut
// (CLIENT KILL TYPE replica) just before the kill, as a replica that lags
// would be. It asserts what is guaranteed: decisions come from Redis (the
// new primary) again, and with WithWaitReplicas no admission that was
// acknowledged is lost, so no key admits more than its Limit. It measures
// and logs the rest: decisions that fell back and why, the time from the
// kill until Sentinel switched and until decisions came from Redis again,
// and the admissions above the rule that the lost writes allowed.
func TestFailover(t *testing.T) {
	for _, lagging := range []bool{false, true} {
		t.Run(fmt.Sprintf("lagging=%v", lagging), func(t *testing.T) {
			testFailover(t, lagging)
		})
	}
}

func testFailover(t *testing.T, lagging bool) {
	d := startSentinelled(t)
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	prefixes := []string{"failover-async:", "failover-wait:"}
	runs := make([]*failoverRun, 2)
	for i, name := range []string{"async", "wait"} {
		opts := []redisstore.Option{redisstore.WithTestClock(fake), redisstore.WithPrefix(prefixes[i])}
		if name == "wait" {
			opts = append(opts, redisstore.WithWaitReplicas(1, waitTimeout))
		}
		lim, err := redisstore.New(d.failoverClient(t), failoverRule, opts...)
		require.NoError(t, err)
		runs[i] = &failoverRun{name: name, lim: lim}
	}

	// Sentinel announces the switch on +switch-master.
	sc := redis.NewSentinelClient(&redis.Options{Addr: d.sentinels[0]})
	defer sc.Close()
	sub := sc.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)
	switched := make(chan time.Time, 1)
	go func() {
		if _, ok := <-sub.Channel(); ok {
			switched <- time.Now()
		}
	}()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range runs {
		r.run(t, stop, &wg)
	}
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			wg.Wait()
		}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		redistest.Await(t, what, cond)
	}
	admittedSum := func(r *failoverRun) (n int64) {
		for i := range r.admitted {
			n += r.admitted[i].Load()
		}
		return n
	}
	waitUntil("both limiters admit before the kill", func() bool {
		return admittedSum(runs[0]) >= 200 && admittedSum(runs[1]) >= 50
	})
	var cutAt [2]int64
	if lagging {
		// The replica stops following: its link is cut, and it can no longer
		// resync (it would AUTH to a primary that has no password), as a
		// replica behind a partition. Admissions go on, acknowledged by the
		// primary alone.
		require.NoError(t, newClient(t, d.replica).ConfigSet(ctx, "masterauth", "cut").Err())
		n, err := newClient(t, d.primary).ClientKillByFilter(ctx, "TYPE", "replica").Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the replica's link is cut")
		cutAt = [2]int64{admittedSum(runs[0]), admittedSum(runs[1])}
		waitUntil("admissions and calls while the replica's link is cut", func() bool {
			return admittedSum(runs[0]) >= cutAt[0]+20 && runs[1].unreplicated.Load() >= 1
		})
	}
	var acked, unreplicated [2]int64
	for i, r := range runs {
		acked[i], unreplicated[i] = admittedSum(r), r.unreplicated.Load()
	}
	d.primary.Stop() // SIGKILL, and wait for the process to exit
	killed := time.Now()
	for _, r := range runs {
		r.killed.Store(killed.UnixNano())
	}

	var switchedAt time.Time
	waitUntil("Sentinel's failover (+switch-master)", func() bool {
		select {
		case switchedAt = <-switched:
			return true
		default:
			return false
		}
	})
	waitUntil("decisions from the new primary", func() bool {
		return runs[0].resumed.Load() != 0 && runs[1].resumed.Load() != 0
	})
	var resumedCalls [2]int64
	for i, r := range runs {
		resumedCalls[i] = r.calls.Load()
	}
	waitUntil("calls after the failover", func() bool {
		return runs[0].calls.Load() >= resumedCalls[0]+200 && runs[1].calls.Load() >= resumedCalls[1]+20
	})
	close(stop)
	wg.Wait()
	stopped = true

	t.Logf("failover (lagging replica %v): Sentinel switched %v after the kill (down-after %v, quorum %d of 3)",
		lagging, switchedAt.Sub(killed).Round(time.Millisecond), failoverDownAfter, failoverQuorum)
	for i, r := range runs {
		probe, err := redisstore.New(d.failoverClient(t), failoverRule, redisstore.WithTestClock(fake), redisstore.WithPrefix(prefixes[i]))
		require.NoError(t, err)
		excess, keys := r.excess(t, probe)
		resumed := time.Unix(0, r.resumed.Load()).Sub(killed)
		cut := int64(0)
		if lagging {
			cut = acked[i] - cutAt[i]
		}
		t.Logf("failover %s (lagging replica %v): %d decisions, %d from Redis, fell back %d (%d calls failed, %d circuit open, %d not replicated: %d before the kill, %d after); "+
			"%d admissions acknowledged before the kill, %d of them after the replica's link was cut; decisions from the new primary %v after the kill; "+
			"admissions above the rule: %d on %d of %d keys",
			r.name, lagging, r.calls.Load(), r.fromRedis.Load(), r.failed.Load()+r.unreplicated.Load()+r.open.Load(),
			r.failed.Load(), r.open.Load(), r.unreplicated.Load(), unreplicated[i], r.unreplicated.Load()-unreplicated[i],
			acked[i], cut, resumed.Round(time.Millisecond), excess, keys, failoverKeys)
		switch {
		case r.name == "wait":
			assert.Zero(t, excess, "WithWaitReplicas(1): an acknowledged admission was lost in the failover")
		case lagging:
			// At least 20 admissions were acknowledged after the cut, all but
			// the few whose scripts ran before it (one per goroutine) lost:
			// the accounting sees a loss where there is one.
			assert.GreaterOrEqual(t, excess, int(cut)-failoverGoroutines, "admissions the lagging replica never had")
		}
	}
}

// TestWaitReplicas: an admission is acknowledged only once a replica has
// it, which it then holds; without a replica an admission is an error
// wrapping ErrNotReplicated, charged on the primary all the same, while
// denials and probes are answered; Keyed decides such an admission by its
// Policy; the script lost by the server is loaded again; bad settings and
// clients are refused.
func TestWaitReplicas(t *testing.T) {
	ctx := context.Background()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Hour}
	fake := clock.NewFake()
	fake.Set(time.Hour)

	t.Run("refused", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
		defer c.Close()
		for _, opt := range []redisstore.Option{
			redisstore.WithWaitReplicas(0, time.Second),
			redisstore.WithWaitReplicas(-1, time.Second),
			redisstore.WithWaitReplicas(1, 0),
			redisstore.WithWaitReplicas(1, -time.Millisecond),
			redisstore.WithWaitReplicas(1, 1500*time.Microsecond),
		} {
			_, err := redisstore.New(c, rule, opt)
			assert.ErrorIs(t, err, admit.ErrInvalidOption)
		}
		short := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true})
		defer short.Close()
		_, err := redisstore.New(short, rule, redisstore.WithWaitReplicas(1, 100*time.Millisecond))
		assert.ErrorIs(t, err, admit.ErrInvalidOption, "WAIT's timeout is not under the client's ReadTimeout")
		_, err = redisstore.New(short, rule, redisstore.WithWaitReplicas(1, 99*time.Millisecond))
		assert.NoError(t, err)
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
		defer cc.Close()
		_, err = redisstore.New(cc, rule, redisstore.WithWaitReplicas(1, time.Second))
		assert.ErrorIs(t, err, admit.ErrUnsupported)
		waiting, err := redisstore.New(c, rule, redisstore.WithWaitReplicas(1, time.Second))
		require.NoError(t, err)
		_, err = redisstore.NewKeyedReserver(waiting, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second})
		assert.ErrorIs(t, err, admit.ErrUnsupported, "reservations are not waited on")
		for _, timeout := range []time.Duration{time.Second, 500 * time.Millisecond} {
			_, err = redisstore.NewKeyed(waiting, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: timeout})
			assert.ErrorIs(t, err, admit.ErrInvalidOption, "a Policy.Timeout of %v would end the call before WAIT's 1s", timeout)
			assert.ErrorContains(t, err, "WithWaitReplicas timeout")
		}
		_, err = redisstore.NewKeyed(waiting, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: 1100 * time.Millisecond})
		assert.NoError(t, err)
		assert.ErrorIs(t, redisstore.AllowBatch(ctx, []redisstore.Call{{Limiter: waiting, Key: "k", N: 1}}), admit.ErrUnsupported, "a batch is not waited on")
	})

	t.Run("replicas=0", func(t *testing.T) {
		srv := redistest.Start(t)
		c := newClient(t, srv)
		l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), redisstore.WithWaitReplicas(1, 10*time.Millisecond))
		require.NoError(t, err)
		for i := range rule.Limit {
			d, err := l.Allow(ctx, "k")
			require.ErrorIs(t, err, redisstore.ErrNotReplicated, "admission %d, no replica", i)
			assert.ErrorContains(t, err, "0 of the 1 replicas wanted")
			assert.Equal(t, admit.Decision{}, d)
		}
		d, err := l.AllowN(ctx, "k", 0)
		require.NoError(t, err, "a probe waits on nothing")
		assert.Equal(t, 0, d.Remaining, "the unreplicated admissions were charged on the primary")
		d, err = l.Allow(ctx, "k")
		require.NoError(t, err, "a denial waits on nothing")
		assert.False(t, d.Allowed)
		d, err = l.AllowN(ctx, "k", 3)
		require.NoError(t, err)
		assert.Equal(t, admit.Never, d.RetryAfter)

		var got []error
		k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second, OnError: func(_ string, err error) { got = append(got, err) }})
		require.NoError(t, err)
		assert.False(t, k.Allow("other").Allowed, "fail-closed denies what no replica acknowledged")
		require.Len(t, got, 1)
		assert.ErrorIs(t, got[0], redisstore.ErrNotReplicated)
	})

	t.Run("replicas=1", func(t *testing.T) {
		primary := redistest.Start(t, primaryArgs...)
		host, port, err := net.SplitHostPort(primary.Addr)
		require.NoError(t, err)
		replica := redistest.Start(t, "--replicaof", host, port)
		c, rc := newClient(t, primary), newClient(t, replica)
		awaitReplica(t, c, rc)
		l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), redisstore.WithWaitReplicas(1, 2*time.Second)) // under the client's ReadTimeout, 3 s
		require.NoError(t, err)
		for i := range 3 {
			if i == 1 {
				require.NoError(t, c.ScriptFlush(ctx).Err(), "the server loses the script")
			}
			d, err := l.Allow(ctx, "k")
			require.NoError(t, err, "call %d", i)
			assert.Equal(t, i < rule.Limit, d.Allowed, "call %d", i)
			onPrimary, err := c.Get(ctx, l.Key("k")).Result()
			require.NoError(t, err)
			onReplica, err := rc.Get(ctx, l.Key("k")).Result()
			require.NoError(t, err)
			assert.Equal(t, onPrimary, onReplica, "call %d: the replica holds what the primary acknowledged", i)
		}
	})
}

// TestWaitReplicasOnlyAdmissionsWait: while the replica is frozen (SIGSTOP)
// an admission cannot be acknowledged, and after one has failed with
// ErrNotReplicated a probe, a denial, a request that can never pass and a
// fresh client's probe are answered without a WAIT: they write nothing, so
// there is nothing to wait for, and a WAIT would hold them for its whole
// timeout behind the unacknowledged admission. The client's commands are
// counted by a hook, so nothing here depends on how long anything takes.
func TestWaitReplicasOnlyAdmissionsWait(t *testing.T) {
	ctx := context.Background()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Hour}
	fake := clock.NewFake()
	fake.Set(time.Hour)
	primary := redistest.Start(t, primaryArgs...)
	host, port, err := net.SplitHostPort(primary.Addr)
	require.NoError(t, err)
	replica := redistest.Start(t, "--replicaof", host, port)
	awaitReplica(t, newClient(t, primary), newClient(t, replica))
	replica.Freeze()

	hook := new(commandHook)
	c := newClient(t, primary)
	c.AddHook(hook)
	l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake), redisstore.WithWaitReplicas(1, waitTimeout))
	require.NoError(t, err)
	for i := range rule.Limit {
		d, err := l.Allow(ctx, "k")
		require.ErrorIs(t, err, redisstore.ErrNotReplicated, "admission %d, the replica frozen", i)
		assert.ErrorContains(t, err, "0 of the 1 replicas wanted")
		assert.Equal(t, admit.Decision{}, d)
	}
	assert.Equal(t, int64(rule.Limit), hook.count("wait"), "one WAIT per admission")

	waits := hook.count("wait")
	d, err := l.AllowN(ctx, "k", 0)
	require.NoError(t, err)
	assert.Equal(t, 0, d.Remaining, "the unacknowledged admissions were charged on the primary")
	assert.Equal(t, waits, hook.count("wait"), "a probe sends no WAIT")
	d, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, waits, hook.count("wait"), "a denial sends no WAIT")
	d, err = l.AllowN(ctx, "k", rule.Limit+1)
	require.NoError(t, err)
	assert.Equal(t, admit.Never, d.RetryAfter)
	assert.Equal(t, waits, hook.count("wait"), "a request that can never pass sends no WAIT")

	freshHook := new(commandHook)
	fresh := newClient(t, primary)
	fresh.AddHook(freshHook)
	fl, err := redisstore.New(fresh, rule, redisstore.WithTestClock(fake), redisstore.WithWaitReplicas(1, waitTimeout))
	require.NoError(t, err)
	d, err = fl.AllowN(ctx, "k", 0)
	require.NoError(t, err)
	assert.Equal(t, 0, d.Remaining)
	d, err = fl.Allow(ctx, "k")
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Zero(t, freshHook.count("wait"), "a fresh client's probe and denial send no WAIT")
	assert.Equal(t, int64(2), freshHook.count("evalsha"), "one script call each")

	k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Minute})
	require.NoError(t, err)
	assert.False(t, k.Allow("k").Allowed)
	assert.Equal(t, waits, hook.count("wait"), "Keyed's denial sends no WAIT")
}

// commandHook counts the commands a client sends, by name, alone or in a
// pipeline.
type commandHook struct {
	mu    sync.Mutex
	names map[string]int64
}

func (h *commandHook) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names == nil {
		h.names = map[string]int64{}
	}
	for _, cmd := range cmds {
		h.names[cmd.Name()]++
	}
}

func (h *commandHook) count(name string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.names[name]
}

func (h *commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}
func (h *commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

// BenchmarkWaitReplicas: the cost of WithWaitReplicas(1, 100ms) on a
// primary with one replica on loopback, against the same limiter without
// it; every call is admitted (server time, 1,000,000 per hour, 1,000 keys).
func BenchmarkWaitReplicas(b *testing.B) {
	primary := redistest.Start(b, primaryArgs...)
	host, port, err := net.SplitHostPort(primary.Addr)
	require.NoError(b, err)
	replica := redistest.Start(b, "--replicaof", host, port)
	c := newClient(b, primary)
	awaitReplica(b, c, newClient(b, replica))
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Hour}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	for _, bc := range []struct {
		name string
		opts []redisstore.Option
	}{
		{"replication=async", nil},
		{"replication=wait1", []redisstore.Option{redisstore.WithWaitReplicas(1, waitTimeout)}},
	} {
		l, err := redisstore.New(c, rule, append(bc.opts, freshPrefix("wait-bench"))...)
		require.NoError(b, err)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				d, err := l.Allow(ctx, keys[i%len(keys)])
				if err != nil || !d.Allowed {
					b.Fatalf("Allow = %+v, %v; want an admission", d, err)
				}
				i++
			}
		})
	}
}
