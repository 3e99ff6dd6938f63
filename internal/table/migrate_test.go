package table_test

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/table"
)

// The table as a keyed.Mover: keys taken from one table and put into
// another keep every decision, a call racing the move is neither lost nor
// counted twice, a key the hooks refuse goes to Redirect, and Keys lists
// every key.

// migrateRules are a rule of each packing: a token bucket in whole
// nanoseconds, one in scaled units, one whose word has a horizon of ±10.7
// days, a fixed window and a packed sliding counter.
var migrateRules = []admit.Rule{
	{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Second},
	{Algorithm: admit.TokenBucket, Limit: 7, Window: 7 * time.Second},
	{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second},
	{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Second},
	{Algorithm: admit.SlidingCounter, Limit: 7, Window: time.Second},
}

// mstore returns the table for rule over clk as a keyed.Mover.
func mstore(t require.TestingT, rule admit.Rule, clk clock.Clock, opts ...admit.Option) (admit.Store, keyed.Mover) {
	l := newTable(t, rule, clk, opts...)
	m, ok := l.(keyed.Mover)
	require.True(t, ok, "%T is no keyed.Mover", l)
	return l, m
}

// TestTakePutRoundTrip: calls on a few keys, with the clock moving both
// ways and past the token bucket's packed horizon, while the keys move
// between two tables by Take and Put, decide exactly as the kernel does on
// one state per key that never moves.
func TestTakePutRoundTrip(t *testing.T) {
	day := 24 * time.Hour
	times := []time.Duration{0, time.Second, 10*day + 23*time.Hour, 11 * day, -11 * day}
	for _, rule := range migrateRules {
		t.Run(rule.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				clk := clock.NewFake()
				var stores [2]admit.Store
				var ms [2]keyed.Mover
				for i := range stores {
					stores[i], ms[i] = mstore(rt, rule, clk, admit.WithShards(2))
				}
				o := conformance.NewOracle(rule)
				keys := []string{"a", "bb", "a-long-key-past-fifteen-bytes"}
				where := map[string]int{}
				var buf [1]kernel.PartState
				for i := range rapid.IntRange(1, 80).Draw(rt, "calls") {
					k := rapid.SampledFrom(keys).Draw(rt, "key")
					from := where[k]
					if rapid.IntRange(0, 3).Draw(rt, "move") == 0 {
						to := 1 - from
						held := ms[from].Take(k, buf[:])
						if ms[from].Take(k, buf[:]) {
							rt.Fatalf("call %d: Take(%q) twice", i, k)
						}
						if held {
							if !ms[to].Put(k, buf[:]) {
								rt.Fatalf("call %d: Put(%q) into a table without it = false", i, k)
							}
							if ms[to].Put(k, buf[:]) {
								rt.Fatalf("call %d: Put(%q) into a table holding it = true", i, k)
							}
						}
						where[k] = to
						continue
					}
					now := rapid.SampledFrom(times).Draw(rt, "t") + time.Duration(rapid.IntRange(0, 5000).Draw(rt, "dt"))
					clk.Set(now)
					n := rapid.IntRange(0, 3).Draw(rt, "n")
					want := o.Allow(k, now, n)
					if got := stores[from].AllowN(k, n); got != want {
						rt.Fatalf("call %d: AllowN(%q, %d) at %v in table %d = %+v, kernel %+v", i, k, n, now, from, got, want)
					}
				}
				total := 0
				for _, s := range stores {
					total += s.Len()
				}
				if total > len(keys) {
					rt.Fatalf("%d keys stored in the two tables, of %d", total, len(keys))
				}
			})
		})
	}
}

// TestTakeDropsHold: Take of a slot held by a reservation carries the
// state with the reservation's tokens taken, and the reservation can no
// longer be cancelled, in either table.
func TestTakeDropsHold(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Second}
	clk := clock.NewFake()
	a, ma := mstore(t, rule, clk)
	b, mb := mstore(t, rule, clk)
	ra, rb := a, b
	for range 2 {
		require.True(t, a.Allow("k").Allowed)
	}
	res, ok := ra.ReserveN("k", 1, time.Second) // waits 500ms: the slot is held
	require.True(t, ok)
	require.Equal(t, 500*time.Millisecond, res.Delay)
	var buf [1]kernel.PartState
	require.True(t, ma.Take("k", buf[:]))
	require.True(t, mb.Put("k", buf[:]))
	assert.False(t, ra.CancelReservation("k", res), "cancelled in the table it left")
	assert.False(t, rb.CancelReservation("k", res), "cancelled in the table it joined")
	d := b.Allow("k")
	assert.False(t, d.Allowed)
	assert.Equal(t, time.Second, d.RetryAfter, "the reservation's token stays taken")
	assert.Equal(t, 0, a.Len())
	assert.Equal(t, 1, b.Len())
}

