package conformance

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// testChurn checks that incremental eviction alone, with no Sweep, keeps a
// store under churn near the number of keys in use: every millisecond of the
// clock ten new keys arrive and are used once, so about (horizon + slack) ×
// 10/ms keys are busy at any time; without eviction the store would hold
// every key it ever saw.
func testChurn(t *testing.T, v Variant, alg admit.Algorithm) {
	const (
		perStep = 10
		step    = time.Millisecond
		shards  = 4
	)
	steps := 5000
	if raceEnabled || testing.Short() {
		steps = 1500
	}
	rule := admit.Rule{Algorithm: alg, Limit: 10, Window: 200 * time.Millisecond}
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := v.New(rule, admit.WithClock(fake), admit.WithShards(shards))
	require.NoError(t, err)
	store := lim.(storeLimiter)
	var kb keyBuf
	busy := int((horizon(rule)+time.Second/10)/step+1) * perStep // idle after horizon, evictable after the slack (100ms)
	peak := 0
	for i := range steps {
		fake.Advance(step)
		for j := range perStep {
			require.True(t, lim.Allow(kb.key("churn-", i*perStep+j)).Allowed)
		}
		peak = max(peak, store.Len())
	}
	bound := 2*busy + 64*shards
	t.Logf("%v: %d keys seen, about %d busy at a time, at most %d stored (bound %d)", rule, steps*perStep, busy, peak, bound)
	assert.LessOrEqual(t, peak, bound, "%v: keys stored under churn", rule)
}

// heapInUse returns the bytes of live heap objects after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memoryKeys is the number of keys a memory check stores: full, or fewer
// under the race detector (race) and -short (short).
func memoryKeys(full, race, short int) int {
	switch {
	case raceEnabled:
		return race
	case testing.Short():
		return short
	}
	return full
}

// memoryLimiter returns v's limiter of rule on a fake clock set to an hour,
// the clock, and the heap in use before the limiter was built.
func memoryLimiter(t *testing.T, v Variant, rule admit.Rule) (admit.KeyedLimiter, *clock.Fake, int64) {
	t.Helper()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	base := heapInUse()
	lim, err := v.New(rule, admit.WithClock(fake))
	require.NoError(t, err)
	return lim, fake, base
}

// testMemoryReturns stores many keys, lets them all go idle, sweeps, and
// checks that the store is empty and most of its heap is back (a Go map
// keeps its buckets after deletions, so a store must rebuild its maps).
func testMemoryReturns(t *testing.T, v Variant, alg admit.Algorithm) {
	n := memoryKeys(200_000, 10_000, 50_000)
	rule := admit.Rule{Algorithm: alg, Limit: 10, Window: time.Second}
	lim, fake, base := memoryLimiter(t, v, rule)
	store := lim.(storeLimiter)
	var kb keyBuf
	for i := range n {
		if !lim.Allow(kb.key("user-", i)).Allowed {
			t.Fatalf("%v: new key %d denied", rule, i)
		}
	}
	full := heapInUse() - base
	require.Equal(t, n, store.Len())

	fake.Advance(horizon(rule) + time.Second)
	assert.Equal(t, n, store.Sweep(), "%v: every key is idle", rule)
	assert.Zero(t, store.Len())
	swept := heapInUse() - base
	t.Logf("%v: heap %.1f MiB with %d keys, %.2f MiB after the sweep", rule, float64(full)/(1<<20), n, float64(swept)/(1<<20))
	assert.LessOrEqual(t, swept, full/4, "%v: heap after evicting all %d keys, of %d bytes with them", rule, n, full)
	runtime.KeepAlive(lim)
}

// testHeldMemoryReturns is testMemoryReturns for keys that a reservation
// held: each key spends its bucket and then reserves a token due an hour
// later, so that the store keeps a hold beside its state; once the hour has
// passed and a sweep has evicted every key, the memory of the holds must be
// back too (a store that empties its map of holds but keeps it keeps every
// bucket the map grew).
func testHeldMemoryReturns(t *testing.T, v Variant, alg admit.Algorithm) {
	if alg != admit.TokenBucket {
		t.Skip("only a token bucket's reservations hold a key")
	}
	n := memoryKeys(40_000, 10_000, 20_000)
	rule := admit.Rule{Algorithm: alg, Limit: 5, Window: time.Second}
	lim, fake, base := memoryLimiter(t, v, rule)
	res, ok := lim.(keyedReserver)
	if !ok {
		t.Skip("no ReserveN")
	}
	holds, swept := spendHoldSweep(t, rule, lim, res, lim.(storeLimiter), fake, base, n)
	assert.LessOrEqual(t, swept, holds/4, "%v: heap kept after evicting all %d held keys, of the %d bytes their holds took", rule, n, holds)
	runtime.KeepAlive(lim)
}

// spendHoldSweep is the workload of the held-memory checks on lim (whose
// fresh store's heap was base), a store of rules (named by what) whose
// first rule is a token bucket of 5: n keys each spend 5, then reserve a
// token due within an hour, leaving a hold; an hour later a sweep must
// evict every key. It returns the heap the holds took and the heap kept
// after the sweep, for the caller to bound.
func spendHoldSweep(t *testing.T, what fmt.Stringer, lim admit.KeyedLimiter, res keyedReserver, store interface {
	Len() int
	Sweep() int
}, fake *clock.Fake, base int64, n int) (holds, swept int64) {
	t.Helper()
	var kb keyBuf
	for i := range n {
		require.True(t, lim.AllowN(kb.key("user-", i), 5).Allowed, "%v: new key %d denied", what, i)
	}
	keys := heapInUse() - base
	for i := range n {
		r, ok := res.ReserveN(kb.key("user-", i), 1, time.Hour)
		require.True(t, ok, "%v: ReserveN(key %d, 1, 1h)", what, i)
		require.Positive(t, r.Delay, "%v: ReserveN(key %d, 1, 1h) on a spent bucket", what, i)
	}
	full := heapInUse() - base
	require.Equal(t, n, store.Len())

	fake.Advance(time.Hour)
	assert.Equal(t, n, store.Sweep(), "%v: every key is idle an hour later", what)
	assert.Zero(t, store.Len())
	swept = heapInUse() - base
	t.Logf("%v: heap %.2f MiB with %d keys, %.2f MiB with their holds, %.2f MiB after the sweep", what, float64(keys)/(1<<20), n, float64(full)/(1<<20), float64(swept)/(1<<20))
	return full - keys, swept
}
