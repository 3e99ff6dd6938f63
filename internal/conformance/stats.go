package conformance

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// The Stats checks hold every keyed store to admit.StoreStats: the value a
// constructor returns has Stats in every form and with
// every option; Keys is Len; MaxKeys is WithMaxKeys' bound; Evictions
// counts the keys evicted by insertions' sweeps, the full-store policy and
// Sweep (Sweep's return exactly), and never a key that Reset forgets or a
// Take moves out; FullDenials counts the requests for new keys a full
// store denied, reservations included, and never a probe, a request that
// could not pass anyway, a call on a stored key, or a key a Put stores
// beyond the bound.

// statsStore is what every local keyed store offers the Stats checks.
type statsStore interface {
	admit.KeyedLimiter
	reporter
	Len() int
	Sweep() int
}

// testStats runs the Stats checks on v's stores of algorithm alg.
func testStats(t *testing.T, v Variant, alg admit.Algorithm) {
	texts := map[admit.Algorithm][]string{
		// A bucket of whole nanoseconds per token, and one in scaled units.
		admit.TokenBucket: {"token-bucket,2,1s", "token-bucket,3,10s"},
		admit.FixedWindow: {"fixed-window,2,1s"},
		admit.SlidingLog:  {"sliding-log,2,1s"},
		// One that packs into a word, and one too wide to (which atomic's
		// table refuses).
		admit.SlidingCounter: {"sliding-counter,2,1s", "sliding-counter,70000,1m"},
	}[alg]
	for _, text := range texts {
		rule := mustRule(t, text)
		if !v.takes(rule) {
			continue // newTaken's checks hold the refusal
		}
		build := func(opts ...admit.Option) (admit.KeyedLimiter, error) { return v.New(rule, opts...) }
		t.Run(text, func(t *testing.T) {
			t.Run("Reporter", func(t *testing.T) { statsReporter(t, text, build, v.HashedKeys) })
			for _, shards := range []int{1, 4} {
				t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
					statsScenario(t, text, build, shards, rule.Limit, horizon(rule))
				})
			}
			t.Run("Unbounded", func(t *testing.T) { statsUnbounded(t, text, build, horizon(rule)) })
			t.Run("Moves", func(t *testing.T) { statsMoves(t, text, build) })
		})
	}
}

// RunCompositeStats runs the Stats checks on v's keyed stores of two rules
// or more, which must be local stores that report statistics, as every
// keyed composite store of packages locked and sharded does: a pair of token
// buckets (which reserves), a token bucket and a fixed window, three rules
// of three algorithms, a sliding counter too wide to pack beside a token
// bucket, and a sliding log beside a token bucket, those v supports. (The
// Stats checks of one rule run with the keyed-store checks, runStore.)
func RunCompositeStats(t *testing.T, v CompositeVariant) {
	if v.Remote {
		t.Fatalf("conformance.RunCompositeStats(%s): a remote variant has no local store", v.Name)
	}
	for _, text := range []string{
		"token-bucket,2,1s + token-bucket,4,1m",
		"token-bucket,2,1s + fixed-window,4,1m",
		"sliding-counter,2,1s + token-bucket,4,1m + fixed-window,8,1h",
		"sliding-counter,70000,1m + token-bucket,3,10s",
		"sliding-log,2,1s + token-bucket,4,1m",
	} {
		l := mustLimits(t, text)
		if !supportsLimits(v, l) {
			continue
		}
		var longest time.Duration
		for _, r := range l.Rules() {
			longest = max(longest, horizon(r))
		}
		build := func(opts ...admit.Option) (admit.KeyedLimiter, error) { return v.NewLimits(l, opts...) }
		t.Run(text, func(t *testing.T) {
			t.Run("Reporter", func(t *testing.T) { statsReporter(t, text, build, false) })
			for _, shards := range []int{1, 4} {
				t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
					statsScenario(t, text, build, shards, l.Limit(), longest)
				})
			}
			t.Run("Unbounded", func(t *testing.T) { statsUnbounded(t, text, build, longest) })
			t.Run("Moves", func(t *testing.T) { statsMoves(t, text, build) })
		})
	}
}

