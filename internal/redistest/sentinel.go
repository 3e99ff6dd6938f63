package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelConfig is what a [Sentinel] monitors and how quickly it acts.
type SentinelConfig struct {
	// Name is the monitored primary's name, which clients ask the Sentinels
	// about (go-redis's FailoverOptions.MasterName).
	Name string
	// Primary is the monitored primary's host:port.
	Primary string
	// Quorum is how many Sentinels must agree that the primary is down
	// before one of them fails it over.
	Quorum int
	// DownAfter is how long the primary must fail to answer before a
	// Sentinel deems it down (down-after-milliseconds).
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout: among other things,
	// how long before a failed failover is tried again (twice that) and how
	// long a replica may take to follow a new primary.
	FailoverTimeout time.Duration
}

// Sentinel is one redis-sentinel process, started by [StartSentinel] on a
// free loopback port in its own temporary directory, stopped when the test
// ends.
type Sentinel struct {
	Addr string // host:port

	cmd  *exec.Cmd
	log  string // the process's output, for a failure's message
	done chan struct{}
}

// SentinelBinary returns the redis-sentinel binary's path, or skips (or,
// with ADMIT_REQUIRE_REDIS set, fails) t when there is none.
func SentinelBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-sentinel")
	if err == nil {
		return bin
	}
	msg := "redis-sentinel not found on PATH: install it (on Debian: apt-get install redis-sentinel) to run the failover tests"
	if os.Getenv("ADMIT_REQUIRE_REDIS") != "" {
		t.Fatal(msg + "; ADMIT_REQUIRE_REDIS is set, so they may not be skipped")
	}
	t.Skip(msg)
	return ""
}

// StartSentinel starts a Sentinel monitoring cfg.Primary, returns once it
// answers PING, and registers its stop with t.Cleanup. Sentinels started
// for the same primary find each other through it (within a few seconds:
// they announce themselves every 2 s); the caller waits for that, as it
// must for the primary's replicas to be known, before it relies on a
// failover.
func StartSentinel(t testing.TB, cfg SentinelConfig) *Sentinel {
	t.Helper()
	bin := SentinelBinary(t)
	host, port, err := net.SplitHostPort(cfg.Primary)
	if err != nil {
		t.Fatalf("redistest: primary address %q: %v", cfg.Primary, err)
	}
	dir := t.TempDir()
	own := freePort(t)
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %s
sentinel monitor %s %s %s %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, own, dir, cfg.Name, host, port, cfg.Quorum,
		cfg.Name, cfg.DownAfter.Milliseconds(), cfg.Name, cfg.FailoverTimeout.Milliseconds(), cfg.Name)
	path := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: it must be writable
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	logPath := filepath.Join(dir, "sentinel.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Sentinel{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(own)), log: logPath, done: make(chan struct{})}
	s.cmd = exec.Command(bin, path)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("redistest: starting %s: %v", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(s.stop)
	Await(t, "redis-sentinel on "+s.Addr+" answering", func() bool {
		select {
		case <-s.done:
			t.Fatalf("redistest: redis-sentinel on %s exited before it answered:\n%s", s.Addr, s.Log())
		default:
		}
		return ping(s.Addr)
	})
	return s
}

// Log returns what the Sentinel has logged so far: its view of the
// failover (+sdown, +odown, +switch-master, …), for a failure's message.
func (s *Sentinel) Log() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func (s *Sentinel) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// ping reports whether a Redis server or Sentinel at addr answers PING.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}
