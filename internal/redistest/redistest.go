// Package redistest starts throwaway redis-server processes for tests: each
// on a free loopback port, in its own temporary directory, with persistence
// off, stopped when the test ends.
//
// When no redis-server binary is found the test is skipped with a message
// saying how to install one, unless the environment variable
// ADMIT_REQUIRE_REDIS is set (CI sets it), in which case it fails.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is one redis-server process, which may be stopped and started again
// on the same port.
type Server struct {
	Addr string // host:port

	t    testing.TB
	bin  string
	dir  string
	port int
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Binary returns the redis-server binary's path, or skips (or, with
// ADMIT_REQUIRE_REDIS set, fails) t when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin
	}
	msg := "redis-server not found on PATH: install it (on Debian: apt-get install redis-server) to run the Redis tests"
	if os.Getenv("ADMIT_REQUIRE_REDIS") != "" {
		t.Fatal(msg + "; ADMIT_REQUIRE_REDIS is set, so they may not be skipped")
	}
	t.Skip(msg)
	return ""
}

// Start starts a server with the given extra redis-server arguments and
// registers its stop with t.Cleanup.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), port: freePort(t), args: args}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts the server (again) and returns once it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatalf("redistest: server on %s already running", s.Addr)
	}
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "notice",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting %s: %v", s.bin, err)
	}
	// The server says when it is ready: read its log until it does.
	ready := make(chan error, 1)
	var logged strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			logged.WriteString(line + "\n")
			if strings.Contains(line, "Ready to accept connections") {
				ready <- nil
				_, _ = io.Copy(io.Discard, out) // keep the pipe drained until exit
				return
			}
		}
		ready <- fmt.Errorf("exited before it was ready:\n%s", logged.String())
	}()
	// No deadline of its own: a busy machine may take long to start it.
	// Only the test binary's deadline ends the wait (see Await).
	var giveUp <-chan time.Time
	if stop, bounded := awaitStop(s.t); bounded {
		timer := time.NewTimer(time.Until(stop))
		defer timer.Stop()
		giveUp = timer.C
	}
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Wait()
			s.t.Fatalf("redistest: redis-server on %s %v", s.Addr, err)
		}
	case <-giveUp:
		_ = cmd.Process.Kill()
		err := <-ready // the log ends with the process
		_ = cmd.Wait()
		s.t.Fatalf("redistest: redis-server on %s not ready close to the test binary's deadline, %v", s.Addr, err)
	}
	s.cmd = cmd
}

// Stop kills the server, if it runs, and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
