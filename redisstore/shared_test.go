package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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

// allower is what hammer drives: a *redisstore.Limiter, or the broken
// limiter that proves hammer can catch over-admission.
type allower interface {
	AllowN(ctx context.Context, key string, n int) (admit.Decision, error)
}

// hammer runs goroutines, each with its own client (its own connection) to
// addr and its own limiter built by newLim, asking for weights 1 to 3 far
// beyond the limit, and returns the weight admitted in all.
// Each client pings before the start, and ready, if not nil, is called once
// all are connected.
func hammer[L allower](t testing.TB, addr string, goroutines int, newLim func(*redis.Client) (L, error), ready func()) int {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		start = make(chan struct{})
	)
	for g := range goroutines {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, ContextTimeoutEnabled: true})
		defer c.Close()
		require.NoError(t, c.Ping(context.Background()).Err())
		lim, err := newLim(c)
		require.NoError(t, err)
		wg.Go(func() {
			<-start
			admitted := 0
			for i := range 150 {
				n := 1 + (g+i)%3
				d, err := lim.AllowN(context.Background(), "shared", n)
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				if d.Allowed {
					admitted += n
				}
			}
			mu.Lock()
			total += admitted
			mu.Unlock()
		})
	}
	if ready != nil {
		ready()
	}
	close(start)
	wg.Wait()
	return total
}

// TestSharedBudget: clients on separate connections share one limit: with
// time frozen (a fake clock) or too short to refill anything (server time,
// windows of a day), exactly Limit is admitted between them.
func TestSharedBudget(t *testing.T) {
	srv := redistest.Start(t)
	const limit = 200
	for _, alg := range algorithms {
		rule := admit.Rule{Algorithm: alg, Limit: limit, Window: 24 * time.Hour}
		t.Run("algo="+alg.String(), func(t *testing.T) {
			fake := clock.NewFake()
			fake.Set(time.Hour)
			frozenRule := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Hour} // nanoseconds: a day is beyond 2^52 / 200
			frozen := freshPrefix("frozen")
			got := hammer(t, srv.Addr, 8, func(c *redis.Client) (*redisstore.Limiter, error) {
				return redisstore.New(c, frozenRule, redisstore.WithTestClock(fake), frozen)
			}, nil)
			assert.Equal(t, limit, got, "fake clock, 8 connections")
			server := freshPrefix("server")
			got = hammer(t, srv.Addr, 8, func(c *redis.Client) (*redisstore.Limiter, error) {
				return redisstore.New(c, rule, server)
			}, nil)
			assert.Equal(t, limit, got, "server time, 8 connections")
		})
	}
}

// racyWindow is a deliberately broken fixed window: it reads the count and
// writes it back in two round trips, as limiters without a script must, so
// clients that read the same count both pass.
type racyWindow struct {
	c     *redis.Client
	limit int
	key   string
}

func (r racyWindow) AllowN(ctx context.Context, _ string, n int) (admit.Decision, error) {
	count, err := r.c.Get(ctx, r.key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return admit.Decision{}, err
	}
	if count+n > r.limit {
		return admit.Decision{Limit: r.limit, RetryAfter: time.Hour}, nil
	}
	return admit.Decision{Allowed: true, Limit: r.limit}, r.c.Set(ctx, r.key, count+n, 0).Err()
}

// TestSharedBudgetCatchesRacyLimiter: the workload of TestSharedBudget is
// concurrent enough to catch a limiter that is not atomic across clients.
func TestSharedBudgetCatchesRacyLimiter(t *testing.T) {
	srv := redistest.Start(t)
	const limit, trials = 200, 5
	for trial := range trials {
		got := hammer(t, srv.Addr, 8, func(c *redis.Client) (racyWindow, error) {
			return racyWindow{c, limit, "racy-" + strconv.Itoa(trial)}, nil
		}, nil)
		if got > limit {
			t.Logf("trial %d: the racy limiter admitted %d of a limit of %d: caught", trial, got, limit)
			return
		}
	}
	t.Fatalf("the racy limiter was never caught over-admitting in %d trials", trials)
}

// TestSharedBudgetTwoProcesses: two processes, each with four connections,
// share one limit, on server time (a window of a day) or on fake clocks
// frozen at the same reading. Both connect, say so, and start together when
// told.
func TestSharedBudgetTwoProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const limit = 300
	for _, alg := range algorithms {
		for _, timing := range []string{"server", "frozen"} {
			t.Run("algo="+alg.String()+"/time="+timing, func(t *testing.T) {
				prefix := fmt.Sprintf("procs-%s-%s:", alg, timing)
				type proc struct {
					cmd   *exec.Cmd
					go_   io.WriteCloser
					lines *bufio.Scanner
				}
				var procs []proc
				for range 2 {
					cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
					cmd.Env = append(os.Environ(), "ADMIT_REDIS_HELPER="+strings.Join([]string{srv.Addr, prefix, alg.String(), strconv.Itoa(limit), timing}, ","))
					cmd.Stderr = os.Stderr
					stdin, err := cmd.StdinPipe()
					require.NoError(t, err)
					stdout, err := cmd.StdoutPipe()
					require.NoError(t, err)
					require.NoError(t, cmd.Start())
					procs = append(procs, proc{cmd, stdin, bufio.NewScanner(stdout)})
				}
				// readLine returns the process's next line that starts with prefix.
				readLine := func(p proc, prefix string) string {
					for p.lines.Scan() {
						if line := p.lines.Text(); strings.HasPrefix(line, prefix) {
							return strings.TrimPrefix(line, prefix)
						}
					}
					t.Fatalf("a helper process ended before printing %q", prefix)
					return ""
				}
				for _, p := range procs {
					readLine(p, "ready")
				}
				for _, p := range procs {
					_, err := io.WriteString(p.go_, "go\n")
					require.NoError(t, err)
				}
				total := 0
				for i, p := range procs {
					n, err := strconv.Atoi(readLine(p, "admitted="))
					require.NoError(t, err)
					for p.lines.Scan() { // drain, so that Wait may close the pipe
					}
					require.NoError(t, p.cmd.Wait(), "process %d", i)
					total += n
				}
				assert.Equal(t, limit, total, "admitted by two processes")
			})
		}
	}
}

// TestHelperProcess is one of TestSharedBudgetTwoProcesses's processes; it
// does nothing when run as a test.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv("ADMIT_REDIS_HELPER")
	if spec == "" {
		t.Skip("run by TestSharedBudgetTwoProcesses")
	}
	parts := strings.Split(spec, ",")
	require.Len(t, parts, 5)
	alg, err := admit.ParseAlgorithm(parts[2])
	require.NoError(t, err)
	limit, err := strconv.Atoi(parts[3])
	require.NoError(t, err)
	rule := admit.Rule{Algorithm: alg, Limit: limit, Window: 24 * time.Hour}
	opts := []redisstore.Option{redisstore.WithPrefix(parts[1])}
	if parts[4] == "frozen" {
		// Both processes read the same frozen instant; nanoseconds need a
		// window under 2^52 / limit.
		fake := clock.NewFake()
		fake.Set(time.Hour)
		rule.Window = time.Hour
		opts = append(opts, redisstore.WithTestClock(fake))
	}
	got := hammer(t, parts[0], 4, func(c *redis.Client) (*redisstore.Limiter, error) {
		return redisstore.New(c, rule, opts...)
	}, func() {
		fmt.Println("ready")
		_, err := bufio.NewReader(os.Stdin).ReadString('\n')
		require.NoError(t, err)
	})
	fmt.Printf("admitted=%d\n", got)
}
