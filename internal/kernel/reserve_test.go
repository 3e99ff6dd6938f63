package kernel

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// TestReserveSteps: one token a second, a burst of 2. Waiters are handed
// successive slots; a cancelled reservation gives its tokens back only while
// no later reservation relies on them and it is not yet due.
func TestReserveSteps(t *testing.T) {
	s := time.Second
	k := NewTokenBucket(tb(2, 2*s))
	var st TokenBucketState
	reserve := func(now time.Duration, n int, maxWait time.Duration) (time.Duration, bool, TokenBucketState) {
		d, ok := k.Reserve(&st, now, n, maxWait)
		return d, ok, st
	}
	d, ok, _ := reserve(0, 2, 0)
	require.True(t, ok)
	require.Equal(t, time.Duration(0), d, "the burst is due at once")
	beforeA := st
	d, ok, afterA := reserve(0, 1, time.Hour)
	require.True(t, ok)
	require.Equal(t, s, d, "the next slot is 1s away")
	beforeB := st
	d, ok, afterB := reserve(0, 1, time.Hour)
	require.True(t, ok)
	require.Equal(t, 2*s, d, "and the one after, 2s")
	d, ok, _ = reserve(0, 1, s)
	assert.False(t, ok, "a 3s wait exceeds maxWait 1s")
	assert.Equal(t, 3*s, d)
	assert.Equal(t, afterB, st, "a refused reservation changes nothing")

	assert.False(t, k.Cancel(&st, 0, beforeA, afterA), "B was reserved after A: A's slot is promised")
	assert.True(t, k.Cancel(&st, 0, beforeB, afterB), "B is the last and not due: given back")
	assert.Equal(t, afterA, st, "as if B had never been reserved")
	assert.False(t, k.Cancel(&st, s, beforeA, afterA), "A is due at 1s: spent")

	d, ok, _ = reserve(0, 1, time.Hour)
	assert.True(t, ok)
	assert.Equal(t, 2*s, d, "B's slot is free again")

	_, ok = k.Reserve(&st, 0, 3, time.Hour)
	assert.False(t, ok, "n > Limit can never be reserved")
	d, ok = k.Reserve(&st, 0, 0, 0)
	assert.True(t, ok)
	assert.Zero(t, d, "n == 0 is free")
}

// TestReserveProperties checks Reserve and Cancel against Allow on generated
// sequences with the clock moving forwards, by huge jumps and backwards:
//   - Reserve with maxWait 0 decides exactly as Allow, state included;
//   - Reserve with an unbounded wait returns Allow's RetryAfter;
//   - a reservation cancelled at once leaves a state that decides every later
//     reading as the state before it did;
//   - the readings at which the waiters proceed (the reading of the
//     reservation plus its wait, whole nanoseconds) obey the interval bound:
//     over any span of them of length d, at most L + floor(d·L/W) tokens.
func TestReserveProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 12).Draw(rt, "limit")
		window := time.Duration(rapid.Int64Range(int64(limit), int64(10*time.Second)).Draw(rt, "window"))
		r := tb(limit, window)
		k := NewTokenBucket(r)
		var st TokenBucketState
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		var dues []dueTokens
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0:
				now += time.Duration(rapid.Int64Range(0, 2*int64(window)).Draw(rt, "advance"))
			case 1:
				now -= time.Duration(rapid.Int64Range(0, int64(window)).Draw(rt, "back"))
			default:
				n := rapid.IntRange(-1, limit+1).Draw(rt, "n")
				maxWait := rapid.SampledFrom([]time.Duration{0, window / 2, admit.Never}).Draw(rt, "maxWait")
				probe := st
				want := k.Decide(&probe, now, n)
				before := st
				d, ok := k.Reserve(&st, now, n, maxWait)
				switch {
				case maxWait == 0 && (ok != want.Allowed || (ok && st != probe) || (!ok && st != before)):
					rt.Fatalf("op %d: Reserve(t=%v, %d, 0) = %v, %v; Allow = %+v", i, now, n, d, ok, want)
				case n > 0 && n <= limit && maxWait == admit.Never && d != want.RetryAfter:
					rt.Fatalf("op %d: Reserve(t=%v, %d) waits %v; Allow's RetryAfter is %v", i, now, n, d, want.RetryAfter)
				case !ok && st != before:
					rt.Fatalf("op %d: a refused reservation changed the state", i)
				}
				if !ok || n == 0 {
					continue
				}
				if rapid.Bool().Draw(rt, "cancel") && d > 0 {
					after := st
					require.True(rt, k.Cancel(&st, now, before, after), "op %d: cancel of the last reservation before it is due", i)
					for _, later := range []time.Duration{0, 1, window / 3, window, 3 * window} {
						a, b := before, st
						if x, y := k.Decide(&a, now+later, 1), k.Decide(&b, now+later, 1); x != y && !(d > 0 && later < 0) {
							rt.Fatalf("op %d: after cancel, Allow(t=%v) = %+v; without the reservation %+v", i, now+later, y, x)
						}
					}
					continue
				}
				// The tokens are due at TAT − W exactly (the wait rounds that
				// up to whole nanoseconds).
				at := new(big.Rat).SetFrac(bAdd(bMul(bSub(bi(int64(st.TAT^bias)), bi(int64(window))), bi(int64(limit))), bi(st.Frac)), bi(int64(limit)))
				if ceil := ratCeil(at); ceil.Cmp(bi(int64(now+d))) != 0 && d > 0 {
					rt.Fatalf("op %d: Reserve(t=%v, %d) waits %v, but the tokens are due at %v", i, now, n, d, at)
				}
				// The waiter proceeds at the whole-nanosecond reading now+d:
				// that is the reading the bound must hold over.
				dues = append(dues, dueTokens{at: new(big.Rat).SetInt64(int64(now + d)), n: int64(n)})
			}
		}
		checkDueBound(rt, dues, int64(limit), int64(window))
	})
}

