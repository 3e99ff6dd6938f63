package redisstore_test

import (
	"bufio"
	"context"
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

// hammer runs goroutines, each with its own client (its own connection) to
// addr and its own limiter built by newLim, asking for weights 1 to 3 far
// beyond the limit, and returns the weight admitted in all.
// Each client pings before the start, and ready, if not nil, is called once
// all are connected.
func hammer(t testing.TB, addr string, goroutines int, newLim func(redis.Scripter) (*redisstore.Limiter, error), ready func()) int {
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
			got := hammer(t, srv.Addr, 8, func(c redis.Scripter) (*redisstore.Limiter, error) {
				return redisstore.New(c, frozenRule, redisstore.WithClock(fake), frozen)
			}, nil)
			assert.Equal(t, limit, got, "fake clock, 8 connections")
			server := freshPrefix("server")
			got = hammer(t, srv.Addr, 8, func(c redis.Scripter) (*redisstore.Limiter, error) {
				return redisstore.New(c, rule, server)
			}, nil)
			assert.Equal(t, limit, got, "server time, 8 connections")
		})
	}
}

// TestSharedBudgetTwoProcesses: two processes, each with four connections,
// share one limit through the server's time. Both connect, say so, and start
// together when told.
func TestSharedBudgetTwoProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const limit = 300
	for _, alg := range algorithms {
		t.Run("algo="+alg.String(), func(t *testing.T) {
			prefix := fmt.Sprintf("procs-%s:", alg)
			type proc struct {
				cmd   *exec.Cmd
				go_   io.WriteCloser
				lines *bufio.Scanner
			}
			var procs []proc
			for range 2 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), "ADMIT_REDIS_HELPER="+strings.Join([]string{srv.Addr, prefix, alg.String(), strconv.Itoa(limit)}, ","))
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

// TestHelperProcess is one of TestSharedBudgetTwoProcesses's processes; it
// does nothing when run as a test.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv("ADMIT_REDIS_HELPER")
	if spec == "" {
		t.Skip("run by TestSharedBudgetTwoProcesses")
	}
	parts := strings.Split(spec, ",")
	require.Len(t, parts, 4)
	alg, err := admit.ParseAlgorithm(parts[2])
	require.NoError(t, err)
	limit, err := strconv.Atoi(parts[3])
	require.NoError(t, err)
	rule := admit.Rule{Algorithm: alg, Limit: limit, Window: 24 * time.Hour}
	got := hammer(t, parts[0], 4, func(c redis.Scripter) (*redisstore.Limiter, error) {
		return redisstore.New(c, rule, redisstore.WithPrefix(parts[1]))
	}, func() {
		fmt.Println("ready")
		_, err := bufio.NewReader(os.Stdin).ReadString('\n')
		require.NoError(t, err)
	})
	fmt.Printf("admitted=%d\n", got)
}
