package atomic_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// The keyed store's fast path for a request of one (kcell.allowOne: the
// kernels' AllowOne on the packed word and one CAS) against the kernel, its
// specification: on the cell alone, and through the store's Allow, which
// falls back to the general kernel for whatever the fast path declines.

// drawKeyedRule draws a rule of any algorithm New takes: any token bucket
// (drawAnyBucket: 3 per second, 7 per minute, 9,999 per second and others
// whose emission interval is not whole nanoseconds), and fixed windows and
// sliding counters near their packing limits (drawWindowRule), the sliding
// counter's up to one past the largest Limit its counts pack.
func drawKeyedRule(rt *rapid.T) admit.Rule {
	switch rapid.IntRange(0, 2).Draw(rt, "algorithm") {
	case 0:
		return drawAnyBucket(rt)
	case 1:
		return drawWindowRule(rt, admit.FixedWindow, admit.MaxLimit)
	}
	return drawWindowRule(rt, admit.SlidingCounter, 1<<16)
}

// kernelOf is r's kernel on states of type any (the kernel's own state
// types, as admitatomic.SetState takes them): Allow and Decide on a copy of
// s, returning the state after.
type kernelOf struct {
	zero   any
	allow  func(s any, now time.Duration, n int) (any, admit.Decision)
	decide func(s any, now time.Duration, n int) (any, kernel.Verdict)
}

type anyKernel[S any] interface {
	Allow(s *S, now time.Duration, n int) admit.Decision
	Decide(s *S, now time.Duration, n int) kernel.Verdict
}

func kernelFor[S any, K anyKernel[S]](k K) kernelOf {
	var zero S
	return kernelOf{
		zero: zero,
		allow: func(s any, now time.Duration, n int) (any, admit.Decision) {
			st := s.(S)
			d := k.Allow(&st, now, n)
			return st, d
		},
		decide: func(s any, now time.Duration, n int) (any, kernel.Verdict) {
			st := s.(S)
			v := k.Decide(&st, now, n)
			return st, v
		},
	}
}

func newKernelOf(r admit.Rule) kernelOf {
	switch r.Algorithm {
	case admit.TokenBucket:
		return kernelFor[kernel.TokenBucketState](kernel.NewTokenBucket(r))
	case admit.FixedWindow:
		return kernelFor[kernel.FixedWindowState](kernel.NewFixedWindow(r))
	}
	return kernelFor[kernel.SlidingCounterState](kernel.NewSlidingCounter(r))
}

// drawPrior draws a state of r's algorithm that a keyed cell may hold, near
// reading base or anywhere: the fresh state; for a token bucket any packed
// word (as found in a cell), a TAT within two windows of base (in debt,
// full, at the edge of admitting one more), or one the kernel left after a
// few reservations, which may owe more than a window; for a fixed window or
// a sliding counter, counts of at least one in the current window (a cell
// publishes only after an admission) within two windows of base's.
func drawPrior(rt *rapid.T, r admit.Rule, base time.Duration) any {
	switch r.Algorithm {
	case admit.TokenBucket:
		k := kernel.NewTokenBucket(r)
		var s kernel.TokenBucketState
		switch rapid.IntRange(0, 3).Draw(rt, "priorKind") {
		case 0:
		case 1:
			s = k.Unpack(rapid.Uint64Min(3).Draw(rt, "word"))
		default:
			g := int64(r.Limit) / k.Units() // gcd(Limit, Window): the step of Frac
			w := int64(r.Window)
			off := rapid.SampledFrom([]int64{0, 1, -1, w, w - w/int64(r.Limit), w - w/int64(r.Limit) - 1,
				rapid.Int64Range(-2*min(w, 1<<61), 2*min(w, 1<<61)).Draw(rt, "anyOff")}).Draw(rt, "off")
			tat := addSat(max(-clockEnd, min(base, clockEnd)), time.Duration(off))
			s = kernel.TokenBucketState{TAT: uint64(tat) ^ 1<<63, Frac: g * rapid.Int64Range(0, k.Units()-1).Draw(rt, "frac")}
			if tat == math.MinInt64 {
				s = kernel.TokenBucketState{}
			}
		}
		for range rapid.IntRange(0, 3).Draw(rt, "reservations") {
			at := addSat(base, time.Duration(rapid.Int64Range(-int64(min(r.Window, 1<<60)), int64(min(r.Window, 1<<60))).Draw(rt, "at")))
			k.Reserve(&s, at, rapid.IntRange(1, r.Limit).Draw(rt, "n"), time.Duration(rapid.Int64Range(0, 2*int64(min(r.Window, 1<<60))).Draw(rt, "maxWait")))
		}
		if w, ok := k.Pack(s); ok && w <= 2 && w != 0 {
			return kernel.TokenBucketState{} // the cell's sentinels, which no state the kernel writes packs to
		}
		return s
	case admit.FixedWindow:
		k := kernel.NewFixedWindow(r)
		count := rapid.Int64Range(0, int64(r.Limit)).Draw(rt, "count")
		if count == 0 {
			return kernel.FixedWindowState{}
		}
		idx := k.Index(base) + rapid.Int64Range(-2, 2).Draw(rt, "window")
		return kernel.FixedWindowState{Window: max(k.Index(math.MinInt64), min(idx, k.Index(math.MaxInt64))), Count: count}
	}
	k := kernel.NewSlidingCounter(r)
	curr := rapid.Int64Range(0, int64(r.Limit)).Draw(rt, "curr")
	if curr == 0 {
		return kernel.SlidingCounterState{}
	}
	idx := k.Index(base) + rapid.Int64Range(-2, 2).Draw(rt, "window")
	return kernel.SlidingCounterState{
		Window: max(k.Index(math.MinInt64), min(idx, k.Index(math.MaxInt64))),
		Prev:   rapid.Int64Range(0, int64(r.Limit)).Draw(rt, "prev"),
		Curr:   curr,
	}
}

