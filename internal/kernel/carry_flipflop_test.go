package kernel

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// spend admits requests of one on s at now until the first denial and
// returns how many passed, at most max (a guard against a state that
// never denies).
func spend(c *Composite, s []PartState, now time.Duration, max int) int {
	for i := range max {
		if v, _ := c.Decide(s, now, 1); !v.Allowed {
			return i
		}
	}
	return max
}

// TestConvertFlipFlop is issue 25's scenario in the kernel: on a frozen
// clock, a key spends 10 of 10, its limit goes to 5 and back to 10, five
// times over. With KeepConsumed and KeepProportional no change hands out
// budget: 10 pass in all, where "at most the new Limit" carried 5 back on
// every raise (30 in five cycles).
func TestConvertFlipFlop(t *testing.T) {
	for _, alg := range allAlgorithms {
		for _, carry := range []Conversion{KeepConsumed, KeepProportional} {
			name := fmt.Sprintf("%v/carry=%d", alg, carry)
			ten, err := admit.NewLimits(admit.Rule{Algorithm: alg, Limit: 10, Window: time.Hour})
			require.NoError(t, err)
			five, err := admit.NewLimits(admit.Rule{Algorithm: alg, Limit: 5, Window: time.Hour})
			require.NoError(t, err)
			hi, lo := NewComposite(ten), NewComposite(five)
			now := 5 * time.Hour
			s := make([]PartState, 1)
			total := spend(hi, s, now, 100)
			for cycle := range 5 {
				down := make([]PartState, 1)
				Convert(hi, s, lo, down, now, carry)
				total += spend(lo, down, now, 100)
				v, _ := lo.Decide(down, now, 0)
				require.Equal(t, 0, v.Remaining, "%s: cycle %d: the lowered limit's probe", name, cycle)
				s = make([]PartState, 1)
				Convert(lo, down, hi, s, now, carry)
				total += spend(hi, s, now, 100)
			}
			require.Equal(t, 10, total, "%s: admitted over five cycles of 10 -> 5 -> 10 on a frozen clock", name)
		}
	}
}

// drawChainLimits draws the limits of one book in a chain of Reloads: one
// to three rules of any algorithm, small limits, a few shared windows, so
// that the parts' sources vary (same window and algorithm, same window,
// nearest window).
func drawChainLimits(t *rapid.T, label string) *Composite {
	parts := rapid.IntRange(1, 3).Draw(t, label+"Parts")
	var rules []admit.Rule
	for i := range parts {
		r := admit.Rule{
			Algorithm: rapid.SampledFrom(allAlgorithms).Draw(t, fmt.Sprintf("%sAlg%d", label, i)),
			Limit:     rapid.IntRange(1, 20).Draw(t, fmt.Sprintf("%sLimit%d", label, i)),
			Window:    rapid.SampledFrom([]time.Duration{time.Second, time.Minute, time.Hour}).Draw(t, fmt.Sprintf("%sWindow%d", label, i)),
		}
		dup := false
		for _, o := range rules {
			dup = dup || (o.Window == r.Window && o.Algorithm == r.Algorithm)
		}
		if !dup {
			rules = append(rules, r)
		}
	}
	l, err := admit.NewLimits(rules...)
	if err != nil {
		t.Skip(err) // a book the library refuses is no chain
	}
	return NewComposite(l)
}

// TestConvertChainBound is the promise of Convert over any chain of
// changes on a frozen clock: with KeepConsumed a key is admitted at most
// the largest Limit (the smallest rule's, for a composite) of the limits
// it was under; with KeepProportional at most the largest Limit of any
// rule it was under (the same for one-rule limits).
func TestConvertChainBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		carry := rapid.SampledFrom([]Conversion{KeepConsumed, KeepProportional}).Draw(t, "carry")
		now := time.Duration(rapid.Int64Range(0, int64(1000*time.Hour)).Draw(t, "now"))
		c := drawChainLimits(t, "book0")
		s := make([]PartState, c.Len())
		bound, total := 0, 0
		for step := range rapid.IntRange(1, 12).Draw(t, "books") {
			if step > 0 {
				next := drawChainLimits(t, fmt.Sprintf("book%d", step))
				ns := make([]PartState, next.Len())
				Convert(c, s, next, ns, now, carry)
				c, s = next, ns
			}
			bound = max(bound, chainLimit(c, carry))
			for range rapid.IntRange(0, 30).Draw(t, "calls") {
				n := rapid.IntRange(0, 4).Draw(t, "n")
				if v, _ := c.Decide(s, now, n); v.Allowed {
					total += n
				}
			}
			if total > bound {
				t.Fatalf("carry %d: %d admitted after book %d (%v), more than %d, the largest limit in force", carry, total, step, c.Limits(), bound)
			}
		}
	})
}