// reporter is a keyed store's Stats (admit.Store's, admit.CompositeStore's).
type reporter interface{ Stats() admit.StoreStats }

// statsReporter checks that build's store, with every combination of the
// store options (hashed keys only if hashed), has Stats, which reports an
// empty store, then one key.
func statsReporter(t *testing.T, what string, build func(...admit.Option) (admit.KeyedLimiter, error), hashed bool) {
	for _, shards := range []int{0, 1} { // 0: the default
		for _, maxKeys := range []int{0, 3} { // 0: no bound
			for _, h := range []bool{false, true} {
				if h && !hashed {
					continue
				}
				opts := []admit.Option{admit.WithClock(clock.NewFake())}
				name := what
				if shards > 0 {
					opts = append(opts, admit.WithShards(shards))
					name += fmt.Sprintf(", WithShards(%d)", shards)
				}
				if maxKeys > 0 {
					opts = append(opts, admit.WithMaxKeys(maxKeys))
					name += fmt.Sprintf(", WithMaxKeys(%d)", maxKeys)
				}
				if h {
					opts = append(opts, admit.WithHashedKeys())
					name += ", WithHashedKeys()"
				}
				lim, err := build(opts...)
				require.NoError(t, err, name)
				sr, ok := lim.(reporter)
				if !assert.True(t, ok, "%s: the store, a %T, has no Stats", name, lim) {
					continue
				}
				assert.Equal(t, admit.StoreStats{MaxKeys: maxKeys}, sr.Stats(), "%s: Stats() of a new store", name)
				require.True(t, lim.Allow("a").Allowed, "%s: Allow(a)", name)
				assert.Equal(t, admit.StoreStats{Keys: 1, MaxKeys: maxKeys}, sr.Stats(), "%s: Stats() after Allow(a)", name)
			}
		}
	}
}

