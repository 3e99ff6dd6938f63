// Package conformance is the behavioural suite every admit variant must pass:
// the same scenarios, the same differential check against the pure kernels with
// time moving between calls, and the same concurrency checks, run over a table
// of constructors. A new variant is covered by calling [Run] from its tests.
// Keyed stores that evict idle keys also pass the keyed-store checks (lossless
// eviction, the deterministic eviction races, bounded memory, the full-store
// policy), for which their tests wire [StoreHooks]. Composite limits
// (admit.Limits of several rules) have their own suite, [RunComposite],
// which checks them against kernel.Composite, and stores that move keys to
// one another (a Reload's moves) the migration checks, [RunMigration].
package conformance

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
)

// Variant describes one concurrency variant under test.
type Variant struct {
	Name string
	// New and NewLimiter are the variant's constructors. NewLimiter may be nil
	// for a variant that offers only keyed limiters. New is erased to
	// admit.KeyedLimiter, since a remote variant's limiters are no
	// admit.Store: pass a local variant's as Keyed(locked.New).
	New        func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error)
	NewLimiter func(admit.Rule, ...admit.Option) (admit.Limiter, error)
	// Supports reports whether the variant implements an algorithm; for the
	// others its constructors must return an error wrapping admit.ErrUnsupported.
	Supports func(admit.Algorithm) bool
	// Takes, when not nil, reports whether New takes a rule of an algorithm
	// the variant supports: New must refuse the others with an error
	// wrapping admit.ErrUnsupported (atomic's table refuses the sliding
	// counters whose state does not pack in its word). NewLimiter must take
	// every rule of a supported algorithm. nil: New takes every one.
	Takes func(admit.Rule) bool
	// AllowAllocs is the most allocations one admitted Allow on an existing key
	// may make (0 for mutex and packed-word variants).
	AllowAllocs float64

	// HashedKeys reports whether New accepts admit.WithHashedKeys; if not,
	// it must return an error wrapping admit.ErrUnsupported for it.
	HashedKeys bool

	// Remote marks a variant whose state lives in another process (a Redis
	// server): its allocations are not counted, since the network client's
	// are not its own, and it has no local store, so it must refuse the
	// keyed-store options (WithShards, WithMaxKeys, WithHashedKeys) with an
	// error wrapping admit.ErrUnsupported. Store must be nil.
	Remote bool

	// Store, when not nil, gives the keyed-store checks (eviction, bounded
	// memory, the full-store policy) their test-only access to the store
	// behind New's limiters, which must then also have the methods
	// Len() int and Sweep() int. See [StoreHooks].
	Store *StoreHooks
}

// keyedReserver is a keyed limiter that hands out reservations: every local
// store (admit.Store, admit.CompositeStore), whose token buckets reserve
// ahead and whose windows reserve nothing ahead, and a remote variant's
// reservers. The suite runs over local and remote variants alike, whose
// constructors return different types (Variant.New erases them to
// admit.KeyedLimiter), so it reaches the methods a remote limiter may lack
// through interfaces of its own.
type keyedReserver interface {
	admit.KeyedLimiter
	ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool)
	CancelReservation(key string, r admit.Reservation) bool
}

// Keyed erases the result type of a keyed constructor (admit.Store for the
// local variants' New, a type of its own for a remote variant's), for
// Variant.New.
func Keyed[L admit.KeyedLimiter](f func(admit.Rule, ...admit.Option) (L, error)) func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error) {
	return func(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		lim, err := f(rule, opts...)
		if err != nil {
			return nil, err
		}
		return lim, nil
	}
}

// KeyedLimits is Keyed for a NewLimits, for CompositeVariant.NewLimits.
func KeyedLimits[L admit.KeyedLimiter](f func(admit.Limits, ...admit.Option) (L, error)) func(admit.Limits, ...admit.Option) (admit.KeyedLimiter, error) {
	return func(limits admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
		lim, err := f(limits, opts...)
		if err != nil {
			return nil, err
		}
		return lim, nil
	}
}

// Algorithms lists every algorithm, in order.
var Algorithms = []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter}

