package conformance

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// resetter is a keyed limiter that can forget a key: every local store
// (admit.Store, admit.CompositeStore), and no remote one.
type resetter interface{ Reset(key string) }

// testReset checks Reset on a keyed limiter that offers it: a reset key
// decides as a new one at the same reading, other keys keep their budgets,
// a reservation made before a reset cannot be cancelled after it, a reset
// racing a hammer on its key counts neither twice nor not at all, and over
// random operations with time moving the limiter equals the kernels with a
// reset replaced by a fresh state. Every local keyed store (README.md: "in
// every keyed store" of atomic, locked and sharded) must offer it; a Remote
// variant need not (redisstore's Keyed has none, as a failed reset would be
// silent).
func testReset(t *testing.T, v Variant, alg admit.Algorithm) {
	rule := admit.Rule{Algorithm: alg, Limit: 3, Window: 10 * time.Second}
	fake := clock.NewFake()
	fake.Set(time.Hour)
	lim, err := v.New(rule, admit.WithClock(fake))
	require.NoError(t, err)
	r, ok := lim.(resetter)
	if !ok {
		require.True(t, v.Remote, "%s.New(%v): a %T, with no Reset", v.Name, rule, lim)
		t.Skip("no Reset")
	}
	t.Run("Fresh", func(t *testing.T) {
		for _, k := range []string{"a", "b"} {
			for i := range 3 {
				require.True(t, lim.Allow(k).Allowed, "%s: admission %d", k, i+1)
			}
			require.False(t, lim.Allow(k).Allowed, k)
		}
		r.Reset("a")
		r.Reset("never-seen")
		for i := range 3 {
			d := lim.Allow("a")
			require.True(t, d.Allowed, "after Reset: admission %d", i+1)
			assert.Equal(t, 2-i, d.Remaining)
		}
		assert.False(t, lim.Allow("a").Allowed, "a reset key has one fresh budget, not more")
		assert.False(t, lim.Allow("b").Allowed, "Reset of a leaves b alone")
		assert.True(t, lim.Allow("never-seen").Allowed)
	})
	t.Run("Reservation", func(t *testing.T) {
		if alg != admit.TokenBucket {
			t.Skip("only a token bucket reserves ahead")
		}
		res, ok := lim.(keyedReserver)
		if !ok {
			t.Skip("no ReserveN")
		}
		for range 3 {
			require.True(t, lim.Allow("w").Allowed)
		}
		rv, ok := res.ReserveN("w", 1, time.Minute)
		require.True(t, ok)
		require.Positive(t, rv.Delay, "the reservation waits")
		r.Reset("w")
		assert.False(t, res.CancelReservation("w", rv), "a reservation made before a reset cannot be cancelled after it")
		for i := range 3 {
			require.True(t, lim.Allow("w").Allowed, "after Reset: admission %d", i+1)
		}
		assert.False(t, lim.Allow("w").Allowed)
	})
	t.Run("Race", func(t *testing.T) {
		// A frozen clock: Limit 40 admissions before the reset at most, 40
		// after it exactly, since the hammer goes on long after both.
		rule := admit.Rule{Algorithm: alg, Limit: 40, Window: time.Hour}
		lim, err := v.New(rule, admit.WithClock(fake))
		require.NoError(t, err)
		r := lim.(resetter)
		var admitted atomic.Int64
		var once sync.Once
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 200 {
					if lim.Allow("hot").Allowed {
						if n := admitted.Add(1); n == 20 {
							once.Do(func() { r.Reset("hot") })
						}
					}
				}
			})
		}
		wg.Wait()
		total := admitted.Load()
		assert.GreaterOrEqual(t, total, int64(20+40), "the reset gave one fresh budget")
		assert.LessOrEqual(t, total, int64(40+40), "one reset gives one fresh budget, no more")
	})
	t.Run("Differential", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			rule := drawTaken(rt, v, alg)
			fake := clock.NewFake()
			fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
			lim, err := v.New(rule, admit.WithClock(fake))
			require.NoError(rt, err)
			r := lim.(resetter)
			oracle := NewOracle(rule)
			keys := []string{"a", "b"}
			for i := range rapid.IntRange(1, 50).Draw(rt, "ops") {
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				switch rapid.IntRange(0, 5).Draw(rt, "op") {
				case 0:
					fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*rule.Window)).Draw(rt, "advance")))
				case 1:
					r.Reset(key)
					oracle = resetOracle(oracle, rule, key)
				default:
					n := rapid.IntRange(0, rule.Limit).Draw(rt, "n")
					want := oracle.Allow(key, fake.Now(), n)
					if got := lim.AllowN(key, n); got != want {
						rt.Fatalf("%s op %d: AllowN(t=%v, %q, %d) = %+v, kernels %+v", rule, i, fake.Now(), key, n, got, want)
					}
				}
			}
		})
	})
}

// resetOracle returns o with key's state forgotten (a fresh key's).
func resetOracle(o Oracle, _ admit.Rule, key string) Oracle {
	o.(interface{ forget(key string) }).forget(key)
	return o
}
