package atomic_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
)

// requirePair skips a test of the pair form where the processor lacks it.
func requirePair(t *testing.T) {
	t.Helper()
	if !admitatomic.PairAvailable() {
		t.Skip("no two-word compare-and-swap here: every composite takes the snapshot")
	}
}

// TestPairCellAligned: a pair cell is 40 bytes, so cells laid side by side
// start at both offsets modulo 16, and each one's pair of words starts on a
// 16-byte boundary all the same, as CMPXCHG16B needs; so do the cells of a
// keyed store and of single-key limiters, wherever the allocator puts them.
func TestPairCellAligned(t *testing.T) {
	requirePair(t) // the layout is the pair form's, which only amd64 takes
	assert.Equal(t, uintptr(40), admitatomic.PairCellSize, "three words and a key")
	cells, pairs := admitatomic.PairCellsAligned(8)
	assert.Contains(t, cells, uintptr(0), "a cell at offset 0 modulo 16")
	assert.Contains(t, cells, uintptr(8), "a cell at offset 8 modulo 16")
	for i, off := range pairs {
		assert.Zero(t, off, "cell %d at offset %d: its pair is at offset %d modulo 16", i, cells[i], off)
	}
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")
	keyed, err := admitatomic.NewLimits(limits)
	require.NoError(t, err)
	for i := range 200 {
		key := fmt.Sprint("key-", i)
		keyed.Allow(key)
		a := admitatomic.PairAddr(keyed, key)
		require.NotZero(t, a, key)
		assert.Zero(t, a%16, "%s: its pair at %#x", key, a)
	}
	for range 50 {
		single, err := admitatomic.NewLimitsLimiter(limits)
		require.NoError(t, err)
		assert.Zero(t, admitatomic.PairAddr(single, "")%16, "a single-key limiter's pair")
	}
}

// TestLimitsPairZeroAllocs: in the pair form, a call allocates nothing,
// admitted or denied, single-key or keyed on an existing key.
func TestLimitsPairZeroAllocs(t *testing.T) {
	requirePair(t)
	for _, text := range []string{
		"token-bucket,10,1s + fixed-window,1000,1h",
		"fixed-window,1000,1h + token-bucket,3,1s",        // scaled units
		"token-bucket,10,1s + sliding-counter,1000,1h",    // a packing counter
		"token-bucket,10,1s + token-bucket,1000,1h",       // reservable
		"sliding-counter,1000,1h + fixed-window,2000,10h", // windows only
	} {
		limits := mustLimits(t, text)
		fake := clock.NewFake()
		single, err := admitatomic.NewLimitsLimiter(limits, admit.WithClock(fake))
		require.NoError(t, err)
		keyed, err := admitatomic.NewLimits(limits, admit.WithClock(fake))
		require.NoError(t, err)
		require.Equal(t, "pair", admitatomic.LimitsForm(keyed), text)
		keyed.Allow("k")
		single.Allow()
		allow := testing.AllocsPerRun(200, func() {
			fake.Advance(time.Second) // a token of every bucket, and 200 calls fit every window
			if !single.Allow().Allowed || !keyed.Allow("k").Allowed || !keyed.AllowN("k", 1).Allowed {
				panic(text + ": a call denied")
			}
		})
		assert.Zero(t, allow, "%s: allocations per admitted Allow", text)
		for single.Allow().Allowed {
		}
		for keyed.Allow("k").Allowed {
		}
		deny := testing.AllocsPerRun(200, func() {
			if single.Allow().Allowed || keyed.Allow("k").Allowed || keyed.AllowN("k", 2).Allowed {
				panic(text + ": a call admitted")
			}
		})
		assert.Zero(t, deny, "%s: allocations per denied Allow", text)
	}
}