// TestPutPastHorizon: a token bucket's state past its word's horizon, put
// into a table, is stored held (the slow path's record) and decided as the
// kernel decides it.
func TestPutPastHorizon(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	clk := clock.NewFake()
	clk.Set(11 * 24 * time.Hour)
	b, mb := mstore(t, rule, clk)
	k := kernel.NewTokenBucket(rule)
	var s kernel.TokenBucketState
	for range 3 {
		k.Decide(&s, clk.Now(), 1)
	}
	_, fits := k.Pack(s)
	require.False(t, fits, "the state packs: not past the horizon")
	var buf [1]kernel.PartState
	buf[0].SetTB(s)
	require.True(t, mb.Put("k", buf[:]))
	want := k.Decide(&s, clk.Now(), 2).Decision(rule.Limit)
	assert.Equal(t, want, b.AllowN("k", 2))
	require.True(t, mb.Take("k", buf[:]))
	assert.Equal(t, s, buf[0].TB(), "the held record's state taken")
}

// TestTakeHammer: with the clock frozen, goroutines admit on one key of a
// table while another goroutine takes the key and puts it into a second
// table, as a Service's Reload moves a pair: the first table's hooks then
// refuse the key (Keep) and send its calls to the second (Redirect), whose
// Adopt hook moves the key itself if it comes first, and otherwise waits,
// on the mutex every move holds from Take to Put, for the move under way
// (a Service's migration mutex). Every admission is counted once, before
// the Take or after the Put: together they are exactly the Limit. Pause
// makes one call load the key's word before the Take and publish after it,
// in every round of paused=true (builds with the tag admittest only: a
// normal build has no pause point).
func TestTakeHammer(t *testing.T) {
	for _, paused := range []bool{false, true} {
		t.Run("paused="+strconv.FormatBool(paused), func(t *testing.T) {
			if paused && !table.PauseEnabled {
				t.Skip("the table's pause point exists only in builds with -tags admittest (make test passes it)")
			}
			testTakeHammer(t, paused)
		})
	}
}

// testTakeHammer runs TestTakeHammer's rounds, each with a paused call
// (paused) or none.
func testTakeHammer(t *testing.T, paused bool) {
	rounds, perGoroutine := 10, 200
	if testing.Short() {
		rounds = 2
	}
	for _, rule := range []admit.Rule{
		{Algorithm: admit.TokenBucket, Limit: 600, Window: time.Second},
		{Algorithm: admit.TokenBucket, Limit: 600, Window: 7 * time.Second},
		{Algorithm: admit.FixedWindow, Limit: 600, Window: time.Second},
		{Algorithm: admit.SlidingCounter, Limit: 600, Window: time.Second},
	} {
		for _, goroutines := range []int{2, 8} {
			for round := range rounds {
				clk := clock.NewFake()
				a, ma := mstore(t, rule, clk, admit.WithShards(1))
				b, mb := mstore(t, rule, clk)
				var moved atomic.Bool
				var redirected atomic.Int64
				var moveMu sync.Mutex
				const key = "hot-key"
				var buf [1]kernel.PartState
				move := func() {
					moveMu.Lock()
					defer moveMu.Unlock()
					if ma.Take(key, buf[:]) {
						assert.True(t, mb.Put(key, buf[:]))
					}
				}
				mb.SetHooks(&keyed.Hooks{Adopt: func(string) keyed.Epoch {
					if moved.Load() {
						move()
					}
					return 0
				}})
				ma.SetHooks(&keyed.Hooks{
					Keep: func(string, keyed.Epoch) bool { return !moved.Load() },
					Redirect: func(key string, n int) (admit.Decision, int) {
						redirected.Add(1)
						return b.AllowN(key, n), 0
					},
				})
				var admitted atomic.Int64
				take := func() {
					moved.Store(true) // a Service publishes before it takes
					move()
				}
				start := make(chan struct{})
				half := make(chan struct{})
				var once sync.Once
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						<-start
						for range perGoroutine * 8 / goroutines {
							if a.Allow(key).Allowed {
								if admitted.Add(1) == int64(rule.Limit)/4 {
									once.Do(func() { close(half) })
								}
							}
						}
					})
				}
				wg.Go(func() {
					<-half
					if !paused {
						take()
						return
					}
					// The next call loads the word, then the key moves,
					// then the call tries to publish.
					table.SetPause(a, take)
				})
				close(start)
				wg.Wait()
				if !moved.Load() { // the paused call never came
					take()
				}
				what := rule.String() + " goroutines=" + strconv.Itoa(goroutines) + " round=" + strconv.Itoa(round)
				require.EqualValues(t, rule.Limit, admitted.Load(), what)
				assert.Zero(t, a.Len(), what)
				assert.Equal(t, 1, b.Len(), what)
				assert.False(t, b.Allow(key).Allowed, what)
			}
		}
	}
}

