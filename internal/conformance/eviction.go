package conformance

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// testEvictionEquivalence drives the variant, with evictions forced at legal
// points, and the eviction-free kernel oracle with the same generated
// sequence of calls, clock moves (forwards and backwards) and evictions, and
// requires identical Decisions. An eviction at reading at is legal when no
// later call reads the clock earlier than at, as with a monotonic clock;
// calls that read an older clock after an eviction are the business of
// testStaleReadingAfterEviction.
func testEvictionEquivalence(t *testing.T, v Variant, alg admit.Algorithm) {
	needHooks(t, v, false)
	type op struct {
		kind int // opMove, opEvict or opAllow
		at   time.Duration
		key  string
		n    int
	}
	const (
		opMove = iota
		opEvict
		opAllow
	)
	var evicted, legal int
	rapid.Check(t, func(rt *rapid.T) {
		rule := drawTaken(rt, v, alg)
		shards := rapid.SampledFrom([]int{1, 4, 64}).Draw(rt, "shards")
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		start := now
		ops := make([]op, rapid.IntRange(1, 80).Draw(rt, "ops"))
		for i := range ops {
			o := op{kind: opAllow}
			switch rapid.IntRange(0, 11).Draw(rt, "op") {
			case 0, 1:
				o.kind = opMove
				now += time.Duration(rapid.Int64Range(0, int64(3*rule.Window)).Draw(rt, "advance"))
			case 2:
				o.kind = opMove
				now += time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge"))
			case 3:
				o.kind = opMove
				now -= time.Duration(rapid.Int64Range(0, int64(rule.Window)).Draw(rt, "back"))
			case 4, 5:
				o.kind = opEvict
			default:
				o.n = rapid.IntRange(-1, rule.Limit+1).Draw(rt, "n")
				o.key = rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(rt, "key")
			}
			o.at = now
			ops[i] = o
		}
		// later[i] is the earliest reading of the calls from op i on.
		later := make([]time.Duration, len(ops)+1)
		later[len(ops)] = 1<<63 - 1
		for i := len(ops) - 1; i >= 0; i-- {
			later[i] = later[i+1]
			if ops[i].kind == opAllow {
				later[i] = min(later[i], ops[i].at)
			}
		}

		fake := clock.NewFake()
		fake.Set(start)
		lim, err := v.New(rule, admit.WithClock(fake), admit.WithShards(shards))
		require.NoError(rt, err)
		store := lim.(storeLimiter)
		want := NewOracle(rule)
		for i, o := range ops {
			switch o.kind {
			case opMove:
				fake.Set(o.at)
			case opEvict:
				at := min(o.at, later[i+1])
				before := store.Len()
				n := v.Store.EvictAt(lim, at)
				if after := store.Len(); after != before-n {
					rt.Fatalf("%s op %d: EvictAt(%v) evicted %d of %d keys, but %d remain", rule, i, at, n, before, after)
				}
				evicted += n
				legal++
			case opAllow:
				exp := want.Allow(o.key, o.at, o.n)
				if got := lim.AllowN(o.key, o.n); got != exp {
					rt.Fatalf("%s op %d: AllowN(t=%v, %q, %d) = %+v, want %+v (the eviction-free kernel)", rule, i, o.at, o.key, o.n, got, exp)
				}
			}
		}
	})
	if legal > 0 {
		assert.Positive(t, evicted, "%d forced evictions evicted no key: the check proved nothing", legal)
	}
}

// testIncrementalEvictionEquivalence is testEvictionEquivalence for the
// evictions a store does on its own: one shard of 80 to 150 keys, so that
// insertions sweep it, and Sweep calls, with a clock that only moves
// forwards, as a monotonic clock does. Every Decision must be the
// eviction-free kernel's, and keys must have been evicted.
func testIncrementalEvictionEquivalence(t *testing.T, v Variant, alg admit.Algorithm) {
	evicted := 0
	rapid.Check(t, func(rt *rapid.T) {
		rule := drawTaken(rt, v, alg)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		lim, err := v.New(rule, admit.WithClock(fake), admit.WithShards(1))
		require.NoError(rt, err)
		store := lim.(storeLimiter)
		want := NewOracle(rule)
		stored := map[string]bool{}
		for i := range 80 { // enough keys that insertions sweep the shard
			key := "k" + strconv.Itoa(i)
			exp := want.Allow(key, fake.Now(), 1)
			if got := lim.Allow(key); got != exp {
				rt.Fatalf("%s: Allow(%q) = %+v, want %+v", rule, key, got, exp)
			}
			stored[key] = true
		}
		// Let them all go idle: a new key's insertion evicts some.
		fake.Advance(horizon(rule) + time.Second)
		if got, exp := lim.Allow("new"), want.Allow("new", fake.Now(), 1); got != exp {
			rt.Fatalf("%s: Allow(%q) = %+v, want %+v", rule, "new", got, exp)
		}
		stored["new"] = true
		for i := range rapid.IntRange(1, 400).Draw(rt, "ops") {
			switch rapid.IntRange(0, 19).Draw(rt, "op") {
			case 0:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(3*rule.Window)).Draw(rt, "advance")))
			case 1:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(rule.Window/8)).Draw(rt, "step")))
			case 2:
				store.Sweep()
			default:
				key := "k" + strconv.Itoa(rapid.IntRange(0, 149).Draw(rt, "key"))
				n := rapid.IntRange(-1, rule.Limit+1).Draw(rt, "n")
				now := fake.Now()
				exp := want.Allow(key, now, n)
				if got := lim.AllowN(key, n); got != exp {
					rt.Fatalf("%s op %d: AllowN(t=%v, %q, %d) = %+v, want %+v (the eviction-free kernel)", rule, i, now, key, n, got, exp)
				}
				if exp.Allowed && n > 0 {
					stored[key] = true
				}
			}
		}
		evicted += len(stored) - store.Len()
	})
	assert.Positive(t, evicted, "no key was evicted: the check proved nothing")
}

