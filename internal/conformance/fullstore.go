package conformance

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// testFullStore checks the documented full-store policy: with WithMaxKeys(8)
// and eight busy keys, a new key is denied with a RetryAfter after which it
// passes (and not 1ns before), keys already stored are served as usual, and
// the store never holds more than 8 keys.
func testFullStore(t *testing.T, v Variant, alg admit.Algorithm) {
	const maxKeys = 8
	rule := admit.Rule{Algorithm: alg, Limit: 2, Window: time.Second}
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(maxKeys), admit.WithShards(1))
	require.NoError(t, err)
	store := lim.(storeLimiter)
	for i := range maxKeys {
		require.True(t, lim.Allow("k"+strconv.Itoa(i)).Allowed)
	}
	d := lim.Allow("new")
	assert.False(t, d.Allowed, "%v: a new key in a full store of busy keys", rule)
	assert.Equal(t, admit.Decision{Limit: rule.Limit, RetryAfter: d.RetryAfter}, d, "the denial of a new key in a full store")
	assert.Positive(t, d.RetryAfter)
	assert.LessOrEqual(t, d.RetryAfter, horizon(rule)+time.Second, "RetryAfter is at most the rule's longest reset time plus the slack")
	assert.Equal(t, maxKeys, store.Len())

	assert.True(t, lim.Allow("k0").Allowed, "a stored key keeps its budget")
	assert.False(t, lim.Allow("k0").Allowed, "and its limit")
	probe := lim.AllowN("probe", 0)
	assert.Equal(t, admit.Decision{Allowed: true, Limit: rule.Limit, Remaining: rule.Limit}, probe, "a probe of a new key stores nothing and passes")
	for i := range 100 {
		assert.False(t, lim.Allow("flood-"+strconv.Itoa(i)).Allowed)
	}
	assert.Equal(t, maxKeys, store.Len())

	fake.Advance(d.RetryAfter - 1)
	assert.False(t, lim.Allow("new").Allowed, "%v: 1ns before RetryAfter no key is evictable yet", rule)
	fake.Advance(1)
	assert.True(t, lim.Allow("new").Allowed, "%v: at RetryAfter an idle key makes room", rule)
	assert.LessOrEqual(t, store.Len(), maxKeys)

	// With keys in 8 shards, an idle key in any shard makes room for a new
	// key in any other: one whose shard is empty must not wait for
	// another new key to land where the idle ones are.
	lim, err = v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(maxKeys), admit.WithShards(8))
	require.NoError(t, err)
	store = lim.(storeLimiter)
	for i := range maxKeys {
		require.True(t, lim.Allow("k"+strconv.Itoa(i)).Allowed)
	}
	fake.Advance(horizon(rule) + time.Second)
	for i := range maxKeys {
		assert.True(t, lim.Allow("next-"+strconv.Itoa(i)).Allowed, "%v: new key %d, with %d stored keys idle", rule, i, maxKeys-i)
		assert.LessOrEqual(t, store.Len(), maxKeys)
	}
	assert.False(t, lim.Allow("one-too-many").Allowed, "%v: the new keys are busy and fill the store", rule)
}

// floodSize is the number of unique keys of the flood checks: a million
// for the token bucket, 200,000 for the others (their stores take the same
// paths), fewer under -short and the race detector.
func floodSize(alg admit.Algorithm) int {
	switch {
	case raceEnabled:
		return 20_000
	case testing.Short():
		return 100_000
	case alg != admit.TokenBucket:
		return 200_000
	}
	return 1_000_000
}