// TestKeepRedirects: a call on a key the table does not hold asks Keep,
// under the shard's mutex; refused, it is neither decided nor stored but
// returns Redirect's decision (n passed on, probes and denials included),
// and ReserveN returns Redirect's decision as a reservation. Adopt is
// called first, and may put the key. A key the table holds never consults
// the hooks.
func TestKeepRedirects(t *testing.T) {
	for _, rule := range []admit.Rule{
		{Algorithm: admit.TokenBucket, Limit: 3, Window: time.Second},
		{Algorithm: admit.FixedWindow, Limit: 3, Window: time.Second},
		{Algorithm: admit.SlidingCounter, Limit: 3, Window: time.Second},
	} {
		clk := clock.NewFake()
		l, m := mstore(t, rule, clk)
		var keeps, adopts []string
		var redirects []int
		elsewhere := admit.Decision{Allowed: true, Limit: 99, Remaining: 42, ResetAfter: time.Minute}
		m.SetHooks(&keyed.Hooks{
			Adopt: func(key string) keyed.Epoch {
				adopts = append(adopts, key)
				if key == "adopted" {
					var s [1]kernel.PartState
					switch rule.Algorithm {
					case admit.TokenBucket:
						k := kernel.NewTokenBucket(rule)
						var st kernel.TokenBucketState
						k.Decide(&st, clk.Now(), 3)
						s[0].SetTB(st)
					case admit.FixedWindow:
						s[0].SetFW(kernel.FixedWindowState{Window: kernel.NewFixedWindow(rule).Index(clk.Now()), Count: 3})
					default:
						s[0].SetSC(kernel.SlidingCounterState{Window: kernel.NewSlidingCounter(rule).Index(clk.Now()), Curr: 3})
					}
					require.True(t, m.Put(key, s[:]))
				}
				return keyed.Epoch(len(key))
			},
			Keep: func(key string, adopted keyed.Epoch) bool {
				assert.Equal(t, keyed.Epoch(len(key)), adopted, "%v: Keep is asked with the call's Adopt's Epoch", rule)
				keeps = append(keeps, key)
				return key != "moved"
			},
			Redirect: func(key string, n int) (admit.Decision, int) {
				require.Equal(t, "moved", key)
				redirects = append(redirects, n)
				return elsewhere, 0
			},
		})
		for _, n := range []int{1, 3, 0, 4} {
			assert.Equal(t, elsewhere, l.AllowN("moved", n), "%v: AllowN(moved, %d)", rule, n)
		}
		assert.Equal(t, elsewhere, l.Allow("moved"), "%v: Allow(moved)", rule)
		assert.Equal(t, []int{1, 3, 0, 4, 1}, redirects, "%v", rule)
		assert.Zero(t, l.Len(), "%v: a refused key is not stored", rule)

		require.True(t, l.Allow("kept").Allowed)
		assert.Equal(t, 1, l.Len())
		assert.False(t, l.Allow("adopted").Allowed, "%v: the adopted key's state decides", rule)
		keeps, adopts = keeps[:0], adopts[:0]
		for range 3 {
			l.Allow("kept")
			l.Allow("adopted")
		}
		assert.Empty(t, keeps, "%v: Keep consulted on a stored key", rule)
		assert.Empty(t, adopts, "%v: Adopt consulted on a stored key", rule)

		if r := l; rule.Algorithm == admit.TokenBucket { // the windows reserve nothing ahead
			redirects = redirects[:0]
			res, ok := r.ReserveN("moved", 2, time.Second)
			assert.True(t, ok)
			assert.Zero(t, res.Delay)
			assert.False(t, r.CancelReservation("moved", res), "a redirected reservation cannot be cancelled")
			elsewhere = admit.Decision{Limit: 99, RetryAfter: 250 * time.Millisecond}
			res, ok = r.ReserveN("moved", 2, time.Second)
			assert.False(t, ok)
			assert.Equal(t, 250*time.Millisecond, res.Delay, "a redirected denial: its RetryAfter")
			assert.Equal(t, []int{2, 2}, redirects)
			assert.Equal(t, []string{"moved", "moved"}, adopts)
			assert.Equal(t, 2, l.Len())
		}
	}
}

// TestKeysListsEvery: Keys yields every key the table holds exactly once,
// short and long (the tricky ones whose slot words are easy to confuse),
// through rebuilds and across shards, and no key taken; it stops when
// yield returns false; a table of hashed keys has none to give.
func TestKeysListsEvery(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.FixedWindow, Limit: 2, Window: time.Hour}
	for _, shards := range []int{1, 16} {
		l, m := mstore(t, rule, clock.NewFake(), admit.WithShards(shards))
		keys := trickyKeys()
		for i := range 300 {
			keys = append(keys, "filler-"+strconv.Itoa(i))
		}
		for _, k := range keys {
			require.True(t, l.Allow(k).Allowed, "%q", k)
		}
		var buf [1]kernel.PartState
		taken := keys[len(keys)-10:]
		for _, k := range taken {
			require.True(t, m.Take(k, buf[:]))
		}
		var got []string
		require.True(t, m.Keys(func(k string) bool { got = append(got, k); return true }))
		want := slices.Clone(keys[:len(keys)-10])
		slices.Sort(want)
		slices.Sort(got)
		assert.Equal(t, want, got, "shards=%d", shards)

		calls := 0
		require.True(t, m.Keys(func(string) bool { calls++; return calls < 3 }))
		assert.Equal(t, 3, calls, "shards=%d: yield returned false", shards)
	}
	_, m := mstore(t, rule, clock.NewFake(), admit.WithHashedKeys())
	assert.False(t, m.Keys(func(string) bool { t.Fatal("a key of a hashed table"); return false }))
}
