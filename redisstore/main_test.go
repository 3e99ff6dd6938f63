package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// client's, a timeout's or a test server's. It also keeps go-redis's log
// out of the test output (see quietLog).
func TestMain(m *testing.M) {
	log := new(quietLog)
	redis.SetLogger(log)
	goleak.VerifyTestMain(withLogCount{m, log})
}

// quietLog is go-redis's logger in these tests. Its clients log every dial
// that fails and every primary a Sentinel names, which the tests cause on
// purpose (servers stopped, killed, paused, failed over), hundreds of lines
// of a run; a test's failure says what went wrong without them. They are
// counted, and the count shown with -v.
type quietLog struct{ lines atomic.Int64 }

func (l *quietLog) Printf(context.Context, string, ...any) { l.lines.Add(1) }

// withLogCount runs the tests, then says with -v how many lines go-redis
// logged.
type withLogCount struct {
	m   *testing.M
	log *quietLog
}

func (w withLogCount) Run() int {
	code := w.m.Run()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "go-redis logged %d lines, not shown\n", w.log.lines.Load())
	}
	return code
}
