package conformance

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/keyed"
)

// runKeys runs the checks of a bounded store's key count and of the
// full-store denial: that every store gives the same RetryAfter for the same
// calls, that a waiter let through after a full-store refusal was charged,
// and that the key count behind admit.WithMaxKeys stays exact.
func runKeys(t *testing.T, v Variant, alg admit.Algorithm) {
	runChecks(t, v, alg, testFullStoreRetryAfter, testWaitKeyFullStore, testKeyCount)
}

// testFullStoreRetryAfter checks the RetryAfter of a new key denied by a full
// store against the rule of docs/keyed-stores.md, computed from the kernel
// oracle: the time until the soonest stored key becomes evictable, plus the
// slack, when the store has at most keyed.FullShards shards and
// keyed.FullScan keys (the denial examines every key), and the rule's
// horizon plus the slack otherwise. The answer must not depend on where keys
// landed, which depends on each store's random hash seed: several stores of
// each shape, each with its own seed, are driven by the same calls and must
// all give it. Every store held to the oracle's answer, the three agree.
func testFullStoreRetryAfter(t *testing.T, v Variant, alg admit.Algorithm) {
	rule := admit.Rule{Algorithm: alg, Limit: 3, Window: time.Hour}
	for _, tc := range []struct {
		shards  int // 0 for the default, at least 16
		maxKeys int
		exact   bool
	}{
		{shards: 1, maxKeys: 1, exact: true},
		{shards: 1, maxKeys: 2, exact: true},
		{shards: 8, maxKeys: 2, exact: true},
		{shards: 4, maxKeys: keyed.FullScan, exact: true},
		{shards: 16, maxKeys: 2},
		{shards: 0, maxKeys: 2},
		{shards: 1, maxKeys: keyed.FullScan + 1},
	} {
		name := "shards=default"
		if tc.shards > 0 {
			name = "shards=" + strconv.Itoa(tc.shards)
		}
		name += "/maxKeys=" + strconv.Itoa(tc.maxKeys)
		t.Run(name, func(t *testing.T) {
			// The history: key i takes n_i of the limit at t0 + i×step,
			// so that the keys become evictable at different times, and
			// a new key arrives while all of them are busy.
			const step = 7 * time.Second
			t0 := time.Hour
			oracle := NewOracle(rule)
			for i := range tc.maxKeys {
				oracle.Allow("k"+strconv.Itoa(i), t0+time.Duration(i)*step, 1+i%rule.Limit)
			}
			now := t0 + time.Duration(tc.maxKeys)*step
			want := horizon(rule)
			if tc.exact {
				for i := range tc.maxKeys {
					want = min(want, oracle.Allow("k"+strconv.Itoa(i), now, 0).ResetAfter)
				}
			}
			want += keyed.Slack

			for range 8 { // a fresh hash seed each time
				fake := clock.NewFake()
				opts := []admit.Option{admit.WithClock(fake), admit.WithMaxKeys(tc.maxKeys)}
				if tc.shards > 0 {
					opts = append(opts, admit.WithShards(tc.shards))
				}
				lim, err := v.New(rule, opts...)
				require.NoError(t, err)
				for i := range tc.maxKeys {
					fake.Set(t0 + time.Duration(i)*step)
					require.True(t, lim.AllowN("k"+strconv.Itoa(i), 1+i%rule.Limit).Allowed, "%v: key %d of %d", rule, i, tc.maxKeys)
				}
				fake.Set(now)
				d := lim.Allow("new")
				require.Equal(t, admit.Decision{Limit: rule.Limit, RetryAfter: want}, d,
					"%v, %s: a new key denied by a full store of busy keys; want RetryAfter %v (exact: %v)", rule, name, want, tc.exact)
			}
		})
	}
}

// fakeWaits is a keyed reserver whose full-store refusals are waited out on
// a fake clock: it moves the clock by each refusal's Delay, the wait the
// store asked for, and hands the waiter a Delay of 1ns instead, so that the
// waiter's real sleep orders nothing and takes no time.
type fakeWaits struct {
	keyedReserver
	clock   *clock.Fake
	refused int
}

func (f *fakeWaits) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	r, ok := f.keyedReserver.ReserveN(key, n, maxWait)
	if !ok && r.Delay > 0 && r.Delay < maxWait {
		f.refused++
		f.clock.Advance(r.Delay)
		return admit.Reservation{Delay: time.Nanosecond}, false
	}
	return r, ok
}

