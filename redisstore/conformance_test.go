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
			ropts = append(ropts, redisstore.WithClock(s.Clock))
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