// TestLimitsPairSpill: a token bucket's state past its packed word's
// horizon (9,999 per second: ±10.7 days) leaves the pair for a record
// under the stripe's mutex, with the kernel's decisions all along, and
// comes back to the pair when its state packs again, or after a Reset, or
// is evicted once fresh.
func TestLimitsPairSpill(t *testing.T) {
	requirePair(t)
	limits := mustLimits(t, "token-bucket,9999,1s + fixed-window,100,1m")
	h := kernel.NewTokenBucket(limits.At(0)).Horizon()
	type pairs struct {
		fake   *clock.Fake
		keyed  admit.KeyedLimiter
		single admit.Limiter
		model  *conformance.CompositeOracle
	}
	fresh := func() pairs {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimits(limits, admit.WithClock(fake))
		require.NoError(t, err)
		require.Equal(t, "pair", admitatomic.LimitsForm(keyed))
		single, err := admitatomic.NewLimitsLimiter(limits, admit.WithClock(fake))
		require.NoError(t, err)
		return pairs{fake, keyed, single, conformance.NewCompositeOracle(limits)}
	}
	// step decides n at reading at on key "k" and on the single key, checks
	// both against the kernel, and that both are held, or not, as held says.
	step := func(p pairs, at time.Duration, n int, held bool) {
		t.Helper()
		p.fake.Set(at)
		want, wantWhich := p.model.Allow("k", at, n)
		got, which := p.keyed.(admit.CompositeStore).AllowNWhich("k", n)
		assert.Equal(t, want, got, "AllowNWhich(k, %d) at %v", n, at)
		assert.Equal(t, wantWhich, which, "which of AllowNWhich(k, %d) at %v", n, at)
		assert.Equal(t, held, admitatomic.LimitsHeld(p.keyed, "k"), "held after AllowNWhich(k, %d) at %v", n, at)
		want, wantWhich = p.model.Allow("single", at, n)
		got, which = p.single.(admit.CompositeLimiter).AllowNWhich(n)
		assert.Equal(t, want, got, "single AllowNWhich(%d) at %v", n, at)
		assert.Equal(t, wantWhich, which, "which of single AllowNWhich(%d) at %v", n, at)
		assert.Equal(t, held, admitatomic.LimitsHeld(p.single, ""), "single held after AllowNWhich(%d) at %v", n, at)
	}

	// Past the upper horizon: the first admission's TAT does not pack, nor
	// does any later one's (a TAT never moves back), until the key is
	// fresh and evicted.
	p := fresh()
	step(p, h-time.Millisecond, 50, true)
	step(p, h, 1, true)
	step(p, h+time.Second, 100, true)
	p.fake.Set(h + time.Hour)
	store := p.keyed.(admit.CompositeStore)
	assert.Equal(t, 1, store.Sweep(), "a spilled state, fresh, is evicted")
	assert.Zero(t, store.Len())

	// Below the lower horizon, then back within it: the state packs again.
	p = fresh()
	step(p, -h-time.Second, 3, true)
	step(p, -h+2*time.Second, 1, false)
	step(p, -h+2*time.Second, 5, false)

	// A Reset of a spilled key gives it a fresh pair.
	p = fresh()
	step(p, h+2*time.Hour, 1, true)
	p.keyed.(resetter).Reset("k")
	assert.False(t, admitatomic.LimitsHeld(p.keyed, "k"), "a Reset releases the record")
	s, _, ok := admitatomic.LimitsState(p.keyed, "k")
	require.True(t, ok)
	assert.Equal(t, make([]kernel.PartState, 2), s, "fresh")
}

// TestLimitsSnapshotAllocs: the snapshot form allocates its one array per
// admission and nothing for a denial or a probe, single-key or keyed on an
// existing key.
func TestLimitsSnapshotAllocs(t *testing.T) {
	for _, text := range []string{
		"token-bucket,10,1s + fixed-window,1000,1h",
		"token-bucket,10,1s + sliding-counter,1000,1h + fixed-window,2000,10h",
	} {
		limits := mustLimits(t, text)
		fake := clock.NewFake()
		single, err := admitatomic.NewLimitsLimiterForm(limits, false, admit.WithClock(fake))
		require.NoError(t, err)
		keyed, err := admitatomic.NewLimitsForm(limits, false, admit.WithClock(fake))
		require.NoError(t, err)
		keyed.Allow("k")
		allow := testing.AllocsPerRun(200, func() {
			fake.Advance(time.Second)
			if !single.Allow().Allowed || !keyed.Allow("k").Allowed {
				panic(text + ": a call denied")
			}
		})
		assert.LessOrEqual(t, allow, 2.0, "%s: allocations per two admitted Allows", text)
		for single.Allow().Allowed {
		}
		for keyed.Allow("k").Allowed {
		}
		deny := testing.AllocsPerRun(200, func() {
			if single.Allow().Allowed || keyed.Allow("k").Allowed || keyed.AllowN("k", 0).Remaining != 0 {
				panic(text + ": a call admitted")
			}
		})
		assert.Zero(t, deny, "%s: allocations per denial and probe", text)
	}
}
