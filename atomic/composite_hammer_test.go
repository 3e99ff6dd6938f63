package atomic_test

import (
	"fmt"
	"slices"
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

// allowFunc is one key of a composite, keyed or single-key.
type allowFunc func(n int) admit.Decision

// compositeKeys returns, for each form, key "k" of a keyed composite store
// of limits and a single-key composite of limits, on clock fake, with the
// keyed store for the callers that need it (nil for the single key).
func compositeKeys(t *testing.T, limits admit.Limits, fake *clock.Fake) (names []string, allows []allowFunc, stores []admit.KeyedLimiter) {
	for _, form := range compositeForms {
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		single, err := admitatomic.NewLimitsLimiterForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		names = append(names, "keyed "+admitatomic.LimitsForm(keyed), "single "+admitatomic.LimitsForm(single))
		allows = append(allows, func(n int) admit.Decision {
			if n == 1 {
				return keyed.Allow("k")
			}
			return keyed.AllowN("k", n)
		}, func(n int) admit.Decision {
			if n == 1 {
				return single.Allow()
			}
			return single.AllowN(n)
		})
		stores = append(stores, keyed, nil)
	}
	return names, allows, stores
}

// hammerScale returns goroutines × calls, smaller under -short.
func hammerScale() (goroutines, calls int) {
	if testing.Short() {
		return 50, 20
	}
	return 200, 50
}

// TestLimitsHammerFrozen: goroutines racing on one key of a composite on a
// frozen clock admit exactly the smallest burst of its rules, never one
// more (an update of one part without the other, or a decision on a torn
// pair, would let more through) and never one less (a lost admission).
func TestLimitsHammerFrozen(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"token-bucket,50,1s + fixed-window,70,1m", 50},
		{"fixed-window,70,1m + token-bucket,100,1s", 70},
		{"token-bucket,80,1s + sliding-counter,60,1m", 60},
		{"token-bucket,90,1s + token-bucket,40,1m + fixed-window,70,1h", 40},
	} {
		limits := mustLimits(t, c.text)
		fake := clock.NewFake()
		fake.Set(time.Hour)
		names, allows, _ := compositeKeys(t, limits, fake)
		for i, allow := range allows {
			goroutines, calls := hammerScale()
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for j := range calls {
						n := 1
						if (g+j)%7 == 0 {
							n = 2 // the general path too
						}
						if allow(n).Allowed {
							admitted.Add(int64(n))
						}
					}
				})
			}
			wg.Wait()
			// Fill up what a final request for 2 could not take.
			for allow(1).Allowed {
				admitted.Add(1)
			}
			assert.Equal(t, int64(c.want), admitted.Load(), "%s (%s): admitted on a frozen clock", c.text, names[i])
		}
	}
}

// TestLimitsHammerMoving: goroutines racing on one key while they move the
// clock on between calls. Each admission's reading lies between the clock
// read before and after the call; every rule's interval bound then holds
// for the admissions known to lie within any interval: for the token
// bucket, at most L + floor(d·L/W) over any span of length d between an
// admission's earliest reading and another's latest; for the fixed window,
// at most L in each window.
func TestLimitsHammerMoving(t *testing.T) {
	limits := mustLimits(t, "token-bucket,20,100ms + fixed-window,150,1s")
	goroutines, calls := 8, 2000
	if testing.Short() {
		calls = 500
	}
	const step = time.Millisecond
	fake := clock.NewFake()
	names, allows, _ := compositeKeys(t, limits, fake)
	for i, allow := range allows {
		fake.Set(0)
		var mu sync.Mutex
		var spans [][2]time.Duration // [earliest, latest] reading of each admission
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				var mine [][2]time.Duration
				for j := range calls {
					if (g+j)%10 == 0 {
						fake.Advance(step)
					}
					before := fake.Now()
					if allow(1).Allowed {
						mine = append(mine, [2]time.Duration{before, fake.Now()})
					}
				}
				mu.Lock()
				spans = append(spans, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		require.NotEmpty(t, spans, names[i])
		checkBucketBound(t, names[i], limits.At(0), spans)
		checkWindowBound(t, names[i], limits.At(1), spans)
	}
}

// checkBucketBound checks a token bucket's interval bound on the
// admissions whose readings lie within spans.
func checkBucketBound(t *testing.T, name string, r admit.Rule, spans [][2]time.Duration) {
	t.Helper()
	byStart := slices.Clone(spans)
	slices.SortFunc(byStart, func(a, b [2]time.Duration) int { return int(a[0] - b[0]) })
	ends := make([]time.Duration, 0, len(byStart))
	for i := len(byStart) - 1; i >= 0; i-- {
		from := byStart[i][0]
		// The admissions from i on began no earlier than from; count those
		// that ended by each end.
		ends = append(ends, byStart[i][1])
		slices.Sort(ends)
		for k, to := range ends {
			if to < from {
				continue
			}
			bound := r.Limit + int(int64(to-from)*int64(r.Limit)/int64(r.Window))
			if k+1 > bound {
				t.Fatalf("%s: %d admissions within [%v, %v], more than %v allows (%d)", name, k+1, from, to, r, bound)
			}
		}
	}
}

// checkWindowBound checks a fixed window's bound on the admissions whose
// readings lie within spans: at most Limit in each window.
func checkWindowBound(t *testing.T, name string, r admit.Rule, spans [][2]time.Duration) {
	t.Helper()
	counts := map[time.Duration]int{}
	for _, s := range spans {
		if w := s[0] / r.Window; s[1]/r.Window == w {
			counts[w]++
		}
	}
	for w, n := range counts {
		assert.LessOrEqual(t, n, r.Limit, "%s: admissions in window %d of %v", name, w, r)
	}
}

// TestLimitsResetHammer: Reset is linearizable. Goroutines admit on one key
// of a frozen clock while another resets the key each time its budget is
// spent: every reset gives exactly one fresh budget, so the admissions
// total exactly (resets+1) times the smallest burst, none lost to a reset
// and none counted twice.
func TestLimitsResetHammer(t *testing.T) {
	limits := mustLimits(t, "token-bucket,50,1s + fixed-window,70,1m")
	for _, form := range compositeForms {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		resets := 20
		if testing.Short() {
			resets = 5
		}
		var admitted atomic.Int64
		var done atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !done.Load() {
					if keyed.Allow("k").Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		for range resets {
			for keyed.AllowN("k", 0).Remaining > 0 { // spent: nothing more can pass until the reset
			}
			keyed.(resetter).Reset("k")
		}
		for keyed.AllowN("k", 0).Remaining > 0 {
		}
		done.Store(true)
		wg.Wait()
		assert.Equal(t, int64(resets+1)*50, admitted.Load(), "%s: admissions around %d resets", admitatomic.LimitsForm(keyed), resets)
	}
}

// TestLimitsKeysIndependent: keys of a composite store have budgets of
// their own under a hammer on several keys at once.
func TestLimitsKeysIndependent(t *testing.T) {
	limits := mustLimits(t, "token-bucket,30,1s + fixed-window,40,1m")
	for _, form := range compositeForms {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		var counts [8]atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for j := range 100 {
					k := (g + j) % len(counts)
					if keyed.Allow(fmt.Sprint("key", k)).Allowed {
						counts[k].Add(1)
					}
				}
			})
		}
		wg.Wait()
		for k := range counts {
			assert.Equal(t, int64(30), counts[k].Load(), "%s: key%d", admitatomic.LimitsForm(keyed), k)
		}
	}
}
