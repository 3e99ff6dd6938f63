package atomic_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
)

// TestLimitsEvictionRace replays the eviction race on a composite key: a
// call loads the key's cell, the key is evicted (fresh) and created again
// by calls that spend its new budget, and then the first call goes on. It
// must not decide on the evicted cell, an orphan with a budget of its own:
// it finds the tombstone, looks the key up again and is denied.
func TestLimitsEvictionRace(t *testing.T) {
	limits := mustLimits(t, "token-bucket,2,1s + fixed-window,3,1m")
	for _, form := range compositeForms {
		for _, n := range []int{1, 2} { // the pair's fast path, and the general one
			fake := clock.NewFake()
			keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
			require.NoError(t, err)
			name := fmt.Sprintf("%s AllowN(k, %d)", admitatomic.LimitsForm(keyed), n)
			require.True(t, keyed.Allow("k").Allowed)
			fake.Advance(time.Hour) // fresh
			admitted := 0
			admitatomic.Hooks.Pause(keyed, func() {
				require.Equal(t, 1, admitatomic.Hooks.EvictAt(keyed, fake.Now()), "%s: the key is evicted under the call", name)
				for keyed.Allow("k").Allowed {
					admitted++
				}
			})
			if keyed.AllowN("k", n).Allowed {
				admitted += n
			}
			assert.Equal(t, 2, admitted, "%s: one budget for the key, the new cell's", name)
			assert.Equal(t, 1, keyed.(admit.CompositeStore).Len(), name)
		}
	}
}

// TestLimitsEvictionHammer: goroutines spend the budgets of a few keys
// while another sweeps the store, phase after phase, the clock frozen in a
// phase and moved on by an hour between phases, so that every key is
// fresh, and evicted, while calls race on it. Each key admits exactly the
// smallest burst in each phase: an admission on an evicted cell would add
// one, a lost one would take one away.
func TestLimitsEvictionHammer(t *testing.T) {
	limits := mustLimits(t, "token-bucket,5,1s + fixed-window,8,1m")
	phases := 30
	if testing.Short() {
		phases = 5
	}
	keys := []string{"a", "b", "c", "d"}
	for _, form := range compositeForms {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		store := keyed.(admit.CompositeStore)
		evicted := 0
		for phase := range phases {
			fake.Advance(time.Hour)
			counts := make([]atomic.Int64, len(keys))
			var done atomic.Bool
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 40 {
						k := (g + i) % len(keys)
						if keyed.Allow(keys[k]).Allowed {
							counts[k].Add(1)
						}
					}
				})
			}
			sweeper := make(chan int)
			go func() {
				n := 0
				for !done.Load() {
					n += store.Sweep()
				}
				sweeper <- n
			}()
			wg.Wait()
			done.Store(true)
			evicted += <-sweeper
			for k := range keys {
				for keyed.Allow(keys[k]).Allowed { // what the goroutines left
					counts[k].Add(1)
				}
				assert.Equal(t, int64(5), counts[k].Load(), "%s phase %d: admissions on %q", admitatomic.LimitsForm(keyed), phase, keys[k])
			}
		}
		t.Logf("%s: %d evictions over %d phases", admitatomic.LimitsForm(keyed), evicted, phases)
	}
}

// TestLimitsFullStore: a new key refused by a full store is denied with the
// wait until an idle key can make room, and names the first rule of the
// smallest Limit, as the map store's does; once the stored key is fresh,
// the new key takes its room.
func TestLimitsFullStore(t *testing.T) {
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,5,1h + fixed-window,5,1m")
	for _, form := range compositeForms {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake), admit.WithMaxKeys(1), admit.WithShards(1))
		require.NoError(t, err)
		store := keyed.(admit.CompositeStore)
		require.True(t, keyed.Allow("a").Allowed)
		d, which := store.AllowNWhich("b", 1)
		assert.False(t, d.Allowed, "%s: the store is full", form.name)
		assert.Positive(t, d.RetryAfter, form.name)
		assert.Equal(t, 1, which, "%s: the first rule of the smallest Limit", form.name)
		assert.Equal(t, 5, d.Limit, form.name)
		fake.Advance(2 * time.Hour)
		d, _ = store.AllowNWhich("b", 1)
		assert.True(t, d.Allowed, "%s: a fresh key made room", form.name)
		assert.Equal(t, 1, store.Len(), form.name)
	}
}