// chainLimit is what one book adds to the bound of TestConvertChainBound.
func chainLimit(c *Composite, carry Conversion) int {
	if carry == KeepConsumed {
		return c.Limit()
	}
	m := 0
	for i := range c.Len() {
		m = max(m, c.PartLimit(i))
	}
	return m
}

// TestConvertPastLimitDecides: a key that spent 10 under a Limit of 10
// keeps all 10 when the Limit goes to 5 (Convert no longer clamps), and
// each kernel decides on that state as on any state past its Limit:
// denied, Remaining 0, RetryAfter when one request fits again and
// ResetAfter when the key is fresh again.
func TestConvertPastLimitDecides(t *testing.T) {
	const now = 5 * time.Hour // a window's start
	for _, tc := range []struct {
		alg          admit.Algorithm
		retry, reset time.Duration
		wantConsumed int64
	}{
		// 10 tokens owed at 5 per hour: full at +2h, one fits at +2h+12m−1h.
		{admit.TokenBucket, 72 * time.Minute, 2 * time.Hour, 10},
		{admit.FixedWindow, time.Hour, time.Hour, 10},
		// 10 in this window: next window 10×(W−e)/W + 1 <= 5 at e = 0.6W.
		{admit.SlidingCounter, time.Hour + 36*time.Minute, 2 * time.Hour, 10},
		{admit.SlidingLog, time.Hour, time.Hour, 10},
	} {
		ten, _ := admit.NewLimits(admit.Rule{Algorithm: tc.alg, Limit: 10, Window: time.Hour})
		five, _ := admit.NewLimits(admit.Rule{Algorithm: tc.alg, Limit: 5, Window: time.Hour})
		hi, lo := NewComposite(ten), NewComposite(five)
		s := make([]PartState, 1)
		require.Equal(t, 10, spend(hi, s, now, 100))
		down := make([]PartState, 1)
		Convert(hi, s, lo, down, now, KeepConsumed)
		require.Zero(t, lo.consumed(0, &down[0], now).Cmp(big.NewRat(tc.wantConsumed, 1)), "%v: consumption kept", tc.alg)
		probe, _ := lo.Decide(down, now, 0)
		require.Equal(t, Verdict{Allowed: true, ResetAfter: tc.reset}, probe, "%v: probe", tc.alg)
		v, _ := lo.Decide(down, now, 1)
		require.Equal(t, Verdict{RetryAfter: tc.retry, ResetAfter: tc.reset}, v, "%v: one more", tc.alg)
		later, _ := lo.Decide(down, now+tc.retry, 1)
		require.True(t, later.Allowed, "%v: one fits at now+RetryAfter", tc.alg)
	}
}

// TestWindowWordsHoldCarriedCounts: the packed window words keep a count
// a change of limits carried past the Limit (10 under a Limit of 5), and
// pack a count past their room as the largest they hold.
func TestWindowWordsHoldCarriedCounts(t *testing.T) {
	fw := NewFixedWindow(admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Hour})
	fp := fw.Word()
	s := FixedWindowState{Window: fw.Index(5 * time.Hour), Count: 10}
	require.Equal(t, s, fp.Unpack(fp.Pack(s)))
	require.GreaterOrEqual(t, fp.cb, uint(42), "an hour's window leaves the count 42 bits")
	huge := FixedWindowState{Window: s.Window, Count: 1 << 60}
	require.Equal(t, int64(fp.mask), fp.Unpack(fp.Pack(huge)).Count)

	sc := NewSlidingCounter(admit.Rule{Algorithm: admit.SlidingCounter, Limit: 5, Window: time.Hour})
	sp, ok := sc.Word()
	require.True(t, ok)
	st := SlidingCounterState{Window: sc.Index(5 * time.Hour), Prev: 1000, Curr: 10}
	require.Equal(t, st, sp.Unpack(sp.Pack(st)))
	require.GreaterOrEqual(t, sp.cb, uint(21), "an hour's window leaves each count 21 bits")
}