// testFlood sends a flood of unique keys (a million without -short and
// -race, see floodSize) at a store bounded to 10,000 keys with a frozen clock: the first
// 10,000 pass, every other one is denied, the store never holds more, and
// its heap stays within a generous bound that a million keys would break.
// Once the clock has moved past the rule's reset time, new keys pass again.
func testFlood(t *testing.T, v Variant, alg admit.Algorithm) {
	maxKeys := 10_000
	if raceEnabled {
		maxKeys = 1_000
	}
	n := floodSize(alg)
	rule := admit.Rule{Algorithm: alg, Limit: 10, Window: time.Minute}
	fake := clock.NewFake()
	fake.Set(time.Hour)
	base := heapInUse()
	lim, err := v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(maxKeys))
	require.NoError(t, err)
	store := lim.(storeLimiter)
	var kb keyBuf
	admitted := 0
	for i := range n {
		d := lim.Allow(kb.key("flood-", i))
		if d.Allowed {
			admitted++
		} else if d.RetryAfter <= 0 || d.RetryAfter > horizon(rule)+time.Second {
			t.Fatalf("%v: key %d denied with RetryAfter %v, want within (0, %v]", rule, i, d.RetryAfter, horizon(rule)+time.Second)
		}
		if i%100_000 == 0 && store.Len() > maxKeys {
			t.Fatalf("%v: %d keys stored after %d new keys, more than WithMaxKeys(%d)", rule, store.Len(), i+1, maxKeys)
		}
	}
	heap := heapInUse() - base
	assert.Equal(t, maxKeys, admitted, "%v: new keys admitted by a store of %d keys", rule, maxKeys)
	assert.Equal(t, maxKeys, store.Len())
	bound := int64(maxKeys)*1024 + 16<<20
	assert.LessOrEqual(t, heap, bound, "%v: heap after a flood of %d keys into a store of %d", rule, n, maxKeys)
	t.Logf("%v: %d unique keys, %d stored, heap %.1f MiB", rule, n, store.Len(), float64(heap)/(1<<20))

	fake.Advance(horizon(rule) + time.Second)
	assert.True(t, lim.Allow("after-the-flood").Allowed, "%v: once the flood's keys are idle, a new key passes", rule)
	runtime.KeepAlive(lim)
}

// testFullStoreSeeds checks where stores may differ for the same calls
// (docs/keyed-stores.md, "The full-store policy"): only in whether a new
// key of a full store finds the idle key that would make room, which
// depends on the shard each key landed in, so on each store's random hash
// seed. Of many fresh stores (so many seeds), each filled to WithMaxKeys
// with one idle key and the rest busy, a new key is admitted by every one
// when the policy examines every key (at most 8 shards and 32 keys); with
// 16 shards it may be admitted or denied, but its second request is
// admitted by every store (the policy's cursor has visited every shard).
func testFullStoreSeeds(t *testing.T, v Variant, alg admit.Algorithm) {
	rule := admit.Rule{Algorithm: alg, Limit: 5, Window: time.Second}
	const stores = 64
	for _, c := range []struct {
		shards, maxKeys int
		every           bool // every store admits the first request
	}{
		{1, 2, true}, {8, 2, true}, {8, 32, true}, {16, 2, false}, {16, 32, false},
	} {
		first := 0
		for range stores {
			fake := clock.NewFake()
			fake.Set(time.Hour)
			lim, err := v.New(rule, admit.WithClock(fake), admit.WithMaxKeys(c.maxKeys), admit.WithShards(c.shards))
			require.NoError(t, err)
			require.True(t, lim.Allow("idle").Allowed)
			fake.Advance(horizon(rule) + time.Second)
			for i := range c.maxKeys - 1 {
				require.True(t, lim.Allow("busy-"+strconv.Itoa(i)).Allowed)
			}
			if lim.Allow("new").Allowed {
				first++
				continue
			}
			require.False(t, c.every, "%v, %d shards, WithMaxKeys(%d): a new key denied with an idle key stored", rule, c.shards, c.maxKeys)
			require.True(t, lim.Allow("new").Allowed, "%v, %d shards, WithMaxKeys(%d): the new key's second request, the idle key stored", rule, c.shards, c.maxKeys)
		}
		t.Logf("%v, %d shards, WithMaxKeys(%d): the first request for the new key admitted in %d of %d stores", rule, c.shards, c.maxKeys, first, stores)
	}
}