// Run runs the whole suite against v: the keyed-store checks (store.go,
// eviction.go, fullstore.go, memory.go, keys.go, stats.go) too if v.Store
// is set.
func Run(t *testing.T, v Variant) {
	t.Run("Errors", func(t *testing.T) { testErrors(t, v) })
	t.Run("StoreOptions", func(t *testing.T) { testStoreOptions(t, v) })
	for _, alg := range Algorithms {
		if !v.Supports(alg) {
			continue
		}
		t.Run("algo="+alg.String(), func(t *testing.T) {
			runChecks(t, v, alg, testWalkthrough, testDifferential, testKeyIsolation,
				testKeyCopied, testKeyBufferReused, testFrozenClockExact)
			if !v.Remote {
				runChecks(t, v, alg, testAllocs)
			}
			runChecks(t, v, alg, testReserveAsAllow, testCancel, testReset)
			if v.Store != nil {
				runStore(t, v, alg)
				runKeys(t, v, alg)
			}
		})
	}
}

// RunStore runs only the keyed-store checks (eviction, bounded memory, the
// full-store policy, the key count) against v, whose Store must be set: for
// a variant whose tests call [Run] without Store, so that nothing runs twice.
func RunStore(t *testing.T, v Variant) {
	if v.Store == nil {
		t.Fatalf("conformance.RunStore(%s): the Variant has no Store hooks", v.Name)
	}
	for _, alg := range Algorithms {
		if v.Supports(alg) {
			t.Run("algo="+alg.String(), func(t *testing.T) {
				runStore(t, v, alg)
				runKeys(t, v, alg)
			})
		}
	}
}

// A check is one check of a variant for one algorithm.
type check func(t *testing.T, v Variant, alg admit.Algorithm)

// runChecks runs each of checks as a subtest named for its function without
// the prefix "test": testChurn runs as "Churn".
func runChecks(t *testing.T, v Variant, alg admit.Algorithm, checks ...check) {
	t.Helper()
	for _, c := range checks {
		name := runtime.FuncForPC(reflect.ValueOf(c).Pointer()).Name()
		name = name[strings.LastIndex(name, ".test")+len(".test"):]
		t.Run(name, func(t *testing.T) { c(t, v, alg) })
	}
}

func mustRule(t testing.TB, text string) admit.Rule {
	t.Helper()
	r, err := admit.ParseRule(text)
	require.NoError(t, err)
	return r
}

