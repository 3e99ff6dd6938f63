package redisstore_test

import (
	"context"
	"net"
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

// startCluster starts a Redis Cluster of three masters, the 16384 slots split
// between them, and returns a cluster client of it.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	ctx := context.Background()
	const nodes = 3
	var addrs []string
	var admins []*redis.Client
	for i := range nodes {
		srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		addrs = append(addrs, srv.Addr)
		admin := newClient(t, srv)
		admins = append(admins, admin)
		require.NoError(t, admin.ClusterAddSlotsRange(ctx, i*16384/nodes, (i+1)*16384/nodes-1).Err())
	}
	for _, addr := range addrs[1:] {
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		require.NoError(t, admins[0].ClusterMeet(ctx, host, port).Err())
	}
	// The nodes learn of each other by gossip: wait until each says the
	// cluster is whole.
	redistest.Await(t, "the cluster forms", func() bool {
		for _, a := range admins {
			info, err := a.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
		}
		return true
	})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { require.NoError(t, cc.Close()) })
	return cc
}

// TestCluster runs the conformance suites, the composite differential and
// batches through a Redis Cluster client: each key's state, a composite's
// included, lives in the slot of its hash tag, the decisions are spread
// over every node, and they are the kernels'.
func TestCluster(t *testing.T) {
	cc := startCluster(t)
	ctx := context.Background()

	l, err := redisstore.New(cc, admit.Rule{Algorithm: admit.SlidingLog, Limit: 5, Window: time.Minute}, redisstore.WithPrefix("cluster:"), redisstore.WithTestClock(clock.NewFake()))
	require.NoError(t, err)
	limits, err := admit.ParseLimits("sliding-log,5,1m + token-bucket,10,1s + fixed-window,100,1h")
	require.NoError(t, err)
	composite, err := redisstore.NewLimits(cc, limits, redisstore.WithPrefix("cluster-composite:"), redisstore.WithTestClock(clock.NewFake()))
	require.NoError(t, err)
	for _, l := range []*redisstore.Limiter{l, composite} {
		for _, key := range []string{"alice", "bob", "carol", "dave", "a}b", "{x}"} {
			_, err := l.AllowN(ctx, key, 2) // a composite writes its sliding log's ring too
			require.NoError(t, err, "key %q", key)
			slot, err := cc.ClusterKeySlot(ctx, l.Key(key)).Result()
			require.NoError(t, err)
			// The tag is the text between the first '{', the limiter's own, and
			// the next '}': the key, up to any '}' of its own.
			tag, _, _ := strings.Cut(key, "}")
			want, err := cc.ClusterKeySlot(ctx, tag).Result()
			require.NoError(t, err)
			assert.Equal(t, want, slot, "%v: key %q is placed by its hash tag %q", l.Limits(), key, tag)
		}
	}

	t.Run("Conformance", func(t *testing.T) { runConformance(t, cc) })
	t.Run("CompositeConformance", func(t *testing.T) { runCompositeConformance(t, cc) })
	t.Run("Composite", func(t *testing.T) { runCompositeDifferential(t, cc) })
	t.Run("Reset", func(t *testing.T) {
		// A token bucket's Reset unlinks its hold with the state; a key with
		// an empty hash tag, whose hold would be in another slot, is reset
		// all the same.
		tb, err := redisstore.New(cc, admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Minute}, redisstore.WithPrefix("cluster-reset:"), redisstore.WithTestClock(clock.NewFake()))
		require.NoError(t, err)
		for _, key := range []string{"alice", "", "}x", "a}b"} {
			d, err := tb.AllowN(ctx, key, 2)
			require.NoError(t, err, "key %q", key)
			require.True(t, d.Allowed)
			require.NoError(t, tb.Reset(ctx, key), "Reset(%q)", key)
			n, err := cc.Exists(ctx, tb.Key(key)).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "Reset(%q) deleted the state", key)
			d, err = tb.AllowN(ctx, key, 2)
			require.NoError(t, err)
			assert.True(t, d.Allowed, "key %q: a fresh bucket", key)
		}
	})
	t.Run("Batch", func(t *testing.T) {
		hook := new(countingHook)
		cc.AddHook(hook)
		checkBatchIsSequential(t, cc, hook, 3)
	})

	// Every master holds some of the states. (ForEachMaster calls its
	// function on every master at once.)
	var (
		mu      sync.Mutex
		perNode []int64
	)
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		perNode = append(perNode, n)
		mu.Unlock()
		return err
	}))
	require.Len(t, perNode, 3)
	for i, n := range perNode {
		assert.Positive(t, n, "keys on master %d of %v", i, perNode)
	}
}
