package atomic_test

import (
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

// TestPairCellAligned: a pair cell is 24 bytes, so cells laid side by side
// start at both offsets modulo 16, and each one's pair of words starts on a
// 16-byte boundary all the same, as CMPXCHG16B needs; so do the cells of
// single-key limiters, wherever the allocator puts them.
func TestPairCellAligned(t *testing.T) {
	requirePair(t) // the layout is the pair form's, which only amd64 takes
	assert.Equal(t, uintptr(24), admitatomic.PairCellSize, "three words")
	cells, pairs := admitatomic.PairCellsAligned(8)
	assert.Contains(t, cells, uintptr(0), "a cell at offset 0 modulo 16")
	assert.Contains(t, cells, uintptr(8), "a cell at offset 8 modulo 16")
	for i, off := range pairs {
		assert.Zero(t, off, "cell %d at offset %d: its pair is at offset %d modulo 16", i, cells[i], off)
	}
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")
	for range 50 {
		single, err := admitatomic.NewLimitsLimiter(limits)
		require.NoError(t, err)
		a := admitatomic.PairAddr(single)
		require.NotZero(t, a)
		assert.Zero(t, a%16, "a single-key limiter's pair at %#x", a)
	}
}

// TestLimitsPairZeroAllocs: in the pair form, a call allocates nothing,
// admitted or denied.
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
		require.Equal(t, "pair", admitatomic.LimitsForm(single), text)
		single.Allow()
		allow := testing.AllocsPerRun(200, func() {
			fake.Advance(time.Second) // a token of every bucket, and 200 calls fit every window
			if !single.Allow().Allowed || !single.AllowN(1).Allowed {
				panic(text + ": a call denied")
			}
		})
		assert.Zero(t, allow, "%s: allocations per admitted Allow", text)
		for single.Allow().Allowed {
		}
		deny := testing.AllocsPerRun(200, func() {
			if single.Allow().Allowed || single.AllowN(2).Allowed {
				panic(text + ": a call admitted")
			}
		})
		assert.Zero(t, deny, "%s: allocations per denied Allow", text)
	}
}

// TestLimitsPairSpill: a token bucket's state past its packed word's
// horizon (9,999 per second: ±10.7 days) leaves the pair for a record
// under the stripe's mutex, with the kernel's decisions all along, and
// comes back to the pair when its state packs again.
func TestLimitsPairSpill(t *testing.T) {
	requirePair(t)
	limits := mustLimits(t, "token-bucket,9999,1s + fixed-window,100,1m")
	h := kernel.NewTokenBucket(limits.At(0)).Horizon()
	type pairs struct {
		fake   *clock.Fake
		single admit.Limiter
		model  *conformance.CompositeOracle
	}
	fresh := func() pairs {
		fake := clock.NewFake()
		single, err := admitatomic.NewLimitsLimiter(limits, admit.WithClock(fake))
		require.NoError(t, err)
		require.Equal(t, "pair", admitatomic.LimitsForm(single))
		return pairs{fake, single, conformance.NewCompositeOracle(limits)}
	}
	// step decides n at reading at, checks the decision against the
	// kernel, and that the limiter is held, or not, as held says.
	step := func(p pairs, at time.Duration, n int, held bool) {
		t.Helper()
		p.fake.Set(at)
		want, wantWhich := p.model.Allow("single", at, n)
		got, which := p.single.(admit.CompositeLimiter).AllowNWhich(n)
		assert.Equal(t, want, got, "AllowNWhich(%d) at %v", n, at)
		assert.Equal(t, wantWhich, which, "which of AllowNWhich(%d) at %v", n, at)
		assert.Equal(t, held, admitatomic.LimitsHeld(p.single), "held after AllowNWhich(%d) at %v", n, at)
	}

	// Past the upper horizon: the first admission's TAT does not pack, nor
	// does any later one's (a TAT never moves back).
	p := fresh()
	step(p, h-time.Millisecond, 50, true)
	step(p, h, 1, true)
	step(p, h+time.Second, 100, true)

	// Below the lower horizon, then back within it: the state packs again.
	p = fresh()
	step(p, -h-time.Second, 3, true)
	step(p, -h+2*time.Second, 1, false)
	step(p, -h+2*time.Second, 5, false)
}

// TestLimitsSnapshotAllocs: the snapshot form allocates its one array per
// admission and nothing for a denial or a probe.
func TestLimitsSnapshotAllocs(t *testing.T) {
	for _, text := range []string{
		"token-bucket,10,1s + fixed-window,1000,1h",
		"token-bucket,10,1s + sliding-counter,1000,1h + fixed-window,2000,10h",
	} {
		limits := mustLimits(t, text)
		fake := clock.NewFake()
		single, err := admitatomic.NewLimitsLimiterForm(limits, false, admit.WithClock(fake))
		require.NoError(t, err)
		single.Allow()
		allow := testing.AllocsPerRun(200, func() {
			fake.Advance(time.Second)
			if !single.Allow().Allowed {
				panic(text + ": a call denied")
			}
		})
		assert.LessOrEqual(t, allow, 1.0, "%s: allocations per admitted Allow", text)
		for single.Allow().Allowed {
		}
		deny := testing.AllocsPerRun(200, func() {
			if single.Allow().Allowed || single.AllowN(0).Remaining != 0 {
				panic(text + ": a call admitted")
			}
		})
		assert.Zero(t, deny, "%s: allocations per denial and probe", text)
	}
}