// statsScenario walks a store bounded to 8 keys with shards shards (limit
// is the smallest Limit, horizon the longest a state takes to become
// fresh) through every path that counts or must not count, comparing
// Stats with the counts the calls imply after each step.
func statsScenario(t *testing.T, what string, build func(...admit.Option) (admit.KeyedLimiter, error), shards, limit int, horizon time.Duration) {
	const maxKeys = 8
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := build(admit.WithClock(fake), admit.WithMaxKeys(maxKeys), admit.WithShards(shards))
	require.NoError(t, err)
	st, ok := lim.(statsStore)
	require.True(t, ok, "%s: the store, a %T, has no Stats, Len or Sweep", what, lim)
	want := admit.StoreStats{MaxKeys: maxKeys}
	check := func(step string) {
		t.Helper()
		if got := st.Stats(); got != want {
			t.Errorf("%s, WithMaxKeys(%d), WithShards(%d): %s: Stats() = %+v, want %+v", what, maxKeys, shards, step, got, want)
		}
		if n := st.Len(); n != want.Keys {
			t.Errorf("%s: %s: Len() = %d, want %d as Stats' Keys", what, step, n, want.Keys)
		}
	}
	check("a new store")
	for i := range maxKeys {
		require.True(t, lim.Allow("k"+strconv.Itoa(i)).Allowed, "%s: Allow(k%d)", what, i)
		want.Keys++
	}
	check(fmt.Sprintf("Allow of %d new keys", maxKeys))

	require.False(t, lim.Allow("new").Allowed, "%s: Allow(new) in a full store of busy keys", what)
	want.FullDenials++
	check("Allow(new) denied by the full store")
	require.True(t, lim.AllowN("new", 0).Allowed, "%s: AllowN(new, 0)", what)
	check("AllowN(new, 0), a probe, which stores nothing")
	require.False(t, lim.AllowN("new", limit+1).Allowed, "%s: AllowN(new, %d)", what, limit+1)
	check(fmt.Sprintf("AllowN(new, %d), above the limit: denied for its size, not for room", limit+1))
	lim.Allow("k0")
	lim.Allow("k0")
	check("Allow(k0) twice, a stored key")
	if kr, ok := lim.(keyedReserver); ok {
		_, ok := kr.ReserveN("new", 1, time.Hour)
		require.False(t, ok, "%s: ReserveN(new, 1) in a full store of busy keys", what)
		want.FullDenials++
		check("ReserveN(new, 1) denied by the full store")
		_, ok = kr.ReserveN("new", 0, time.Hour)
		require.True(t, ok, "%s: ReserveN(new, 0)", what)
		check("ReserveN(new, 0), which takes nothing")
	}

	// Past the horizon (and the slack) every key is idle: the new key's
	// full-store policy evicts some, at least one, to make room for it.
	fake.Advance(horizon + time.Second)
	require.True(t, lim.Allow("new").Allowed, "%s: Allow(new) once every stored key is idle", what)
	got := st.Stats()
	if got.Evictions < 1 || got.Evictions > maxKeys || got.FullDenials != want.FullDenials || got.MaxKeys != maxKeys {
		t.Errorf("%s: Allow(new) after every key went idle: Stats() = %+v, want 1 to %d Evictions, FullDenials %d, MaxKeys %d",
			what, got, maxKeys, want.FullDenials, maxKeys)
	}
	want.Evictions = got.Evictions
	want.Keys = maxKeys + 1 - int(got.Evictions) // every key stored, less those evicted
	check("Allow(new) once every stored key is idle")

	// Sweep evicts every idle key, and its return is what Evictions gains:
	// first the keys the new key left, all idle, then keys stored since,
	// with room to spare (no full-store policy) and too few for the
	// insertions' sweeps.
	swept := st.Sweep()
	assert.Equal(t, want.Keys-1, swept, "%s: Sweep() with every key idle but new", what)
	want.Evictions += uint64(swept)
	want.Keys -= swept
	check(fmt.Sprintf("Sweep() = %d", swept))
	for i := range 3 {
		require.True(t, lim.Allow("s"+strconv.Itoa(i)).Allowed, "%s: Allow(s%d)", what, i)
		want.Keys++
	}
	check("Allow of 3 new keys")
	fake.Advance(horizon + time.Second)
	swept = st.Sweep()
	assert.Equal(t, want.Keys, swept, "%s: Sweep() with every key idle", what)
	want.Evictions += uint64(swept)
	want.Keys -= swept
	check(fmt.Sprintf("Sweep() = %d", swept))

	// Reset forgets a key (the map store deletes it, the others keep it
	// fresh): no eviction either way. A Sweep then evicts what is fresh,
	// and counts it.
	require.True(t, lim.Allow("r").Allowed, "%s: Allow(r)", what)
	want.Keys++
	check("Allow(r)")
	before := st.Stats()
	lim.(resetter).Reset("r")
	lim.(resetter).Reset("never-stored")
	after := st.Stats()
	if after.Evictions != before.Evictions || after.FullDenials != before.FullDenials || after.Keys > before.Keys {
		t.Errorf("%s: Reset(r): Stats() = %+v, was %+v: Reset is no eviction", what, after, before)
	}
	want.Keys = after.Keys
	swept = st.Sweep()
	want.Evictions += uint64(swept)
	want.Keys -= swept
	check(fmt.Sprintf("Sweep() = %d after Reset(r)", swept))
}

