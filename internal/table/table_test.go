package table_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/table"
)

// The conformance suite runs on the table through atomic.New (package
// atomic's tests); the tests here are the table's own: keys that live in
// and out of their slots, collisions in one shard, rebuilds during races,
// and states past the packed word's horizon.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTable returns a table for rule over clk with the given options.
func newTable(t require.TestingT, rule admit.Rule, clk clock.Clock, opts ...admit.Option) admit.Store {
	require.NoError(t, rule.Validate())
	set, err := plumb.ResolveLimiter("table", append([]admit.Option{admit.WithClock(clk)}, opts...))
	require.NoError(t, err)
	require.True(t, table.Packs(rule), "%v does not pack", rule)
	return table.New(rule, set)
}

// trickyKeys are keys whose slot words are easy to confuse: the empty key,
// keys that differ only by a trailing zero byte or by length, keys at the
// 15/16-byte boundary between inline and out-of-line, and long keys that
// share a prefix.
func trickyKeys() []string {
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "abcdefgh", "abcdefgh\x00"}
	for _, n := range []int{7, 8, 9, 14, 15, 16, 17, 31, 64, 200} {
		keys = append(keys, strings.Repeat("k", n), strings.Repeat("k", n-1)+"x")
	}
	keys = append(keys, strings.Repeat("\xff", 15), strings.Repeat("\xff", 16))
	return keys
}

// TestKeysInAndOutOfSlots: every tricky key has a budget of its own, with
// full and hashed keys, in one shard (every key collides in its shard) and
// in many, and a key's budget survives the rebuilds that later keys cause.
func TestKeysInAndOutOfSlots(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.FixedWindow, Limit: 2, Window: time.Hour}
	for _, opts := range [][]admit.Option{
		{admit.WithShards(1)}, {admit.WithShards(64)}, {admit.WithShards(1), admit.WithHashedKeys()},
	} {
		clk := clock.NewFake()
		l := newTable(t, rule, clk, opts...)
		keys := trickyKeys()
		for i := range 500 { // enough keys for several rebuilds of one shard
			keys = append(keys, "filler-"+strconv.Itoa(i))
		}
		for _, k := range keys {
			require.True(t, l.Allow(k).Allowed, "%q: first", k)
		}
		for _, k := range keys {
			d := l.Allow(k)
			require.True(t, d.Allowed, "%q: second", k)
			require.Equal(t, 0, d.Remaining, "%q", k)
			require.False(t, l.Allow(k).Allowed, "%q: third", k)
		}
		assert.Equal(t, len(keys), l.Len())
	}
}

// TestKeyCopied: a key's bytes are the table's own, inline or out of line:
// a caller that reuses the key's memory does not change the stored key.
func TestKeyCopied(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Hour}
	for _, n := range []int{3, 15, 16, 40} {
		l := newTable(t, rule, clock.NewFake())
		buf := []byte(strings.Repeat("a", n))
		key := unsafeString(buf)
		require.True(t, l.Allow(key).Allowed)
		buf[0] = 'b' // key now reads "baaa…"
		assert.True(t, l.Allow(strings.Repeat("a", n)[:0]+"b"+strings.Repeat("a", n-1)).Allowed, "n=%d: the mutated key is new", n)
		assert.False(t, l.Allow(strings.Repeat("a", n)).Allowed, "n=%d: the original key is stored", n)
	}
}

// TestRebuildRace: goroutines hammer a few hot keys while others insert
// new keys into the same shard, so that its table is rebuilt many times
// during the race; with the clock frozen, every hot key admits exactly its
// Limit, and every new key exactly once.
func TestRebuildRace(t *testing.T) {
	for _, rule := range []admit.Rule{
		{Algorithm: admit.TokenBucket, Limit: 300, Window: time.Second},
		{Algorithm: admit.TokenBucket, Limit: 300, Window: 7 * time.Second}, // scaled units
		{Algorithm: admit.FixedWindow, Limit: 300, Window: time.Second},
		{Algorithm: admit.SlidingCounter, Limit: 300, Window: time.Second},
	} {
		for _, opts := range [][]admit.Option{{admit.WithShards(1)}, {admit.WithShards(1), admit.WithHashedKeys()}} {
			l := newTable(t, rule, clock.NewFake(), opts...)
			hot := []string{"hot-a", "hot-b-with-a-long-key-name", "hot-c"}
			var admitted [3]atomic.Int64
			var fresh atomic.Int64
			var wg sync.WaitGroup
			const inserters, perInserter = 2, 3000
			for g := range 4 {
				wg.Go(func() {
					for i := range 1000 {
						k := (g + i) % len(hot)
						if l.Allow(hot[k]).Allowed {
							admitted[k].Add(1)
						}
					}
				})
			}
			for g := range inserters {
				wg.Go(func() {
					for i := range perInserter {
						if l.Allow("new-" + strconv.Itoa(g) + "-" + strconv.Itoa(i)).Allowed {
							fresh.Add(1)
						}
					}
				})
			}
			wg.Wait()
			for k := range hot {
				assert.EqualValues(t, 300, admitted[k].Load(), "%v %s", rule, hot[k])
			}
			assert.EqualValues(t, inserters*perInserter, fresh.Load(), "%v", rule)
			assert.Equal(t, inserters*perInserter+len(hot), l.Len())
		}
	}
}