func testErrors(t *testing.T, v Variant) {
	good := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}
	bad := admit.Rule{Algorithm: admit.TokenBucket, Limit: 0, Window: time.Second}
	_, err := v.New(bad)
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = v.New(good, admit.WithClock(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	_, err = v.New(good, nil)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	if v.NewLimiter != nil {
		_, err = v.NewLimiter(bad)
		assert.ErrorIs(t, err, admit.ErrInvalidRule)
		_, err = v.NewLimiter(good, admit.WithClock(nil))
		assert.ErrorIs(t, err, admit.ErrInvalidOption)
	}
	for _, alg := range Algorithms {
		if v.Supports(alg) {
			continue
		}
		r := admit.Rule{Algorithm: alg, Limit: 5, Window: time.Second}
		_, err := v.New(r)
		assert.ErrorIs(t, err, admit.ErrUnsupported, "New(%v)", r)
		if v.NewLimiter != nil {
			_, err = v.NewLimiter(r)
			assert.ErrorIs(t, err, admit.ErrUnsupported, "NewLimiter(%v)", r)
		}
	}
}

// step is one scripted call: at the fake clock's time at, AllowN(n) on key.
type step struct {
	at   time.Duration
	key  string
	n    int
	want admit.Decision
}

func allowed(limit, remaining int, reset time.Duration) admit.Decision {
	return admit.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func denied(limit int, retry, reset time.Duration) admit.Decision {
	return admit.Decision{Limit: limit, RetryAfter: retry, ResetAfter: reset}
}

// testWalkthrough replays the seed notes' walkthrough (5 per 10s, 2 per 10s)
// and the boundary burst of their part four through the variant's keyed limiter.
func testWalkthrough(t *testing.T, v Variant, alg admit.Algorithm) {
	s := time.Second
	var steps []step
	switch alg {
	case admit.TokenBucket:
		steps = []step{
			{0, "alice", 1, allowed(5, 4, 2*s)},
			{0, "alice", 1, allowed(5, 3, 4*s)},
			{0, "alice", 1, allowed(5, 2, 6*s)},
			{0, "alice", 1, allowed(5, 1, 8*s)},
			{0, "alice", 1, allowed(5, 0, 10*s)},
			{0, "alice", 1, denied(5, 2*s, 10*s)},
			{2 * s, "alice", 1, allowed(5, 0, 10*s)},
			{2 * s, "bob", 1, allowed(5, 4, 2*s)},
		}
	case admit.FixedWindow:
		steps = []step{
			{2 * s, "alice", 1, allowed(5, 4, 8*s)},
			{2 * s, "alice", 4, allowed(5, 0, 8*s)},
			{2 * s, "alice", 1, denied(5, 8*s, 8*s)},
			{10*s - 1, "alice", 1, denied(5, 1, 1)},
			{10 * s, "alice", 1, allowed(5, 4, 10*s)},
		}
	case admit.SlidingLog:
		steps = []step{
			{0, "alice", 3, allowed(5, 2, 10*s)},
			{4 * s, "alice", 2, allowed(5, 0, 10*s)},
			{4 * s, "alice", 1, denied(5, 6*s, 10*s)},
			{10*s - 1, "alice", 1, denied(5, 1, 4*s+1)},
			{10 * s, "alice", 4, denied(5, 4*s, 4*s)},
			{10 * s, "alice", 3, allowed(5, 0, 10*s)},
		}
	case admit.SlidingCounter:
		steps = []step{
			{5 * s, "alice", 5, allowed(5, 0, 15*s)},
			// At 12.5s the previous window (5 admitted) still covers 75%: 3.75,
			// so one more fits (4.75) and a second must wait until the weight
			// falls to 3 at 14s. The key is idle once window [10s, 20s) has
			// rolled out too, at 30s.
			{12*s + 500*time.Millisecond, "alice", 1, allowed(5, 0, 17*s+500*time.Millisecond)},
			{12*s + 500*time.Millisecond, "alice", 1, denied(5, 1500*time.Millisecond, 17*s+500*time.Millisecond)},
		}
	}
	runSteps(t, v, admit.Rule{Algorithm: alg, Limit: 5, Window: 10 * s}, steps)

	// Part four of the walkthrough: 3 per 10s, 3 requests at 9s, 3 at 10s.
	burst := map[admit.Algorithm][2]int{
		admit.TokenBucket: {3, 0}, admit.FixedWindow: {3, 3}, admit.SlidingLog: {3, 0}, admit.SlidingCounter: {3, 0},
	}[alg]
	fake := clock.NewFake()
	lim, err := v.New(admit.Rule{Algorithm: alg, Limit: 3, Window: 10 * s}, admit.WithClock(fake))
	require.NoError(t, err)
	got := [2]int{}
	for i, at := range []time.Duration{9 * s, 10 * s} {
		fake.Set(at)
		for range 3 {
			if lim.Allow("k").Allowed {
				got[i]++
			}
		}
	}
	assert.Equal(t, burst, got, "%v: admitted at 9s and at 10s", alg)
}

func runSteps(t *testing.T, v Variant, rule admit.Rule, steps []step) {
	t.Helper()
	fake := clock.NewFake()
	lim, err := v.New(rule, admit.WithClock(fake))
	require.NoError(t, err)
	for i, st := range steps {
		fake.Set(st.at)
		if got := lim.AllowN(st.key, st.n); got != st.want {
			t.Errorf("%v step %d: AllowN(t=%v, %q, %d) = %+v, want %+v", rule, i, st.at, st.key, st.n, got, st.want)
		}
	}
}

func testKeyIsolation(t *testing.T, v Variant, alg admit.Algorithm) {
	fake := clock.NewFake()
	lim, err := v.New(admit.Rule{Algorithm: alg, Limit: 2, Window: time.Minute}, admit.WithClock(fake))
	require.NoError(t, err)
	require.True(t, lim.AllowN("alice", 2).Allowed)
	assert.False(t, lim.Allow("alice").Allowed, "alice has spent her limit")
	assert.True(t, lim.AllowN("bob", 2).Allowed, "bob's budget is his own")
	assert.True(t, lim.AllowN("", 2).Allowed, "the empty key is a key like any other")
	assert.True(t, lim.AllowN("alice\x00", 2).Allowed, "keys are compared as whole strings")
}

// testKeyCopied checks that the limiter keeps its own copy of a key: a caller
// that builds keys in a reused buffer must not rename the stored state.
func testKeyCopied(t *testing.T, v Variant, alg admit.Algorithm) {
	fake := clock.NewFake()
	lim, err := v.New(admit.Rule{Algorithm: alg, Limit: 1, Window: time.Minute}, admit.WithClock(fake))
	require.NoError(t, err)
	buf := []byte("key-1")
	key := unsafe.String(&buf[0], len(buf)) // aliases buf, as pooled-buffer callers do
	require.True(t, lim.Allow(key).Allowed)
	buf[4] = '2' // key now reads "key-2"
	assert.False(t, lim.Allow("key-1").Allowed, "key-1 spent its limit before the buffer changed")
	assert.True(t, lim.Allow("key-2").Allowed, "key-2 was never used")
}

// testKeyBufferReused checks that the limiter's copy of a key stays its
// own after the key is used again: a key is stored from one buffer, then
// spent to its limit, and for a token bucket reserved beyond it and probed,
// through the same bytes in another buffer, which the caller then rewrites.
// A store that let a later call's string replace its copy would now hold the
// key under the rewritten bytes: the key would get a fresh budget, the
// rewritten key would inherit its state, and its reservation could no longer
// be cancelled. Each algorithm runs with a small limit; the sliding counter
// also with one too wide to pack into a word (which atomic's table refuses).
func testKeyBufferReused(t *testing.T, v Variant, alg admit.Algorithm) {
	texts := map[admit.Algorithm][]string{
		admit.TokenBucket:    {"token-bucket,4,1m", "token-bucket,3,10s"}, // a packed word, and a fraction
		admit.FixedWindow:    {"fixed-window,4,1m"},
		admit.SlidingLog:     {"sliding-log,4,1m"},
		admit.SlidingCounter: {"sliding-counter,4,1m", "sliding-counter,70000,1m"},
	}[alg]
	for _, text := range texts {
		t.Run(text, func(t *testing.T) {
			rule := mustRule(t, text)
			fake := clock.NewFake()
			fake.Set(time.Hour)
			lim := newTaken(t, v, rule, admit.WithClock(fake))
			if lim == nil {
				return // refused, as the variant says
			}
			bufA, bufB := []byte("key-1"), []byte("key-1")
			keyA := unsafe.String(&bufA[0], len(bufA)) // stores the key
			keyB := unsafe.String(&bufB[0], len(bufB)) // the same key, later, from another buffer
			require.True(t, lim.Allow(keyA).Allowed, "%v: Allow(key-1) from buffer A", rule)
			require.True(t, lim.Allow(keyB).Allowed, "%v: Allow(key-1) from buffer B", rule)
			require.True(t, lim.AllowN(keyB, rule.Limit-2).Allowed, "%v: AllowN(key-1, %d) from buffer B", rule, rule.Limit-2)
			var (
				kr  keyedReserver
				res admit.Reservation
			)
			if r, ok := lim.(keyedReserver); ok && alg == admit.TokenBucket {
				kr = r
				res, ok = kr.ReserveN(keyB, 1, time.Hour)
				require.True(t, ok, "%v: ReserveN(key-1, 1) from buffer B", rule)
				require.Positive(t, res.Delay, "%v: ReserveN(key-1, 1) on an empty bucket must wait", rule)
			}
			require.False(t, lim.Allow(keyB).Allowed, "%v: Allow(key-1) from buffer B once the limit is spent", rule)
			copy(bufB, "key-2") // keyB now reads "key-2"; bufA is left alone
			assert.False(t, lim.Allow("key-1").Allowed, "%v: key-1 spent its limit before buffer B changed", rule)
			assert.True(t, lim.AllowN("key-2", rule.Limit).Allowed, "%v: key-2 was never used: its whole limit is free", rule)
			if kr != nil {
				assert.True(t, kr.CancelReservation("key-1", res), "%v: key-1's reservation, cancelled on key-1", rule)
				again, ok := kr.ReserveN("key-1", 1, time.Hour)
				assert.True(t, ok && again.Delay == res.Delay, "%v: ReserveN(key-1, 1) after the cancellation = %v, %t; want the cancelled one's wait, %v", rule, again.Delay, ok, res.Delay)
			}
		})
	}
}

// testFrozenClockExact: with the clock frozen, 32 goroutines on 8 keys, released
// together, ask for far more than the limit with mixed weights; every key must
// admit exactly its Limit in weight, no more (over-admission) and no less.
func testFrozenClockExact(t *testing.T, v Variant, alg admit.Algorithm) {
	const goroutines, keys, limit = 32, 8, 200
	fake := clock.NewFake()
	fake.Set(time.Hour)
	rule := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Minute}
	lim, err := v.New(rule, admit.WithClock(fake))
	require.NoError(t, err)
	var single admit.Limiter
	if v.NewLimiter != nil {
		single, err = v.NewLimiter(rule, admit.WithClock(fake))
		require.NoError(t, err)
	}
	var (
		start     = make(chan struct{})
		wg        sync.WaitGroup
		mu        sync.Mutex
		admitted  = map[string]int{}
		singleSum int
	)
	for g := range goroutines {
		wg.Go(func() {
			<-start
			local := map[string]int{}
			localSingle := 0
			for i := range 60 {
				n := 1 + (g+i)%3 // weights 1, 2, 3
				key := fmt.Sprintf("key-%d", (g+i)%keys)
				if d := lim.AllowN(key, n); d.Allowed {
					local[key] += n
				}
				if single != nil && single.AllowN(n).Allowed {
					localSingle += n
				}
			}
			mu.Lock()
			for k, n := range local {
				admitted[k] += n
			}
			singleSum += localSingle
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	// Demand per key is 32×60/8 requests of weight 2 on average: far above the
	// limit, and weights 1 fill any gap a weight 3 leaves, so exactly limit pass.
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		assert.Equal(t, limit, admitted[key], "%v: weight admitted for %s", rule, key)
	}
	if single != nil {
		assert.Equal(t, limit, singleSum, "%v: weight admitted by the single limiter", rule)
	}
}

func testAllocs(t *testing.T, v Variant, alg admit.Algorithm) {
	fake := clock.NewFake()
	rule := admit.Rule{Algorithm: alg, Limit: 1 << 16, Window: time.Hour}
	if !v.takes(rule) {
		rule.Limit = kernel.MaxWordLimit // a sliding counter that packs, for a variant that packs only those
	}
	lim, err := v.New(rule, admit.WithClock(fake))
	require.NoError(t, err)
	lim.Allow("hot") // create the key (and a sliding log's ring)
	allocs := testing.AllocsPerRun(1000, func() {
		if !lim.Allow("hot").Allowed {
			panic("the limit is large enough for every call")
		}
	})
	assert.LessOrEqual(t, allocs, v.AllowAllocs, "%v: allocations per admitted Allow on an existing key", rule)
	denyRule := admit.Rule{Algorithm: alg, Limit: 1, Window: time.Hour}
	lim, err = v.New(denyRule, admit.WithClock(fake))
	require.NoError(t, err)
	lim.Allow("hot")
	allocs = testing.AllocsPerRun(1000, func() {
		if lim.Allow("hot").Allowed {
			panic("the limit is spent")
		}
	})
	assert.Zero(t, allocs, "%v: allocations per denied Allow", denyRule)
	if v.NewLimiter != nil {
		single, err := v.NewLimiter(denyRule, admit.WithClock(fake))
		require.NoError(t, err)
		single.Allow()
		assert.Zero(t, testing.AllocsPerRun(1000, func() { single.Allow() }), "%v: allocations per single-key Allow", denyRule)
	}
	if alg == admit.TokenBucket {
		testReserveAllocs(t, v, denyRule, fake)
	}
}

// withFactory is policy.WithFactory(f), made here without importing policy
// (which imports the variants whose tests run this suite).
func withFactory(f func(admit.Rule, ...admit.Option) (admit.KeyedLimiter, error)) admit.Option {
	return plumb.NewOption(func(s *plumb.Settings) error { s.Factory = f; return nil })
}
