package kernel

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// drawPairRule draws a rule of alg for a pair: a small or large limit, a
// window from one request per nanosecond to an hour.
func drawPairRule(t *rapid.T, alg admit.Algorithm, label string) admit.Rule {
	limit := rapid.OneOf(rapid.IntRange(1, 5), rapid.IntRange(1, 20), rapid.SampledFrom([]int{3, 7, 1000, 9999})).Draw(t, label+"-limit")
	l := int64(limit)
	w := rapid.OneOf(
		rapid.Int64Range(l, 20*l),
		rapid.Int64Range(l, max(l, 1<<30)),
		rapid.SampledFrom([]int64{int64(time.Millisecond), int64(time.Second), int64(time.Minute), int64(time.Hour)}),
	).Draw(t, label+"-window")
	return rule(alg, limit, time.Duration(max(w, l)))
}

// TestCompositePairAllowOneEqualsDecide: the pair's one-request fast path
// is Composite.Decide on the unpacked words, over random pairs of token
// buckets, fixed windows and packing sliding counters, states from random
// sequences (admissions of any size, reservations), and readings that move
// forwards, backwards, to the clock range's ends and to a token bucket's
// horizon. Pack and Unpack are inverses on every state the kernels write,
// a fresh state packs as 0, and no state's word 0 is a Spare.
func TestCompositePairAllowOneEqualsDecide(t *testing.T) {
	taken := 0
	rapid.Check(t, func(rt *rapid.T) {
		algs := []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter}
		r0 := drawPairRule(rt, rapid.SampledFrom(algs).Draw(rt, "alg0"), "rule0")
		r1 := drawPairRule(rt, rapid.SampledFrom(algs).Draw(rt, "alg1"), "rule1")
		if r0 == r1 {
			rt.Skip("the same rule twice")
		}
		limits, err := admit.NewLimits(r0, r1)
		if err != nil {
			rt.Fatalf("NewLimits(%v, %v): %v", r0, r1, err)
		}
		c := NewComposite(limits)
		p, ok := c.Pair()
		if !ok {
			for _, r := range []admit.Rule{r0, r1} {
				if _, packs := NewSlidingCounter(r).Word(); r.Algorithm == admit.SlidingCounter && !packs {
					rt.Skip("a sliding counter that does not pack")
				}
			}
			rt.Fatalf("%v, %v: no pair", r0, r1)
		}
		spare1, spare2 := p.Spare(1), p.Spare(2)
		if spare1 == spare2 {
			rt.Fatalf("%v, %v: Spare(1) == Spare(2)", r0, r1)
		}
		s := make([]PartState, 2)
		if w0, w1, ok := p.Pack(s); w0 != 0 || w1 != 0 || !ok {
			rt.Fatalf("%v, %v: a fresh state packs as %d, %d, %v", r0, r1, w0, w1, ok)
		}
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			w := int64(c.Limits().At(rapid.IntRange(0, 1).Draw(rt, "part")).Window)
			switch rapid.IntRange(0, 6).Draw(rt, "move") {
			case 0:
				edges := []time.Duration{maxTime, minTime, maxTime + 1, minTime - 1}
				for _, r := range []admit.Rule{r0, r1} {
					if r.Algorithm == admit.TokenBucket {
						h := NewTokenBucket(r).Horizon()
						edges = append(edges, h-r.Window, h-r.Window+1, -h, -h-1)
					}
				}
				now = rapid.SampledFrom(edges).Draw(rt, "edge")
			case 1:
				now -= time.Duration(rapid.Int64Range(1, w).Draw(rt, "back"))
			default:
				now += time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "step"))
			}
			w0, w1, fits := p.Pack(s)
			if !fits {
				clear(s) // past a token bucket's horizon: the pair does not hold it
				w0, w1 = 0, 0
			}
			if w0 == spare1 || w0 == spare2 {
				rt.Fatalf("%v, %v op %d: state %+v packs as a Spare", r0, r1, i, s)
			}
			back := make([]PartState, 2)
			p.Unpack(w0, w1, back)
			if back[0] != s[0] || back[1] != s[1] {
				rt.Fatalf("%v, %v op %d: Unpack(Pack(%+v)) = %+v", r0, r1, i, s, back)
			}
			want := []PartState{s[0], s[1]}
			wantV, wantWhich := c.Decide(want, now, 1)
			n0, n1, v, which, ok := p.AllowOne(w0, w1, now)
			if ok {
				taken++
				if !wantV.Allowed || v != wantV || which != wantWhich {
					rt.Fatalf("%v, %v op %d: AllowOne(%d, %d, t=%d) = %+v, %d; Decide: %+v, %d", r0, r1, i, w0, w1, now, v, which, wantV, wantWhich)
				}
				if g0, g1, _ := p.Pack(want); n0 != g0 || n1 != g1 {
					rt.Fatalf("%v, %v op %d: AllowOne's words %d, %d; Decide's state %+v packs as %d, %d", r0, r1, i, n0, n1, want, g0, g1)
				}
			}
			if c.Reservable() && rapid.Bool().Draw(rt, "reserve") {
				c.Reserve(s, now, rapid.IntRange(1, c.Limit()).Draw(rt, "reserve-n"), time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "maxWait")))
			} else {
				c.Decide(s, now, rapid.IntRange(0, c.Limit()).Draw(rt, "n"))
			}
		}
	})
	t.Logf("AllowOne decided %d admissions", taken)
	if taken == 0 {
		t.Fatal("AllowOne never took the fast path")
	}
}