// pausedCall starts lim.AllowN(key, n) in a goroutine, stopped at the
// variant's pause point. resume lets it finish and returns its Decision.
func pausedCall(t *testing.T, v Variant, lim admit.KeyedLimiter, key string, n int) (resume func() admit.Decision) {
	t.Helper()
	paused, proceed := make(chan struct{}), make(chan struct{})
	v.Store.Pause(lim, func() {
		close(paused)
		<-proceed
	})
	result := make(chan admit.Decision, 1)
	go func() { result <- lim.AllowN(key, n) }()
	<-paused
	return func() admit.Decision {
		close(proceed)
		return <-result
	}
}

// testEvictionRace is the classic eviction race (docs/reliability.md E2) with the
// clock frozen: call A holds a fresh key's state (or, for a mutex store, is
// on its way to the lock), the key is evicted, call B creates it anew and
// spends the whole limit, then A resumes. A must not spend a second budget.
func testEvictionRace(t *testing.T, v Variant, alg admit.Algorithm) {
	needHooks(t, v, true)
	// Limit 2 per second gives a token bucket of whole nanoseconds per
	// token, 3 one of fractions: a packed word keeps the second in scaled
	// units, and the check runs on both.
	for _, limit := range []int{2, 3} {
		rule := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Second}
		fake := clock.NewFake()
		t0 := time.Hour
		fake.Set(t0)
		lim, err := v.New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		require.True(t, lim.Allow("k").Allowed)
		t1 := t0 + horizon(rule) // k is fresh from here on
		fake.Set(t1)

		resumeA := pausedCall(t, v, lim, "k", rule.Limit)
		require.Equal(t, 1, v.Store.EvictAt(lim, t1), "k is fresh at %v and must be evicted", t1)
		b := lim.AllowN("k", rule.Limit)
		a := resumeA()
		admitted := 0
		for _, d := range []admit.Decision{a, b} {
			if d.Allowed {
				admitted += rule.Limit
			}
		}
		assert.True(t, b.Allowed, "%v: B on the evicted (fresh) key: %+v", rule, b)
		assert.Equal(t, rule.Limit, admitted, "%v: admitted across the race (A %+v, B %+v)", rule, a, b)
		assert.Equal(t, 1, lim.(storeLimiter).Len())
	}
}

// call is one call of a replayed history: AllowN(key, n) at reading at.
type call struct {
	at time.Duration
	n  int
}

// replay returns the eviction-free kernel's Decisions for calls on one key.
func replay(rule admit.Rule, calls ...call) []admit.Decision {
	o := NewOracle(rule)
	ds := make([]admit.Decision, len(calls))
	for i, c := range calls {
		ds[i] = o.Allow("k", c.at, c.n)
	}
	return ds
}

