package redistest

import (
	"testing"
	"time"
)

// Await calls cond every few milliseconds until it returns true: for a test
// that waits on another process (a server that starts, a replica that
// syncs, a failover, goroutines that make progress), however slowly a busy
// machine lets it. It sets no deadline of its own: if the test binary has
// one (go test's -timeout, 10 minutes unless set), Await fails t, naming
// what it waited for, when less than a twentieth of the time to it (at
// most 30 s) is left, so that the failure is reported before the binary
// is stopped; without one it waits as long as cond takes.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	stop, bounded := awaitStop(t)
	for !cond() {
		if bounded && time.Now().After(stop) {
			t.Fatalf("redistest: still waiting, close to the test binary's deadline: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling another process or goroutine, not ordering events
	}
}

// awaitStop returns when Await gives up: shortly before t's deadline, if
// it has one.
func awaitStop(t testing.TB) (time.Time, bool) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	deadline, ok := d.Deadline()
	if !ok {
		return time.Time{}, false
	}
	margin := min(time.Until(deadline)/20, 30*time.Second)
	return deadline.Add(-margin), true
}