// statsUnbounded checks a store with no bound and one shard: the sweep of
// a few keys that each insertion makes once the shard holds
// keyed.SweepMinLen keys counts its evictions, and nothing counts a
// denial.
func statsUnbounded(t *testing.T, what string, build func(...admit.Option) (admit.KeyedLimiter, error), horizon time.Duration) {
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := build(admit.WithClock(fake), admit.WithShards(1))
	require.NoError(t, err)
	st := lim.(statsStore)
	for i := range keyed.SweepMinLen {
		require.True(t, lim.Allow("k"+strconv.Itoa(i)).Allowed, "%s: Allow(k%d)", what, i)
	}
	assert.Equal(t, admit.StoreStats{Keys: keyed.SweepMinLen}, st.Stats(), "%s: Stats() after Allow of %d new keys", what, keyed.SweepMinLen)
	fake.Advance(horizon + time.Second)
	require.True(t, lim.Allow("new").Allowed, "%s: Allow(new)", what)
	got := st.Stats()
	if got.Evictions < 1 || got.Evictions > keyed.SweepBatch || got.FullDenials != 0 || got.MaxKeys != 0 ||
		got.Keys != keyed.SweepMinLen+1-int(got.Evictions) || got.Keys != st.Len() {
		t.Errorf("%s: Allow(new) with %d idle keys in one shard: Stats() = %+v, Len() = %d; want 1 to %d Evictions, Keys = %d + 1 - Evictions = Len, no bound, no denial",
			what, keyed.SweepMinLen, got, st.Len(), keyed.SweepBatch, keyed.SweepMinLen)
	}
}

// statsMoves checks, on a store whose keys can move (every local store is
// a keyed.Mover), that a Take is no eviction, and that a Put into a full
// store, which stores its key beyond the bound, is no denial.
func statsMoves(t *testing.T, what string, build func(...admit.Option) (admit.KeyedLimiter, error)) {
	fake := clock.NewFake()
	fake.Set(time.Hour)
	movable := func(opts ...admit.Option) (admit.KeyedLimiter, keyed.Mover) {
		t.Helper()
		lim, err := build(append([]admit.Option{admit.WithClock(fake), admit.WithShards(1)}, opts...)...)
		require.NoError(t, err)
		ms, ok := lim.(keyed.Mover)
		if !ok {
			t.Skipf("%s: the store, a %T, is no keyed.Mover", what, lim)
		}
		return lim, ms
	}
	lim, ms := movable(admit.WithMaxKeys(2))
	st := lim.(statsStore)
	require.True(t, lim.Allow("a").Allowed)
	require.True(t, lim.Allow("b").Allowed)
	state := make([]kernel.PartState, ms.Limits().Len())
	require.True(t, ms.Take("a", state), "%s: Take(a)", what)
	assert.Equal(t, admit.StoreStats{Keys: 1, MaxKeys: 2}, st.Stats(), "%s: Stats() after Take(a): a Take is no eviction", what)
	require.True(t, ms.Put("a", state), "%s: Put(a)", what)
	assert.Equal(t, admit.StoreStats{Keys: 2, MaxKeys: 2}, st.Stats(), "%s: Stats() after Put(a)", what)

	// A state of another key, from another store (a Put takes over what it
	// is given: a sliding log's ring is not copied).
	other, oms := movable()
	require.True(t, other.Allow("c").Allowed)
	require.True(t, oms.Take("c", state), "%s: Take(c) from another store", what)
	require.True(t, ms.Put("c", state), "%s: Put(c) into a full store", what)
	assert.Equal(t, admit.StoreStats{Keys: 3, MaxKeys: 2}, st.Stats(), "%s: Stats() after Put(c), stored beyond the bound: no denial", what)
}

// StoreAllocs holds v's keyed stores, with the store options (a bound,
// one shard, hashed keys if v takes them), to the allocation budget of a
// stored key: for a rule of each algorithm v supports whose every form
// allocates nothing (1,000 per hour), an admitted and a denied Allow on a
// stored key make no allocation, nor does Stats. Counting evictions and
// denials must add nothing to that path. Without the race detector only
// (its runtime allocates of its own): `make allocs` runs it.
func StoreAllocs(t *testing.T, v Variant) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates of its own")
	}
	for _, alg := range Algorithms {
		if !v.Supports(alg) {
			continue
		}
		rule := admit.Rule{Algorithm: alg, Limit: 1000, Window: time.Hour}
		storeAllocs(t, rule.String(), rule.Limit, v.HashedKeys, func(opts ...admit.Option) (admit.KeyedLimiter, error) {
			return v.New(rule, opts...)
		})
	}
}

