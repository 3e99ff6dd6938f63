package atomic

import (
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

func rule(alg admit.Algorithm, limit int, window time.Duration) admit.Rule {
	return admit.Rule{Algorithm: alg, Limit: limit, Window: window}
}

// TestPackedZeroAllocs: the packed forms allocate nothing, admitted or denied,
// single-key or keyed on an existing key.
func TestPackedZeroAllocs(t *testing.T) {
	fake := clock.NewFake()
	for _, r := range []admit.Rule{
		rule(admit.TokenBucket, 1000, time.Hour), // 3.6s per token: packed
		rule(admit.FixedWindow, 1000, time.Hour),
		rule(admit.SlidingCounter, 1000, time.Hour), // < 2^16: packed
	} {
		single, err := NewLimiter(r, admit.WithClock(fake))
		require.NoError(t, err)
		keyed, err := New(r, admit.WithClock(fake))
		require.NoError(t, err)
		keyed.Allow("k")
		allow := testing.AllocsPerRun(500, func() {
			if !single.Allow().Allowed || !keyed.Allow("k").Allowed {
				panic("500 of 1000 must pass")
			}
		})
		assert.Zero(t, allow, "%v: allocations per admitted Allow", r)
		for single.Allow().Allowed {
		}
		for keyed.Allow("k").Allowed {
		}
		deny := testing.AllocsPerRun(500, func() {
			if single.Allow().Allowed || keyed.Allow("k").Allowed {
				panic("the limit is spent")
			}
		})
		assert.Zero(t, deny, "%v: allocations per denied Allow", r)
	}
}

// TestFormChoice pins which form each rule gets.
func TestFormChoice(t *testing.T) {
	for _, tc := range []struct {
		rule admit.Rule
		want any
	}{
		{rule(admit.TokenBucket, 5, 10*time.Second), &TokenBucket{}},
		{rule(admit.TokenBucket, 3, 10*time.Second), &TokenBucketSnapshot{}}, // 3.33…s per token
		{rule(admit.FixedWindow, admit.MaxLimit, admit.MaxLimit*time.Nanosecond), &FixedWindow{}},
		{rule(admit.SlidingCounter, maxPackedCounterLimit, time.Hour), &slidingCounter{}},
		{rule(admit.SlidingCounter, maxPackedCounterLimit+1, time.Hour), &slidingCounterSnapshot{}},
	} {
		lim, err := NewLimiter(tc.rule)
		require.NoError(t, err)
		assert.IsType(t, tc.want, lim, "NewLimiter(%v)", tc.rule)
	}
}

func TestConstructorErrors(t *testing.T) {
	_, err := NewTokenBucket(rule(admit.TokenBucket, 3, 10*time.Second))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "NewTokenBucketSnapshot")
	_, err = NewTokenBucket(rule(admit.FixedWindow, 3, 10*time.Second))
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = NewTokenBucketSnapshot(rule(admit.SlidingLog, 3, 10*time.Second))
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = NewFixedWindow(rule(admit.TokenBucket, 3, 10*time.Second))
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = NewFixedWindow(rule(admit.FixedWindow, 0, 10*time.Second))
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = New(rule(admit.SlidingLog, 3, 10*time.Second))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	assert.ErrorContains(t, err, "locked.New")
}

// TestPackedMatchesSnapshot: on rules that pack, the packed and the snapshot
// token buckets give the same decisions on generated sequences with the clock
// moving forwards, by huge jumps, and backwards.
func TestPackedMatchesSnapshot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 20).Draw(rt, "limit")
		perToken := rapid.Int64Range(1, int64(time.Second)).Draw(rt, "perToken")
		r := rule(admit.TokenBucket, limit, time.Duration(perToken*int64(limit)))
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(math.MinInt64/2, math.MaxInt64/2).Draw(rt, "start")))
		packed, err := NewTokenBucket(r, admit.WithClock(fake))
		require.NoError(rt, err)
		snap, err := NewTokenBucketSnapshot(r, admit.WithClock(fake))
		require.NoError(rt, err)
		for i := range rapid.IntRange(1, 80).Draw(rt, "ops") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				fake.Set(fake.Now() + time.Duration(rapid.Int64Range(-int64(r.Window)*3, int64(r.Window)*3).Draw(rt, "step")))
			case 1:
				if fake.Now() < math.MaxInt64-1<<55 {
					fake.Advance(1 << 55)
				}
			default:
				n := rapid.IntRange(-1, limit+1).Draw(rt, "n")
				if a, b := packed.AllowN(n), snap.AllowN(n); a != b {
					rt.Fatalf("%v op %d: AllowN(t=%v, %d): packed %+v, snapshot %+v", r, i, fake.Now(), n, a, b)
				}
			}
		}
	})
}