// testStaleReadingAfterEviction: call A reads the clock while key k is still
// busy, stops at the pause point, the clock moves on, k (now fresh) is
// evicted, and A resumes with its stale reading. Every Decision must be one
// the eviction-free kernel gives for some order of the calls that respects
// real time, with A at a reading its call spanned:
//
//   - A before the eviction, at its own reading, on the evicted state; only
//     if A publishes nothing (a denial), since the eviction proved that the
//     state had not changed;
//   - A after the eviction, on B's state at its own reading if B recreated k
//     first, or, if A finds k gone, at the store's floor (the eviction's
//     reading): a fresh key's state is equivalent to the evicted one only
//     from there on. Judged at its stale reading instead, A would take a
//     fresh budget where the evicted state still owed, and a later call
//     would get more than the rule allows.
//
// Limit 2 makes A an admission on the evicted state, which a lock-free store
// must then retry from the map; Limit 1 makes it a denial.
func testStaleReadingAfterEviction(t *testing.T, v Variant, alg admit.Algorithm) {
	needHooks(t, v, true)
	for _, limit := range []int{1, 2} {
		rule := admit.Rule{Algorithm: alg, Limit: limit, Window: 10 * time.Second}
		t0 := time.Hour
		tA := t0 + rule.Window/4                             // A's stale reading: k is still busy
		te := t0 + horizon(rule)                             // k is fresh from here on: the eviction's reading
		later := te + rule.Window/time.Duration(2*limit) + 1 // a call after A
		for _, bFirst := range []bool{true, false} {
			name := fmt.Sprintf("%v, B first %v", rule, bFirst)
			fake := clock.NewFake()
			fake.Set(t0)
			lim, err := v.New(rule, admit.WithClock(fake))
			require.NoError(t, err)
			first := lim.Allow("k")
			require.Equal(t, replay(rule, call{t0, 1})[0], first, name)

			fake.Set(tA)
			resumeA := pausedCall(t, v, lim, "k", 1)
			fake.Set(te + time.Second)
			require.Equal(t, 1, v.Store.EvictAt(lim, te), "%s: k is fresh at %v and must be evicted", name, te)
			var got []admit.Decision
			var orders [][]call
			if bFirst {
				fake.Set(te)
				b := lim.Allow("k")
				a := resumeA()
				got = []admit.Decision{first, b, a}
				orders = [][]call{
					{{t0, 1}, {te, 1}, {tA, 1}}, // B, then A on B's state
					{{t0, 1}, {tA, 1}, {te, 1}}, // A before the eviction, then B
				}
			} else {
				a := resumeA()
				got = []admit.Decision{first, a}
				orders = [][]call{
					{{t0, 1}, {te, 1}}, // A after the eviction, at the floor
					{{t0, 1}, {tA, 1}}, // A before the eviction
				}
			}
			fake.Set(later)
			got = append(got, lim.Allow("k"))
			matched := false
			for i, order := range orders {
				order = append(order, call{later, 1})
				want := replay(rule, order...)
				if i == 1 {
					// A before the eviction is possible only if it published
					// nothing, and then the order of B's and A's Decisions
					// swaps back to the order they were observed in.
					a := want[1]
					if a.Allowed {
						continue
					}
					if bFirst {
						want[1], want[2] = want[2], want[1]
					}
				}
				if slices.Equal(got, want) {
					matched = true
					break
				}
			}
			if !matched {
				t.Errorf("%s: Decisions %+v match no eviction-free order of the calls %v (A reads %v, the eviction %v, the last call %v)",
					name, got, orders, tA, te, later)
			}
		}
	}
}

// testEvictionHammer (docs/reliability.md C13): goroutines hammer a few keys while a
// sweeper evicts at the current reading as fast as it can, in phases of a
// frozen clock that moves between phases by steps that make keys fresh. With
// demand far above supply, each key must admit in each phase exactly what
// the eviction-free kernel admits at that reading: eviction may neither add
// nor lose budget.
func testEvictionHammer(t *testing.T, v Variant, alg admit.Algorithm) {
	needHooks(t, v, false)
	const (
		goroutines = 4
		keys       = 4
		limit      = 20
	)
	phases := 12
	if raceEnabled || testing.Short() {
		phases = 6
	}
	rule := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Second}
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := v.New(rule, admit.WithClock(fake), admit.WithShards(1))
	require.NoError(t, err)
	store := lim.(storeLimiter)
	want := NewOracle(rule)
	steps := []time.Duration{0, rule.Window / 3, rule.Window, horizon(rule) + time.Second}
	evicted := 0
	for p := range phases {
		fake.Advance(steps[p%len(steps)])
		now := fake.Now()
		var (
			start = make(chan struct{})
			stop  = make(chan struct{})
			wg    sync.WaitGroup
			mu    sync.Mutex
			got   [keys]int
		)
		for g := range goroutines {
			wg.Go(func() {
				<-start
				var local [keys]int
				for i := range 2 * limit * keys {
					k := (g + i) % keys
					if lim.Allow("key-" + strconv.Itoa(k)).Allowed {
						local[k]++
					}
				}
				mu.Lock()
				for k := range keys {
					got[k] += local[k]
				}
				mu.Unlock()
			})
		}
		sweeper := make(chan int)
		go func() {
			n := 0
			for i := 0; i < 1000; i++ {
				select {
				case <-stop:
					sweeper <- n
					return
				default:
				}
				if i%2 == 0 {
					n += v.Store.EvictAt(lim, now)
				} else {
					n += store.Sweep() // at the clock's reading minus the slack: legal too
				}
				runtime.Gosched()
			}
			<-stop
			sweeper <- n
		}()
		close(start)
		wg.Wait()
		close(stop)
		evicted += <-sweeper
		for k := range keys {
			exp := 0
			for want.Allow("key-"+strconv.Itoa(k), now, 1).Allowed {
				exp++
			}
			assert.Equal(t, exp, got[k], "%v phase %d (t=%v): admitted for key-%d", rule, p, now, k)
		}
	}
	t.Logf("%v: %d evictions during the hammer", rule, evicted)
}