// CompositeStoreAllocs is StoreAllocs for v's keyed stores of two rules,
// the issue's (10 per second and 1,000 per hour), whose admitted Allow on a
// stored key may make v.AllowAllocs allocations (the clock moves 100ms
// before each, so that each is admitted), and whose denied Allow and Stats
// make none.
func CompositeStoreAllocs(t *testing.T, v CompositeVariant) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates of its own")
	}
	l := issueExample(t, v)
	for _, opts := range storeOptionSets(false) {
		fake := clock.NewFake()
		lim, err := v.NewLimits(l, append([]admit.Option{admit.WithClock(fake)}, opts.opts...)...)
		require.NoError(t, err, "%v%s", l, opts.name)
		lim.Allow("hot") // store the key
		allocs := testing.AllocsPerRun(100, func() {
			fake.Advance(100 * time.Millisecond)
			if !lim.Allow("hot").Allowed {
				panic("a token comes every 100ms")
			}
		})
		assert.LessOrEqual(t, allocs, v.AllowAllocs, "%v%s: allocations per admitted Allow on a stored key", l, opts.name)
		for lim.Allow("hot").Allowed {
		}
		assert.Zero(t, testing.AllocsPerRun(100, func() {
			if lim.Allow("hot").Allowed {
				panic("the bucket is empty")
			}
		}), "%v%s: allocations per denied Allow on a stored key", l, opts.name)
		sr := lim.(reporter)
		assert.Zero(t, testing.AllocsPerRun(100, func() { sr.Stats() }), "%v%s: allocations per Stats", l, opts.name)
	}
}

// storeAllocs is StoreAllocs for the stores build makes of a rule (what)
// whose Limit is limit.
func storeAllocs(t *testing.T, what string, limit int, hashed bool, build func(...admit.Option) (admit.KeyedLimiter, error)) {
	for _, opts := range storeOptionSets(hashed) {
		lim, err := build(append([]admit.Option{admit.WithClock(clock.NewFake())}, opts.opts...)...)
		require.NoError(t, err, "%s%s", what, opts.name)
		lim.Allow("hot") // store the key (and a sliding log's ring)
		allocs := testing.AllocsPerRun(100, func() {
			if !lim.Allow("hot").Allowed {
				panic("102 of 1000 pass")
			}
		})
		assert.Zero(t, allocs, "%s%s: allocations per admitted Allow on a stored key", what, opts.name)
		lim.AllowN("hot", limit-102) // spend the rest
		assert.Zero(t, testing.AllocsPerRun(100, func() {
			if lim.Allow("hot").Allowed {
				panic("the limit is spent")
			}
		}), "%s%s: allocations per denied Allow on a stored key", what, opts.name)
		sr := lim.(reporter)
		assert.Zero(t, testing.AllocsPerRun(100, func() { sr.Stats() }), "%s%s: allocations per Stats", what, opts.name)
	}
}

// optionSet is a named set of store options.
type optionSet struct {
	name string
	opts []admit.Option
}

// storeOptionSets returns the sets of store options the allocation checks
// build stores with: none, a bound, a bound in one shard, and with hashed
// keys if hashed.
func storeOptionSets(hashed bool) []optionSet {
	sets := []optionSet{
		{"", nil},
		{", WithMaxKeys(100)", []admit.Option{admit.WithMaxKeys(100)}},
		{", WithMaxKeys(100), WithShards(1)", []admit.Option{admit.WithMaxKeys(100), admit.WithShards(1)}},
	}
	if hashed {
		sets = append(sets, optionSet{", WithMaxKeys(100), WithHashedKeys()", []admit.Option{admit.WithMaxKeys(100), admit.WithHashedKeys()}})
	}
	return sets
}
