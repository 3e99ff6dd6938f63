package kernel

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// drawSmallRule draws a rule of alg with a small Limit and a window of
// milliseconds to seconds, so that a few hundred requests cross several
// windows.
func drawSmallRule(t *rapid.T, alg admit.Algorithm, label string) admit.Rule {
	return admit.Rule{
		Algorithm: alg,
		Limit:     rapid.IntRange(1, 12).Draw(t, label+"Limit"),
		Window:    time.Duration(rapid.SampledFrom([]int64{7, 10, 25, 100, 1000}).Draw(t, label+"WindowMs")) * time.Millisecond,
	}
}

var allAlgorithms = []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter}

// TestConvertNeverKinder checks, for every pair of algorithms and every
// strategy, that the admissions after a change respect the new rule's
// interval bound counted from the moment of the change, with the carried
// consumption c already spent: a token bucket admits no
// more than (L' − c) + (t − t0)·L'/W' in [t0, t]; a fixed window at most
// L' − ⌈c⌉ in the window holding t0 and L' in each later one; a sliding log
// at most L' in any span of W', counting the ⌈c⌉ entries it carries at their
// own readings; a sliding counter at most L' − ⌈c⌉ in
// the window holding t0 and L' per aligned window after it.
func TestConvertNeverKinder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		oldRule := drawSmallRule(t, rapid.SampledFrom(allAlgorithms).Draw(t, "oldAlg"), "old")
		newRule := drawSmallRule(t, rapid.SampledFrom(allAlgorithms).Draw(t, "newAlg"), "new")
		carry := rapid.SampledFrom([]Conversion{KeepConsumed, KeepProportional, KeepNothing}).Draw(t, "carry")
		ol, err := admit.NewLimits(oldRule)
		require.NoError(t, err)
		nl, err := admit.NewLimits(newRule)
		require.NoError(t, err)
		from, to := NewComposite(ol), NewComposite(nl)

		fs := make([]PartState, 1)
		now := time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "start"))
		for range rapid.IntRange(0, 40).Draw(t, "before") {
			now += time.Duration(rapid.Int64Range(0, int64(oldRule.Window)/3).Draw(t, "step"))
			from.Decide(fs, now, rapid.IntRange(0, 3).Draw(t, "n"))
		}
		t0 := now
		c := expectedCarry(from, fs, to, t0, carry)
		ts := make([]PartState, 1)
		Convert(from, fs, to, ts, t0, carry)
		if carry == KeepNothing {
			require.Equal(t, PartState{}, ts[0])
		}

		var carried []time.Duration // a sliding log's carried entries, at their own readings
		if ts[0].Log != nil {
			for k := range ts[0].Log.size {
				carried = append(carried, time.Duration(ts[0].Log.at(k)))
			}
			for range ts[0].Log.extra { // copies of the newest, past the ring
				carried = append(carried, carried[len(carried)-1])
			}
			require.EqualValues(t, ceilRat(c), len(carried), "carried entries")
		}
		var admitted []time.Duration // one entry per admitted request
		for range rapid.IntRange(0, 120).Draw(t, "after") {
			now += time.Duration(rapid.Int64Range(0, int64(newRule.Window)/4).Draw(t, "step"))
			n := rapid.IntRange(1, 2).Draw(t, "n")
			if v, _ := to.Decide(ts, now, n); v.Allowed {
				for range n {
					admitted = append(admitted, now)
				}
			}
		}
		checkCarriedBound(t, newRule, t0, ceilRat(c), c, len(carried), append(carried, admitted...))
	})
}

// expectedCarry is the consumption Convert must carry, computed from the
// old state's probe rather than from Convert's own helpers where the
// algorithm allows (a window's and a log's count is Limit − Remaining).
func expectedCarry(from *Composite, fs []PartState, to *Composite, now time.Duration, carry Conversion) *big.Rat {
	oldLimit, newLimit := int64(from.PartLimit(0)), int64(to.PartLimit(0))
	var used *big.Rat
	switch from.limits.At(0).Algorithm {
	case admit.FixedWindow, admit.SlidingLog:
		probe := append([]PartState(nil), fs...)
		v, _ := from.Decide(probe, now, 0)
		used = big.NewRat(oldLimit-int64(v.Remaining), 1)
	default:
		used = from.consumed(0, &fs[0], now)
	}
	c := new(big.Rat)
	switch carry {
	case KeepNothing:
		return c
	case KeepProportional:
		c.Mul(used, big.NewRat(newLimit, oldLimit))
	default:
		c.Set(used)
	}
	return c // not clamped to the new Limit: a consumption past it is kept
}