// TestPastTheHorizon: a token bucket whose word has a horizon (9,999 per
// second: ±10.7 days) decides exactly like the kernel on keys whose states
// lie past it, new and stored, spilled into records and released again when
// the clock comes back. With sweeps, the clock only moves forwards (a sweep
// makes a missing key's stale readings count from its floor, which the
// kernel alone does not model), and spilled states are evicted when fresh.
func TestPastTheHorizon(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	day := 24 * time.Hour
	times := []time.Duration{0, 10*day + 23*time.Hour, 11 * day, -11 * day, 400 * day}
	for _, sweeps := range []bool{false, true} {
		rapid.Check(t, func(rt *rapid.T) {
			clk := clock.NewFake()
			l := newTable(rt, rule, clk, admit.WithShards(1))
			o := conformance.NewOracle(rule)
			keys := []string{"a", "b", "a-long-key-past-fifteen-bytes"}
			now := -11 * day
			for i := range rapid.IntRange(1, 60).Draw(rt, "calls") {
				if sweeps {
					now += time.Duration(rapid.SampledFrom([]int64{0, 1, 50_000, int64(2 * time.Second), int64(11 * day)}).Draw(rt, "dt"))
					if rapid.Bool().Draw(rt, "sweep") {
						clk.Set(now)
						l.Sweep()
					}
				} else {
					now = rapid.SampledFrom(times).Draw(rt, "t") + time.Duration(rapid.IntRange(0, 5000).Draw(rt, "dt"))
				}
				clk.Set(now)
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				n := rapid.IntRange(0, 3).Draw(rt, "n")
				want := o.Allow(k, now, n)
				if got := l.AllowN(k, n); got != want {
					rt.Fatalf("call %d: AllowN(%q, %d) at %v = %+v, kernel %+v", i, k, n, now, got, want)
				}
			}
		})
	}
}

// TestSweepShrinks: a table whose keys all go idle gives its slots back.
func TestSweepShrinks(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}
	clk := clock.NewFake()
	l := newTable(t, rule, clk, admit.WithShards(1))
	for i := range 10_000 {
		l.Allow("k" + strconv.Itoa(i))
	}
	before := table.Slots(l)
	require.GreaterOrEqual(t, before, 10_000)
	clk.Advance(time.Hour)
	assert.Equal(t, 10_000, l.Sweep())
	assert.Equal(t, 0, l.Len())
	assert.Less(t, table.Slots(l), before/100, "slots after the sweep")
	require.True(t, l.Allow("k1").Allowed)
	assert.Equal(t, 1, l.Len())
}

// TestInsertAfterShrink: a new key whose insertion's own sweep shrinks the
// table (the evictions leave fewer keys than an eighth of the slots) is
// stored in the new table, not at the spot its lookup found in the old one.
func TestInsertAfterShrink(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}
	clk := clock.NewFake()
	l := newTable(t, rule, clk, admit.WithShards(1))
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		require.True(t, l.Allow(keys[i]).Allowed)
	}
	slots := table.Slots(l)
	busy := slots / 8 // after the sweep below, just too many keys to shrink
	clk.Set(10 * time.Second)
	for _, k := range keys[:busy] {
		require.True(t, l.Allow(k).Allowed) // busy until 11 s
	}
	clk.Set(10*time.Second + 500*time.Millisecond)
	require.Equal(t, len(keys)-busy, l.Sweep())
	require.Equal(t, slots, table.Slots(l), "no shrink yet")
	// Every key idle: each new key's insertion sweeps a few slots, and the
	// first eviction shrinks the table under that insertion.
	clk.Set(20 * time.Second)
	var added []string
	for j := 0; table.Slots(l) == slots; j++ {
		require.Less(t, j, 200, "no insertion shrank the table")
		k := "new-" + strconv.Itoa(j)
		require.True(t, l.Allow(k).Allowed, k)
		added = append(added, k)
	}
	for _, k := range added {
		assert.False(t, l.Allow(k).Allowed, "%s was stored, with its admission", k)
	}
	for _, k := range keys[:busy] {
		assert.True(t, l.Allow(k).Allowed, "%s: a fresh budget", k)
	}
}

// TestStoredKeyTakesNoLock: atomic.New keeps a token bucket, a fixed
// window and a packed sliding counter in a table, and a call on a key the
// table holds decides without its shard's mutex, by a CompareAndSwap on the
// key's word (policy.Service's doc and docs/configuration.md, "The key
// path", say so): with every shard's mutex held, AllowN on stored keys
// admits, denies and probes. A call that took a shard's mutex would block
// here until the test binary's timeout.
func TestStoredKeyTakesNoLock(t *testing.T) {
	for _, text := range []string{"token-bucket,2,1h", "fixed-window,2,1h", "sliding-counter,2,1h"} {
		rule, err := admit.ParseRule(text)
		require.NoError(t, err)
		fake := clock.NewFake()
		lim, err := admitatomic.New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		require.True(t, table.IsTable(lim), "%v: atomic.New built no table", rule)
		keys := []string{"alice", "a key longer than fifteen bytes"}
		for _, key := range keys {
			require.True(t, lim.Allow(key).Allowed, "%v: first Allow(%q)", rule, key)
		}
		unlock := table.LockShards(lim)
		for _, key := range keys {
			assert.True(t, lim.Allow(key).Allowed, "%v: second Allow(%q), every shard locked", rule, key)
			assert.False(t, lim.AllowN(key, 1).Allowed, "%v: third AllowN(%q, 1), every shard locked", rule, key)
			assert.Zero(t, lim.AllowN(key, 0).Remaining, "%v: AllowN(%q, 0), every shard locked", rule, key)
		}
		unlock()
	}
}