type dueTokens struct {
	at *big.Rat // exact due time, in nanoseconds
	n  int64
}

// checkDueBound checks, for every pair of due times t0 <= t1, that the tokens
// due in [t0, t1] are at most L + (t1−t0)·L/W, in exact arithmetic
// (quadratic, but the histories are short).
func checkDueBound(rt *rapid.T, dues []dueTokens, limit, window int64) {
	rate := new(big.Rat).SetFrac(bi(limit), bi(window))
	for _, a := range dues {
		for _, b := range dues {
			if a.at.Cmp(b.at) > 0 {
				continue
			}
			var sum int64
			for _, c := range dues {
				if c.at.Cmp(a.at) >= 0 && c.at.Cmp(b.at) <= 0 {
					sum += c.n
				}
			}
			span := new(big.Rat).Sub(b.at, a.at)
			bound := new(big.Rat).Add(new(big.Rat).SetInt64(limit), new(big.Rat).Mul(span, rate))
			if new(big.Rat).SetInt64(sum).Cmp(bound) > 0 {
				rt.Fatalf("%d tokens due in [%v, %v], more than %v", sum, a.at, b.at, bound)
			}
		}
	}
}

// TestReserveDueSpan: due times rounded up to whole nanoseconds must never lie
// closer together than their tokens allow. 3 per 10ms, frozen at 0: the
// waiters proceed where an Allow at the same readings would admit them.
func TestReserveDueSpan(t *testing.T) {
	k := NewTokenBucket(tb(3, 10*time.Millisecond))
	var st TokenBucketState
	var twin TokenBucketState
	var got []time.Duration
	for _, n := range []int{1, 3, 1, 1, 1, 1} {
		d, ok := k.Reserve(&st, 0, n, admit.Never)
		require.True(t, ok)
		got = append(got, d)
		v := k.Decide(&twin, d, n)
		require.True(t, v.Allowed, "an Allow of %d at %v, where the waiter proceeds, is admitted", n, d)
	}
	assert.Equal(t, []time.Duration{0, 3_333_334, 6_666_668, 10_000_001, 13_333_334, 16_666_668}, got)
	// Readings 3.333334ms to 16.666668ms: 7 tokens over 13.333334ms, within
	// the bound 3 + floor(13.333334·3/10) = 7 (with 16.666667ms it was 6).
}
