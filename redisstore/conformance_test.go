package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/redisstore"
)

// newClient returns a client of srv that honours context deadlines, closed
// when the test ends.
func newClient(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// The deadlines of the tests' calls, chosen so that no test depends on how
// fast the machine is.
const (
	// upTimeout is the Policy.Timeout of a Keyed limiter whose calls must
	// come from Redis while the server runs: no loopback round trip comes
	// near it, however busy the machine, and a call to a server that was
	// stopped fails on its own (its connections refused) long before it.
	upTimeout = time.Minute
	// pausedTimeout is the Policy.Timeout (or the client's ReadTimeout) of
	// a test that also pauses or freezes the server, so that a call ends
	// only at its deadline: each such call costs the test that much real
	// time, so it is shorter, yet 40 times the 50 ms these tests once had.
	pausedTimeout = 2 * time.Second
)

var prefixSeq atomic.Int64

// freshPrefix returns a key prefix no other limiter of this test binary uses.
func freshPrefix(name string) redisstore.Option {
	return redisstore.WithPrefix(fmt.Sprintf("%s%d:", name, prefixSeq.Add(1)))
}

// TestConformance runs the suite every local variant passes against Keyed
// limiters on a real server, with the suite's fake clock passed as time.
// admit options are mapped as a factory would: WithClock becomes
// redisstore.WithClock, and policy.WithFactory and the keyed-store options,
// which have no meaning for a Redis store, are refused.
func TestConformance(t *testing.T) {
	runConformance(t, newClient(t, redistest.Start(t)))
}

func runConformance(t *testing.T, client redis.Scripter) {
	newKeyed := func(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		s, err := plumb.ResolveLimiter("redisstore", opts)
		if err != nil {
			return nil, err
		}
		if names := s.StoreOptions(); names != "" {
			return nil, fmt.Errorf("%w: %s: a Redis store keeps no keys in this process", admit.ErrUnsupported, names)
		}
		ropts := []redisstore.Option{freshPrefix("conformance")}
		if s.Clock != clock.System() {
			ropts = append(ropts, redisstore.WithTestClock(s.Clock))
		}
		l, err := redisstore.New(client, rule, ropts...)
		if err != nil {
			return nil, err
		}
		return redisstore.NewKeyed(l, redisstore.Policy{
			Mode:    redisstore.FailClosed,
			Timeout: time.Minute,
			OnError: func(key string, err error) { t.Errorf("key %q: %v", key, err) },
		})
	}
	conformance.Run(t, conformance.Variant{
		Name:     "redisstore",
		New:      newKeyed,
		Supports: func(admit.Algorithm) bool { return true },
		Remote:   true,
	})
}