// TestKeyedAllowOneEqualsDecide: the fast path on a cell holding any prior
// state, at any reading (stale, at and past the clock range's ends, far
// ahead), either admits exactly as the kernel's Decide(s, now, 1) does (the
// same Verdict and the same state after) or declines and leaves the cell
// as it was. It must admit some of the time, or the check proves nothing.
func TestKeyedAllowOneEqualsDecide(t *testing.T) {
	taken := 0
	rapid.Check(t, func(rt *rapid.T) {
		r := drawKeyedRule(rt)
		lim, err := admitatomic.New(r) // the fast path takes its reading as an argument
		require.NoError(rt, err)
		k := newKernelOf(r)
		base := drawReading(rt, 0, r.Window)
		prior := drawPrior(rt, r, base)
		now := drawReading(rt, base, r.Window)
		admitatomic.SetState(lim, "k", prior)
		want, wantV := k.decide(prior, now, 1)
		v, ok := admitatomic.AllowOne(lim, "k", now)
		got := admitatomic.State(lim, "k")
		if !ok {
			if got != prior {
				rt.Fatalf("%v: the fast path on %+v at t=%d declined but left %+v", r, prior, now, got)
			}
			return
		}
		taken++
		if v != wantV || got != want {
			rt.Fatalf("%v: the fast path on %+v at t=%d: %+v, state %+v; Decide: %+v, state %+v", r, prior, now, v, got, wantV, want)
		}
	})
	t.Logf("the fast path admitted %d times", taken)
	if taken == 0 {
		t.Fatal("the fast path never admitted")
	}
}

// TestKeyedAllowEqualsKernel: a keyed store driven through its public API
// (Allow, and AllowN for other n) with a fake clock, from a prior state or a
// fresh key, gives the kernel's Decision on every call and keeps the
// kernel's state, over readings that go stale, jump to the clock range's
// ends and past them, and far ahead.
func TestKeyedAllowEqualsKernel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := drawKeyedRule(rt)
		fake := clock.NewFake()
		fake.Set(drawReading(rt, 0, r.Window))
		lim, err := admitatomic.New(r, admit.WithClock(fake))
		require.NoError(rt, err)
		k := newKernelOf(r)
		s := k.zero
		if rapid.Bool().Draw(rt, "prior") {
			s = drawPrior(rt, r, fake.Now())
			admitatomic.SetState(lim, "k", s)
		}
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			if rapid.IntRange(0, 2).Draw(rt, "op") == 0 {
				fake.Set(drawReading(rt, fake.Now(), r.Window))
				continue
			}
			n := rapid.SampledFrom([]int{1, 1, 1, 1, 0, 2, r.Limit, r.Limit + 1}).Draw(rt, "n")
			now := fake.Now()
			var want admit.Decision
			s, want = k.allow(s, now, n)
			var got admit.Decision
			call := "AllowN"
			if n == 1 && rapid.Bool().Draw(rt, "allow") {
				call, got = "Allow", lim.Allow("k")
			} else {
				got = lim.AllowN("k", n)
			}
			if got != want {
				rt.Fatalf("%v op %d: %s(t=%d, %d) = %+v, want %+v", r, i, call, now, n, got, want)
			}
			st := admitatomic.State(lim, "k")
			if st == nil {
				st = k.zero // never stored: a probe or an impossible n on a fresh key
			}
			if st != s {
				rt.Fatalf("%v op %d: after %s(t=%d, %d) the store holds %+v, the kernel %+v", r, i, call, now, n, st, s)
			}
		}
	})
}

// TestKeyedAllowOneTaken: a fresh key's first admission takes the fast path
// in every packed store.
func TestKeyedAllowOneTaken(t *testing.T) {
	for _, r := range []admit.Rule{
		{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Second},
		{Algorithm: admit.TokenBucket, Limit: 3, Window: time.Second},
		{Algorithm: admit.FixedWindow, Limit: 10, Window: time.Second},
		{Algorithm: admit.SlidingCounter, Limit: 10, Window: time.Second},
	} {
		lim, err := admitatomic.New(r)
		require.NoError(t, err)
		if v, ok := admitatomic.AllowOne(lim, "k", time.Hour); !ok || !v.Allowed {
			t.Errorf("%v: the fast path on a fresh key at 1h: %+v, %v; want an admission", r, v, ok)
		}
	}
}
