package atomic

import (
	"math"
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

// TestSnapshotCounterAllocs: a sliding counter whose state does not pack
// (a Limit of 2^16 or more, or a Window under 2^(2b-1) ns, b the bit length
// of Limit: 60,000 per second) is a snapshot in the single-key limiter, and
// its admitted Allow makes exactly one allocation; a denied one makes none.
// New refuses these rules (sharded.New takes them).
// docs/keyed-stores.md ("Allocations") names them.
func TestSnapshotCounterAllocs(t *testing.T) {
	for _, r := range []admit.Rule{
		rule(admit.SlidingCounter, 60_000, time.Second),
		rule(admit.SlidingCounter, maxPackedCounterLimit+1, time.Hour),
	} {
		fake := clock.NewFake()
		single, err := NewLimiter(r, admit.WithClock(fake))
		require.NoError(t, err)
		require.IsType(t, &slidingCounterSnapshot{}, single, "%v", r)
		_, err = New(r, admit.WithClock(fake))
		assert.ErrorIs(t, err, admit.ErrUnsupported, "New(%v)", r)
		single.Allow()
		allow := testing.AllocsPerRun(500, func() {
			if !single.Allow().Allowed {
				panic("500 of 60,000 must pass")
			}
		})
		assert.Equal(t, 1.0, allow, "%v: allocations per admitted Allow", r)
		for single.Allow().Allowed {
		}
		deny := testing.AllocsPerRun(500, func() {
			if single.Allow().Allowed {
				panic("the limit is spent")
			}
		})
		assert.Zero(t, deny, "%v: allocations per denied Allow", r)
	}
}

// TestScaledBucketAllocs: token buckets whose emission interval is not whole
// nanoseconds pack in scaled units and allocate nothing either, admitted or
// denied, single-key or keyed, within the word's horizon and past it (where
// the state is spilled under a mutex).
func TestScaledBucketAllocs(t *testing.T) {
	for _, r := range []admit.Rule{
		rule(admit.TokenBucket, 3, time.Second), // 333,333,333⅓ ns per token
		rule(admit.TokenBucket, 7, time.Minute),
		rule(admit.TokenBucket, 9999, time.Second), // horizon ±10.7 days
	} {
		horizon := kernel.NewTokenBucket(r).Horizon()
		for _, start := range []time.Duration{time.Hour, horizon + time.Hour, -horizon - time.Hour} {
			fake := clock.NewFake()
			fake.Set(start)
			single, err := NewLimiter(r, admit.WithClock(fake))
			require.NoError(t, err)
			keyed, err := New(r, admit.WithClock(fake))
			require.NoError(t, err)
			keyed.Allow("k")
			single.Allow()
			step := (r.Window + time.Duration(r.Limit) - 1) / time.Duration(r.Limit) // one token, rounded up
			allow := testing.AllocsPerRun(200, func() {
				fake.Advance(step)
				if !single.Allow().Allowed || !keyed.Allow("k").Allowed {
					panic("a token refills every step")
				}
			})
			assert.Zero(t, allow, "%v from t=%v: allocations per admitted Allow", r, start)
			for single.Allow().Allowed {
			}
			for keyed.Allow("k").Allowed {
			}
			deny := testing.AllocsPerRun(200, func() {
				if single.Allow().Allowed || keyed.Allow("k").Allowed {
					panic("the limit is spent")
				}
			})
			assert.Zero(t, deny, "%v from t=%v: allocations per denied Allow", r, start)
		}
	}
}

// TestFormChoice pins which form each rule gets.
func TestFormChoice(t *testing.T) {
	for _, tc := range []struct {
		rule admit.Rule
		want any
	}{
		{rule(admit.TokenBucket, 5, 10*time.Second), &TokenBucket{}},
		{rule(admit.TokenBucket, 3, 10*time.Second), &TokenBucket{}}, // 3.33…s per token: scaled units
		{rule(admit.FixedWindow, admit.MaxLimit, admit.MaxLimit*time.Nanosecond), &FixedWindow{}},
		{rule(admit.FixedWindow, 1, 1), &FixedWindow{}},
		{rule(admit.SlidingCounter, maxPackedCounterLimit, time.Hour), &slidingCounter{}},
		{rule(admit.SlidingCounter, maxPackedCounterLimit+1, time.Hour), &slidingCounterSnapshot{}},
		// Packed, the index needs Window >= 2^(2cb-1) ns to cover the clock range.
		{rule(admit.SlidingCounter, 1000, 1<<19), &slidingCounter{}},
		{rule(admit.SlidingCounter, 1000, 1<<19-1), &slidingCounterSnapshot{}},
		{rule(admit.SlidingCounter, maxPackedCounterLimit, 1<<31), &slidingCounter{}},
		{rule(admit.SlidingCounter, maxPackedCounterLimit, time.Second), &slidingCounterSnapshot{}},
		{rule(admit.SlidingCounter, 1000, time.Second), &slidingCounter{}},
		{rule(admit.SlidingCounter, 60_000, time.Second), &slidingCounterSnapshot{}},
		{rule(admit.SlidingCounter, 2, 2), &slidingCounterSnapshot{}},
	} {
		lim, err := NewLimiter(tc.rule)
		require.NoError(t, err)
		assert.IsType(t, tc.want, lim, "NewLimiter(%v)", tc.rule)
	}
	// New takes the rules whose state packs in the table's word, and
	// refuses the others, naming sharded.New.
	for _, tc := range []struct {
		rule  admit.Rule
		takes bool
	}{
		{rule(admit.TokenBucket, 3, 10*time.Second), true},
		{rule(admit.TokenBucket, 9999, time.Second), true},
		{rule(admit.FixedWindow, 1, 1), true},
		{rule(admit.SlidingCounter, 1000, 1<<19), true},
		{rule(admit.SlidingCounter, 1000, 1<<19-1), false},
		{rule(admit.SlidingCounter, maxPackedCounterLimit+1, time.Hour), false},
	} {
		lim, err := New(tc.rule)
		if !tc.takes {
			assert.ErrorIs(t, err, admit.ErrUnsupported, "New(%v)", tc.rule)
			assert.ErrorContains(t, err, "sharded.New", "New(%v)", tc.rule)
			continue
		}
		require.NoError(t, err)
		assert.Implements(t, (*admit.Store)(nil), lim, "New(%v)", tc.rule)
	}
}

func TestConstructorErrors(t *testing.T) {
	_, err := NewTokenBucket(rule(admit.TokenBucket, 3, 10*time.Second))
	assert.NoError(t, err, "every token-bucket rule packs")
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
	assert.ErrorContains(t, err, "sharded.New")
	assert.ErrorContains(t, err, "locked.NewLimiter")
}

// TestPackedMatchesSnapshot: the packed and the snapshot token buckets give
// the same decisions on generated sequences with the clock moving forwards,
// by huge jumps (past the packed word's horizon, where it spills), and
// backwards, for whole-nanosecond rules and others.
func TestPackedMatchesSnapshot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 20).Draw(rt, "limit")
		perToken := rapid.Int64Range(1, int64(time.Second)).Draw(rt, "perToken")
		window := perToken*int64(limit) + rapid.Int64Range(0, int64(limit)-1).Draw(rt, "windowPlus")
		r := rule(admit.TokenBucket, limit, time.Duration(window))
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