// TestSlidingCounterPastLimit holds the sliding counter to the reference
// model on the states only a change of limits makes: counts past the Limit
// (up to 2^31, what Convert carries at most), in the current window or,
// once it rolls, the previous one, with windows up to 2^61 ns whatever
// their divisor. Every Decision must be the model's, and AllowOne must
// decline or agree with Decide. A probe of a previous window past the
// Limit once found Remaining = Limit: the count weighed more than the
// whole budget, and the divider, exact only for a dividend >= 0, was given
// the negative remainder (redisstore, which divides with floor, said 0).
func TestSlidingCounterPastLimit(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.OneOf(rapid.IntRange(1, 12), rapid.SampledFrom([]int{1000, 1 << 20, admit.MaxLimit})).Draw(rt, "limit")
		l := int64(limit)
		hi := min(int64(1)<<61, admit.MaxLimitTimesWindow/l)
		w := rapid.OneOf(
			rapid.Int64Range(l, max(l, min(hi, 1000))),
			rapid.Int64Range(l, hi),
			rapid.Just(hi),
			rapid.SampledFrom([]int64{12, 24, 162, 1 << 10, int64(time.Hour)}),
		).Draw(rt, "window")
		w = max(l, min(w, hi))
		r := sc(limit, time.Duration(w))
		k := NewSlidingCounter(r)
		const bound = int64(1) << 60 // keeps the model's (window+2)×W within an int64
		now := rapid.Int64Range(-bound, bound).Draw(rt, "start")
		count := func(label string) int64 {
			return rapid.OneOf(
				rapid.Int64Range(0, l),
				rapid.Int64Range(l+1, 4*l+4),
				rapid.Int64Range(0, 1<<31),
			).Draw(rt, label)
		}
		s := SlidingCounterState{Window: k.Index(time.Duration(now)) + rapid.Int64Range(-1, 1).Draw(rt, "shift"), Prev: count("prev"), Curr: count("curr")}
		m := &refSlidingCounter{limit: l, window: w, counts: map[int64]int64{s.Window - 1: s.Prev, s.Window: s.Curr}, admitted: s != SlidingCounterState{Window: s.Window}, top: s.Window}
		for i := range rapid.IntRange(1, 8).Draw(rt, "calls") {
			if i > 0 {
				switch rapid.IntRange(0, 3).Draw(rt, "move") {
				case 1:
					now += rapid.Int64Range(0, 10).Draw(rt, "nudge")
				case 2:
					now += rapid.Int64Range(0, 2*w).Draw(rt, "advance")
				case 3:
					now -= rapid.Int64Range(0, 2*w).Draw(rt, "back")
				}
				now = max(-bound, min(now, bound))
			}
			n := drawN(rt, limit, "n")
			if n == 1 {
				one := s
				want := s
				v, ok := k.AllowOne(&one, time.Duration(now))
				if wantV := k.Decide(&want, time.Duration(now), 1); ok && (v != wantV || one != want) {
					rt.Fatalf("call %d: %v AllowOne(%+v, t=%d) = %+v, %+v; Decide: %+v, %+v", i, r, s, now, v, one, wantV, want)
				}
			}
			before := s
			got, want := k.Allow(&s, time.Duration(now), n), m.Allow(time.Duration(now), n)
			if got != want {
				rt.Fatalf("call %d: %v on %+v AllowN(t=%d, %d) = %s, reference model %s", i, r, before, now, n, fmtDecision(got), fmtDecision(want))
			}
		}
	})
}
