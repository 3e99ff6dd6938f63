//go:build unix

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/redisstore"
)

// TestCircuitUnderLoad kills the server under 8 goroutines' calls and starts
// it again, with the circuit's clock in the test's hands: only the calls on
// their way when the server died wait for it (at most one per goroutine), the
// rest are decided at once; each backoff lets exactly one probe through;
// after the restart a probe finds the server and decisions come from Redis
// again, with no call refused or failed after that.
func TestCircuitUnderLoad(t *testing.T) {
	const goroutines = 8
	srv := redistest.Start(t)
	c := newClient(t, srv)
	hook := new(askHook)
	c.AddHook(hook)
	// Server time: a decision from Redis has Remaining > 0, a fail-open one 0.
	l, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Hour}, freshPrefix("load"))
	require.NoError(t, err)
	var fromRedis, refused, failed atomic.Int64
	var refusedBy [goroutines]atomic.Int64 // by goroutine, whose key is its number
	onError := func(key string, err error) {
		if errors.Is(err, redisstore.ErrCircuitOpen) {
			refused.Add(1)
			g, _ := strconv.Atoi(key)
			refusedBy[g].Add(1)
		} else {
			failed.Add(1)
		}
	}
	breakerClock := clock.NewFake()
	const backoff = time.Second
	k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: upTimeout, Backoff: backoff, Clock: breakerClock, OnError: onError})
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			key := strconv.Itoa(g)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if k.Allow(key).Remaining > 0 {
					fromRedis.Add(1)
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// grows waits, by polling, until counter has grown by at least by.
	grows := func(what string, counter *atomic.Int64, by int64) {
		t.Helper()
		from := counter.Load()
		redistest.Await(t, what, func() bool { return counter.Load() >= from+by })
	}

	// allRefused waits until every goroutine has had a call refused: each
	// call it had on its way before has returned.
	allRefused := func() {
		t.Helper()
		var from [goroutines]int64
		for g := range from {
			from[g] = refusedBy[g].Load()
		}
		redistest.Await(t, "every goroutine refused", func() bool {
			for g := range from {
				if refusedBy[g].Load() == from[g] {
					return false
				}
			}
			return true
		})
	}

	grows("decisions from Redis", &fromRedis, 100)
	srv.Stop()
	allRefused()
	waited := failed.Load()
	t.Logf("server killed: %d calls went to it and failed, the rest were decided at once", waited)
	assert.Positive(t, waited)
	assert.LessOrEqual(t, waited, int64(goroutines), "only calls on their way when it failed wait for the server")

	for i := range int64(3) {
		breakerClock.Advance(backoff)
		grows("a probe", &failed, 1)
		allRefused()
		assert.Equal(t, waited+i+1, failed.Load(), "one probe per backoff")
	}

	srv.Start()
	probes := 0
	for {
		// Each backoff lets one probe through: it fails, or it closes the
		// circuit and decisions come from Redis again.
		f, r := failed.Load(), fromRedis.Load()
		breakerClock.Advance(backoff)
		probes++
		redistest.Await(t, fmt.Sprintf("probe %d", probes), func() bool { return failed.Load() > f || fromRedis.Load() > r })
		if failed.Load() == f {
			break
		}
	}
	t.Logf("server restarted: decisions from Redis again after %d probe(s)", probes)
	grows("decisions from Redis", &fromRedis, 1000)
	r, f := refused.Load(), failed.Load()
	grows("decisions from Redis", &fromRedis, 1000)
	assert.Equal(t, r, refused.Load(), "no call decided without Redis once it is back")
	assert.Equal(t, f, failed.Load(), "no call failed once it is back")
}

// TestOutageCost measures, on real time, what each call costs while the
// server is killed, paused (CLIENT PAUSE WRITE) or frozen (SIGSTOP), with a
// 50 ms timeout: for a bare AllowN under a 50 ms deadline, every call, and for
// Keyed with the default Backoff, only the first failure and one probe per
// Backoff; then how long after the server's return decisions come from Redis
// again. docs/redis.md quotes its log:
//
//	cd redisstore && go test -race -count=1 -run '^TestOutageCost$' -v .
//
// It checks counts only: Keyed asked Redis at most once per Backoff, plus the
// call that found it down. No deadline decides whether it passes: the calls
// before the outage have none, and after it the test waits for a decision
// from Redis however long it takes.
func TestOutageCost(t *testing.T) {
	const (
		timeout = 50 * time.Millisecond
		outage  = time.Second
	)
	type outageKind struct {
		name          string
		begin, finish func(srv *redistest.Server, admin func(...any))
	}
	kinds := []outageKind{
		{"killed", func(srv *redistest.Server, _ func(...any)) { srv.Stop() }, func(srv *redistest.Server, _ func(...any)) { srv.Start() }},
		{"paused", func(_ *redistest.Server, admin func(...any)) { admin("CLIENT", "PAUSE", "600000", "WRITE") }, func(_ *redistest.Server, admin func(...any)) { admin("CLIENT", "UNPAUSE") }},
		{"frozen", func(srv *redistest.Server, _ func(...any)) { srv.Freeze() }, func(srv *redistest.Server, _ func(...any)) { srv.Thaw() }},
	}
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Hour}
	for _, kind := range kinds {
		for _, caller := range []string{"AllowN", "Keyed"} {
			t.Run(kind.name+"/"+caller, func(t *testing.T) {
				srv := redistest.Start(t)
				c := newClient(t, srv)
				hook := new(askHook)
				c.AddHook(hook)
				adminClient := newClient(t, srv)
				admin := func(args ...any) { require.NoError(t, adminClient.Do(context.Background(), args...).Err()) }
				l, err := redisstore.New(c, rule)
				require.NoError(t, err)
				var failures atomic.Int64
				k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailOpen, Timeout: timeout, OnError: func(string, error) { failures.Add(1) }})
				require.NoError(t, err)
				// call reports whether the decision came from Redis.
				call := func() bool {
					if caller == "Keyed" {
						before := failures.Load()
						k.Allow("k")
						return failures.Load() == before
					}
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					defer cancel()
					_, err := l.Allow(ctx, "k")
					return err == nil
				}
				// Up: ten decisions from Redis, through the Limiter and
				// with no deadline, which on a busy machine a call may
				// need; Keyed's circuit has seen nothing yet.
				for range 10 {
					_, err := l.Allow(context.Background(), "k")
					require.NoError(t, err, "up")
				}

				kind.begin(srv, admin)
				asked := hook.asked.Load()
				var took []time.Duration
				start := time.Now()
				for time.Since(start) < outage {
					t0 := time.Now()
					call()
					took = append(took, time.Since(t0))
				}
				elapsed := time.Since(start)
				asked = hook.asked.Load() - asked
				waited := 0
				for _, d := range took {
					if d >= timeout*9/10 {
						waited++
					}
				}
				slices.Sort(took)

				kind.finish(srv, admin)
				back := time.Now()
				calls := 1
				for !call() {
					calls++
				}
				t.Logf("%s, %s: %d calls in %v: %d asked Redis, %d took 45 ms or more; median %v, max %v; from Redis again %v after its return (%d calls)",
					kind.name, caller, len(took), elapsed.Round(time.Millisecond), asked, waited,
					took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond), time.Since(back).Round(time.Millisecond), calls)
				if caller == "Keyed" {
					assert.LessOrEqual(t, asked, 2+int64(elapsed/redisstore.DefaultBackoff), "the call that found Redis down, then one probe per Backoff")
				}
			})
		}
	}
}