// checkCarriedBound checks the admissions after the change at t0 against the
// new rule's bound with whole (⌈c⌉) requests already spent. A sliding
// log's admitted starts with its carried entries, of which there are
// carried.
func checkCarriedBound(t *rapid.T, r admit.Rule, t0 time.Duration, whole int64, c *big.Rat, carried int, admitted []time.Duration) {
	l, w := int64(r.Limit), int64(r.Window)
	switch r.Algorithm {
	case admit.TokenBucket:
		// count ≤ (L − c) + (t − t0)·L/W, i.e. count·W ≤ (L − c)·W + (t − t0)·L.
		for i, at := range admitted {
			count := big.NewRat(int64(i+1)*w, 1)
			bound := new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(l, 1), c), big.NewRat(w, 1))
			bound.Add(bound, big.NewRat(int64(at-t0)*l, 1))
			if count.Cmp(bound) > 0 {
				t.Fatalf("%v: %d admitted in [t0, t0+%v], more than (L − %v) + elapsed·L/W", r, i+1, at-t0, c.FloatString(3))
			}
		}
	case admit.FixedWindow, admit.SlidingCounter:
		first := floorDiv(int64(t0), w)
		counts := map[int64]int64{}
		for _, at := range admitted {
			counts[floorDiv(int64(at), w)]++
		}
		for k, n := range counts {
			bound := l
			if k == first {
				bound = l - whole
			}
			if n > bound {
				t.Fatalf("%v: %d admitted in window %d (first after the change: %d), more than %d", r, n, k, first, bound)
			}
		}
	case admit.SlidingLog:
		// admitted starts with the carried entries (which may be more than
		// L): no span of W ending at an admission holds more than L of them
		// and the admissions together.
		for k := carried; k < len(admitted); k++ {
			i := k
			for i > 0 && int64(admitted[k]-admitted[i-1]) < w {
				i--
			}
			if int64(k+1-i) > l {
				t.Fatalf("%v: %d admitted within one window up to %v (t0 %v, all %v)", r, k+1-i, admitted[k], t0, admitted)
			}
		}
	}
}

// TestConvertSameWindowCounts checks that carrying between windows of the
// same length keeps a fixed window's and a log's count exactly: with
// KeepConsumed, the new rule's Remaining is L' − min(count, L'), the
// state it would have left had it been in force all along.
func TestConvertSameWindowCounts(t *testing.T) {
	for _, alg := range []admit.Algorithm{admit.FixedWindow, admit.SlidingLog} {
		for _, tc := range []struct{ oldLimit, newLimit, used, want int }{
			{10, 20, 7, 13}, // raised: no fresh burst
			{10, 5, 7, 0},   // lowered below what was spent: none left
			{10, 5, 3, 2},
			{10, 10, 0, 10},
		} {
			oldRule := admit.Rule{Algorithm: alg, Limit: tc.oldLimit, Window: time.Minute}
			newRule := admit.Rule{Algorithm: alg, Limit: tc.newLimit, Window: time.Minute}
			ol, _ := admit.NewLimits(oldRule)
			nl, _ := admit.NewLimits(newRule)
			from, to := NewComposite(ol), NewComposite(nl)
			fs := make([]PartState, 1)
			now := 10 * time.Hour
			for range tc.used {
				v, _ := from.Decide(fs, now, 1)
				require.True(t, v.Allowed)
				now += time.Second
			}
			ts := make([]PartState, 1)
			Convert(from, fs, to, ts, now, KeepConsumed)
			v, _ := to.Decide(ts, now, 0)
			require.Equal(t, tc.want, v.Remaining, "%v -> %v after %d", oldRule, newRule, tc.used)
		}
	}
}

// TestConvertTokenBucketRaised: raising a token bucket's limit keeps its
// debt in tokens, so a client that spent 7 of 10 has 13 of 20, not 20.
func TestConvertTokenBucketRaised(t *testing.T) {
	ol, _ := admit.ParseLimits("token-bucket,10,1s")
	nl, _ := admit.ParseLimits("token-bucket,20,1s")
	from, to := NewComposite(ol), NewComposite(nl)
	fs := make([]PartState, 1)
	now := time.Hour
	for range 7 {
		from.Decide(fs, now, 1)
	}
	for _, tc := range []struct {
		carry Conversion
		want  int
	}{{KeepConsumed, 13}, {KeepProportional, 6}, {KeepNothing, 20}} {
		ts := make([]PartState, 1)
		Convert(from, fs, to, ts, now, tc.carry)
		v, _ := to.Decide(ts, now, 0)
		require.Equal(t, tc.want, v.Remaining, "carry %d", tc.carry)
	}
}

// TestConvertComposite: each new part carries from the old part with its
// window; a part whose window the old limits lack carries from the nearest.
func TestConvertComposite(t *testing.T) {
	ol, _ := admit.ParseLimits("token-bucket,10,1s + fixed-window,30,1m")
	nl, _ := admit.ParseLimits("fixed-window,60,1m + token-bucket,20,1s + sliding-log,100,1h")
	from, to := NewComposite(ol), NewComposite(nl)
	fs := make([]PartState, 2)
	now := 10 * time.Hour
	for range 7 {
		from.Decide(fs, now, 1)
	}
	ts := make([]PartState, 3)
	Convert(from, fs, to, ts, now, KeepConsumed)
	for i, want := range []int{53, 13, 93} { // 60−7 (the window's 7), 20−7 (the bucket's), 100−7 (nearest: the minute's 7)
		st := []PartState{ts[i]}
		one, _ := admit.NewLimits(nl.At(i))
		v, _ := NewComposite(one).Decide(st, now, 0)
		require.Equal(t, want, v.Remaining, "part %d (%v)", i, nl.At(i))
	}
}

// TestConvertSourceTie: a new part whose window no old part shares carries
// from the old part nearest it by ratio, compared exactly, the first on a
// tie (1s and 9s are equally near 3s: 3/1 = 9/3).
func TestConvertSourceTie(t *testing.T) {
	for _, tc := range []struct {
		old  string
		want int
	}{
		{"fixed-window,5,1s + fixed-window,50,9s", 0},
		{"fixed-window,50,9s + fixed-window,5,1s", 0},
		{"fixed-window,5,1s + fixed-window,50,8s", 1}, // 8/3 < 3/1
		{"fixed-window,5,1s + fixed-window,50,10s", 0},
	} {
		ol, err := admit.ParseLimits(tc.old)
		require.NoError(t, err)
		got := NewComposite(ol).source(admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: 3 * time.Second})
		require.Equal(t, tc.want, got, tc.old)
	}
}