// testWaitKeyFullStore: admit.WaitKey on a new key refused by a full store
// sleeps until room may appear and asks again; when it returns nil, the key
// must have been charged. A waiter let through without its reservation would
// pass uncharged.
func testWaitKeyFullStore(t *testing.T, v Variant, alg admit.Algorithm) {
	if alg != admit.TokenBucket {
		t.Skip("only token buckets reserve")
	}
	rule := mustRule(t, "token-bucket,2,2s")
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(1), admit.WithShards(1))
	require.NoError(t, err)
	kr, ok := lim.(keyedReserver)
	if !ok {
		t.Skip("no ReserveN")
	}
	require.True(t, lim.Allow("a").Allowed)
	waits := &fakeWaits{keyedReserver: kr, clock: fake}
	require.NoError(t, admit.WaitKey(context.Background(), waits, "b"))
	require.Equal(t, 1, waits.refused, "the first reservation of b meets a full store and waits for a to become idle")
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: time.Second}, lim.AllowN("b", 0),
		"b after WaitKey returned nil: one token taken")
	assert.Equal(t, 1, lim.(storeLimiter).Len(), "a made room for b")
}

// testKeyCount checks the key count behind admit.WithMaxKeys, which each
// insertion and each eviction keeps: whenever a bounded store holds fewer
// keys than its bound, a new key must be admitted. The insertions' own
// sweeps evict keys too, and two calls racing to create one key must count
// it once.
func testKeyCount(t *testing.T, v Variant, alg admit.Algorithm) {
	rule := admit.Rule{Algorithm: alg, Limit: 2, Window: time.Second}
	t.Run("InsertionSweep", func(t *testing.T) {
		const maxKeys = 100
		fake := clock.NewFake()
		fake.Set(time.Hour)
		lim, err := v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(maxKeys), admit.WithShards(1))
		require.NoError(t, err)
		store := lim.(storeLimiter)
		for i := range keyed.SweepMinLen {
			require.True(t, lim.Allow("old-"+strconv.Itoa(i)).Allowed)
		}
		fake.Advance(horizon(rule) + keyed.Slack) // every old key is evictable
		require.True(t, lim.Allow("new-0").Allowed)
		// The insertion sweeps up to SweepBatch idle keys: the lock-free
		// table examines a bounded run of slots, which may hold fewer.
		evicted := keyed.SweepMinLen + 1 - store.Len()
		require.True(t, evicted >= 1 && evicted <= keyed.SweepBatch,
			"%v: the insertion into a shard of %d idle keys evicted %d; want 1 to %d", rule, keyed.SweepMinLen, evicted, keyed.SweepBatch)
		require.Equal(t, keyed.SweepMinLen-evicted, store.Sweep(), "%v: the other old keys", rule)
		// Only busy keys from here on: a new key is admitted exactly while
		// the store holds fewer than maxKeys, so the count must be exact.
		for i := 1; store.Len() < maxKeys; i++ {
			n := store.Len()
			require.True(t, lim.Allow("new-"+strconv.Itoa(i)).Allowed, "%v: a new key in a store of %d keys, bound %d", rule, n, maxKeys)
			require.Equal(t, n+1, store.Len())
		}
		assert.False(t, lim.Allow("one-too-many").Allowed, "%v: a store of %d busy keys is full", rule, maxKeys)
	})
	t.Run("RacingCreation", func(t *testing.T) {
		for round := range 50 {
			fake := clock.NewFake()
			fake.Set(time.Hour)
			lim, err := v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(2), admit.WithShards(1))
			require.NoError(t, err)
			start := make(chan struct{})
			results := make(chan admit.Decision, 2)
			for range 2 {
				go func() {
					<-start
					results <- lim.Allow("k")
				}()
			}
			close(start)
			for range 2 {
				require.True(t, (<-results).Allowed, "%v, round %d: two calls on a new key of limit 2", rule, round)
			}
			require.Equal(t, 1, lim.(storeLimiter).Len(), "%v, round %d: two calls created one key", rule, round)
			require.True(t, lim.Allow("other").Allowed, "%v, round %d: one key stored of 2, a new key must pass", rule, round)
			require.False(t, lim.Allow("third").Allowed, "%v, round %d: two busy keys fill the store", rule, round)
		}
	})
}