// TestPackedTokenBucketAtClockEnd: the packed word is a TAT in the clock's own
// nanoseconds, and the kernels' clock range ends at 2^62-1 ns (146 years), so a
// TAT (a reading plus at most one Window <= 2^62 ns) always fits the word: at
// the end of the range the bucket keeps refusing beyond its limit, it never
// wraps to an early, empty TAT.
func TestPackedTokenBucketAtClockEnd(t *testing.T) {
	const end = 1<<62 - 1
	fake := clock.NewFake()
	fake.Set(end - 15*time.Second)
	lim, err := NewTokenBucket(rule(admit.TokenBucket, 5, 10*time.Second), admit.WithClock(fake))
	require.NoError(t, err)
	require.True(t, lim.AllowN(5).Allowed)
	assert.False(t, lim.Allow().Allowed)
	fake.Advance(2 * time.Second)
	assert.True(t, lim.Allow().Allowed, "one token refilled")
	assert.False(t, lim.Allow().Allowed)
	fake.Set(end)
	assert.True(t, lim.AllowN(5).Allowed, "full again at the end of the range")
	assert.Equal(t, uint64(end+10*time.Second)^1<<63, lim.c.w.Load(), "the TAT fits, unsaturated")
	for _, now := range []time.Duration{end, end + 1, math.MaxInt64} {
		fake.Set(now)
		d := lim.Allow()
		assert.False(t, d.Allowed, "no admission beyond the limit at t=%d", now)
		assert.Positive(t, d.RetryAfter)
	}
}

// TestFixedWindowBitBudget: at the largest Limit the count takes 31 bits and
// the window index keeps 33. The index is restored exactly for stored windows
// within 2^32 windows of the caller's, either side; a gap of exactly 2^33
// windows is the aliasing horizon, where the old count is read as current and
// the key is denied (never over-admitted) until the window ends.
func TestFixedWindowBitBudget(t *testing.T) {
	c := newFWCodec(rule(admit.FixedWindow, admit.MaxLimit, 2*time.Second))
	require.Equal(t, uint(31), c.cb)
	rapid.Check(t, func(rt *rapid.T) {
		idx := rapid.Int64Range(math.MinInt64/4, math.MaxInt64/4).Draw(rt, "idx")
		gap := rapid.Int64Range(-(1<<32)+1, 1<<32-1).Draw(rt, "gap")
		s := kernel.FixedWindowState{Window: idx - gap, Count: rapid.Int64Range(1, admit.MaxLimit).Draw(rt, "count")}
		if got := c.unpack(c.pack(s), idx); got != s {
			rt.Fatalf("unpack(pack(%+v), idx %d) = %+v", s, idx, got)
		}
	})
	assert.Equal(t, kernel.FixedWindowState{}, c.unpack(c.pack(kernel.FixedWindowState{Window: 12345}), 99), "a zero count is fresh whatever the index")

	// Window >= Limit ns, so 2^(63-cb) windows span at least 2^62 ns: any two
	// readings less than 2^62 ns minus one window apart (146 years) are less
	// than 2^(63-cb) windows apart and restore exactly, whatever the rule.
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, admit.MaxLimit).Draw(rt, "limit")
		window := time.Duration(rapid.Int64Range(int64(limit), min(admit.MaxLimitTimesWindow/int64(limit), 1<<60)).Draw(rt, "window"))
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(math.MinInt64/2, 0).Draw(rt, "t0")))
		lim, err := NewFixedWindow(rule(admit.FixedWindow, limit, window), admit.WithClock(fake))
		require.NoError(rt, err)
		require.True(rt, lim.AllowN(limit).Allowed)
		gap := time.Duration(rapid.Int64Range(0, 1<<62-1-int64(window)).Draw(rt, "gap"))
		fake.Advance(gap)
		ref := kernel.NewFixedWindow(rule(admit.FixedWindow, limit, window))
		s := kernel.FixedWindowState{Window: ref.Index(fake.Now() - gap), Count: int64(limit)}
		if got, want := lim.Allow(), ref.Allow(&s, fake.Now(), 1); got != want {
			rt.Fatalf("%d per %v: Allow %v after a full window: got %+v, want %+v", limit, window, gap, got, want)
		}
	})
}

// TestSlidingCounterBitBudget: the largest packed Limit uses 16+16 bits of
// counts and 32 of index, restored exactly within 2^31 windows.
func TestSlidingCounterBitBudget(t *testing.T) {
	c, ok := newSCCodec(rule(admit.SlidingCounter, maxPackedCounterLimit, time.Second))
	require.True(t, ok)
	require.Equal(t, uint(16), c.cb)
	require.Equal(t, 16, bits.Len(maxPackedCounterLimit))
	rapid.Check(t, func(rt *rapid.T) {
		idx := rapid.Int64Range(math.MinInt64/4, math.MaxInt64/4).Draw(rt, "idx")
		gap := rapid.Int64Range(-(1<<31)+1, 1<<31-1).Draw(rt, "gap")
		s := kernel.SlidingCounterState{
			Window: idx - gap,
			Prev:   rapid.Int64Range(0, maxPackedCounterLimit).Draw(rt, "prev"),
			Curr:   rapid.Int64Range(0, maxPackedCounterLimit).Draw(rt, "curr"),
		}
		if s.Prev == 0 && s.Curr == 0 {
			s = kernel.SlidingCounterState{}
		}
		if got := c.unpack(c.pack(s), idx); got != s {
			rt.Fatalf("unpack(pack(%+v), idx %d) = %+v", s, idx, got)
		}
	})
	_, ok = newSCCodec(rule(admit.SlidingCounter, maxPackedCounterLimit+1, time.Second))
	assert.False(t, ok)
}
