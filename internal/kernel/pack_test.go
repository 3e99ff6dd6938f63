package kernel

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// TestPackHorizon pins the scaled packing's bit map and horizon: the units
// L' = L/gcd(L, W) and the largest |TAT| that packs, MaxInt64/L' - 1 ns,
// for the rules the documentation quotes; a state exactly at the horizon
// packs and restores, one nanosecond past it does not pack; and no packed
// word is 1 or 2 (the atomic variant's sentinels), or 0 unless the state is
// the zero state.
func TestPackHorizon(t *testing.T) {
	const day = 24 * float64(time.Hour)
	for _, tc := range []struct {
		rule  admit.Rule
		units int64
		days  float64 // the horizon in days, rounded to 0.1 day
	}{
		{tb(5, 10*time.Second), 1, 0},       // whole nanoseconds: no horizon
		{tb(3, 10*time.Second), 3, 35584.0}, // gcd(3, 10^10) = 1: 97.4 years
		{tb(3, time.Second), 3, 35584.0},
		{tb(7, time.Minute), 7, 15250.3}, // 41.8 years
		{tb(9999, time.Second), 9999, 10.7},
		{tb(4096, time.Second), 8, 13344.0}, // gcd = 512: 36.5 years
		{tb(admit.MaxLimit, admit.MaxLimit), 1, 0},
	} {
		k := NewTokenBucket(tc.rule)
		if k.Units() != tc.units {
			t.Errorf("%v: Units() = %d, want %d", tc.rule, k.Units(), tc.units)
		}
		h := k.Horizon()
		if tc.units == 1 {
			if h != math.MaxInt64 {
				t.Errorf("%v: Horizon() = %d, want MaxInt64", tc.rule, h)
			}
			continue
		}
		if want := time.Duration(math.MaxInt64/tc.units - 1); h != want {
			t.Errorf("%v: Horizon() = %d, want %d", tc.rule, h, want)
		}
		if days := math.Round(float64(h)/day*10) / 10; days != tc.days {
			t.Errorf("%v: horizon %.1f days, want %.1f", tc.rule, days, tc.days)
		}
		for _, tat := range []int64{int64(h), -int64(h)} {
			for _, frac := range []int64{0, (tc.units - 1) * (int64(tc.rule.Limit) / tc.units)} {
				s := TokenBucketState{TAT: uint64(tat) ^ bias, Frac: frac}
				w, ok := k.Pack(s)
				if !ok || w <= 2 || k.Unpack(w) != s {
					t.Errorf("%v: Pack(TAT %d, Frac %d) = %d, %v; Unpack = %+v", tc.rule, tat, frac, w, ok, k.Unpack(w))
				}
				past := TokenBucketState{TAT: uint64(tat+sign(tat)) ^ bias, Frac: frac}
				if _, ok := k.Pack(past); ok {
					t.Errorf("%v: TAT %d, past the horizon, packs", tc.rule, tat+sign(tat))
				}
			}
		}
		if w, ok := k.Pack(TokenBucketState{}); w != 0 || !ok {
			t.Errorf("%v: the zero state packs as %d, %v, want 0", tc.rule, w, ok)
		}
	}
}

func sign(x int64) int64 {
	if x < 0 {
		return -1
	}
	return 1
}

// TestPackRoundTrip: every state the kernel writes, from generated
// sequences of admissions and reservations on any rule (readings anywhere in
// the clock range, stale, and at its ends), packs to a word that restores it
// exactly, or, past the horizon, reports that it does not fit; and the
// decisions on the restored state are the kernel's on the original.
func TestPackRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.SampledFrom([]int{1, 2, 3, 7, 9999, rapid.IntRange(1, admit.MaxLimit).Draw(rt, "anyLimit")}).Draw(rt, "limit")
		hi := int64(admit.MaxLimitTimesWindow) / int64(limit)
		window := rapid.SampledFrom([]int64{int64(limit), int64(time.Second), int64(time.Minute), rapid.Int64Range(int64(limit), hi).Draw(rt, "anyWindow")}).Draw(rt, "window")
		r := tb(limit, time.Duration(max(int64(limit), min(window, hi))))
		k := NewTokenBucket(r)
		var s TokenBucketState
		now := time.Duration(0)
		for i := range rapid.IntRange(1, 30).Draw(rt, "ops") {
			switch rapid.IntRange(0, 3).Draw(rt, "move") {
			case 0:
				now = time.Duration(rapid.Int64().Draw(rt, "anywhere"))
			case 1:
				now = rapid.SampledFrom([]time.Duration{maxTime, minTime, k.Horizon(), -k.Horizon(), k.Horizon() - r.Window}).Draw(rt, "edge")
			default:
				now += time.Duration(rapid.Int64Range(-2*int64(r.Window), 2*int64(r.Window)).Draw(rt, "step"))
			}
			n := rapid.IntRange(0, r.Limit).Draw(rt, "n")
			if rapid.Bool().Draw(rt, "reserve") {
				k.Reserve(&s, now, n, time.Duration(rapid.Int64Range(0, 4*min(int64(r.Window), math.MaxInt64/8)).Draw(rt, "maxWait")))
			} else {
				k.Decide(&s, now, n)
			}
			w, ok := k.Pack(s)
			tat := int64(s.TAT ^ bias)
			fits := s.TAT == 0 || k.Units() == 1 || (tat <= int64(k.Horizon()) && tat >= -int64(k.Horizon()))
			if ok != fits {
				rt.Fatalf("%v op %d: Pack(%+v) fits %v, want %v", r, i, s, ok, fits)
			}
			if !ok {
				continue
			}
			if w == 1 || w == 2 || (w == 0) != (s == TokenBucketState{}) {
				rt.Fatalf("%v op %d: Pack(%+v) = %d, a sentinel or a false zero", r, i, s, w)
			}
			u := k.Unpack(w)
			if u != s {
				rt.Fatalf("%v op %d: Unpack(Pack(%+v)) = %+v", r, i, s, u)
			}
			probe := time.Duration(rapid.Int64().Draw(rt, "probe"))
			pn := rapid.IntRange(-1, r.Limit+1).Draw(rt, "probeN")
			a, b := s, u
			if va, vb := k.Decide(&a, probe, pn), k.Decide(&b, probe, pn); va != vb || a != b {
				rt.Fatalf("%v op %d: Decide(t=%d, %d) on the restored state = %+v, want %+v", r, i, probe, pn, vb, va)
			}
		}
	})
}

// TestAllowOneEqualsDecide: the one-token fast path is the kernel. Over
// random rules (whole-nanosecond and scaled, horizons long and short),
// random packed states (from random admissions and reservations, and raw
// words anywhere in the packed range) and readings (anywhere, at the ends of
// the clock range and of the horizon, stale by up to two windows or by
// anything), AllowOne either declines, or returns exactly Decide's Verdict
// and the packed word of Decide's state; and it declines only for denials
// and readings outside its range, so the test is not vacuous.
func TestAllowOneEqualsDecide(t *testing.T) {
	taken := 0
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.SampledFrom([]int{1, 2, 3, 7, 1000, 9999, rapid.IntRange(1, admit.MaxLimit).Draw(rt, "anyLimit")}).Draw(rt, "limit")
		hi := int64(admit.MaxLimitTimesWindow) / int64(limit)
		window := rapid.SampledFrom([]int64{int64(limit), int64(limit) + 1, int64(time.Second), int64(time.Minute), hi, rapid.Int64Range(int64(limit), hi).Draw(rt, "anyWindow")}).Draw(rt, "window")
		r := tb(limit, time.Duration(max(int64(limit), min(window, hi))))
		k := NewTokenBucket(r)
		var s TokenBucketState
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			switch rapid.IntRange(0, 5).Draw(rt, "move") {
			case 0:
				now = time.Duration(rapid.Int64().Draw(rt, "anywhere"))
			case 1:
				now = rapid.SampledFrom([]time.Duration{maxTime, minTime, maxTime + 1, k.Horizon() - r.Window, k.Horizon() - r.Window + 1, -k.Horizon(), -k.Horizon() - 1}).Draw(rt, "edge")
			case 2:
				if w := rapid.Uint64().Draw(rt, "word"); w > 2 {
					s = k.Unpack(w) // any packed state, as found in a cell
				}
			default:
				now += time.Duration(rapid.Int64Range(-2*min(int64(r.Window), 1<<60), 2*min(int64(r.Window), 1<<60)).Draw(rt, "step"))
			}
			w, packs := k.Pack(s)
			if !packs {
				s = TokenBucketState{}
				w = 0
			}
			want := s
			wantV := k.Decide(&want, now, 1)
			nw, owed, ok := k.AllowOne(w, now)
			if ok {
				taken++
				v := Verdict{Allowed: true}
				v.Remaining, v.ResetAfter = k.OneVerdict(owed)
				wantW, _ := k.Pack(want)
				if v != wantV || nw != wantW {
					rt.Fatalf("%v op %d: AllowOne(%d, t=%d) = %d, %+v; Decide: %d (%+v), %+v", r, i, w, now, nw, v, wantW, want, wantV)
				}
				s = want
				continue
			}
			inRange := now >= max(minTime, -k.Horizon()) && now <= min(maxTime, k.Horizon()-r.Window)
			if k.Units() == 1 {
				inRange = now >= minTime && now <= maxTime
			}
			if wantV.Allowed && inRange {
				rt.Fatalf("%v op %d: AllowOne(%d, t=%d) declined an admission in its range (%+v)", r, i, w, now, wantV)
			}
			if rapid.Bool().Draw(rt, "reserve") {
				k.Reserve(&s, now, rapid.IntRange(1, r.Limit).Draw(rt, "n"), time.Duration(rapid.Int64Range(0, 2*min(int64(r.Window), 1<<60)).Draw(rt, "maxWait")))
			} else {
				s = want
			}
		}
	})
	t.Logf("AllowOne decided %d admissions", taken)
	if taken == 0 {
		t.Fatal("AllowOne never took the fast path")
	}
}

// TestFixedWindowAllowOneEqualsDecide: the fixed window's one-request fast
// path is the kernel, over random rules, states (from random sequences, and
// arbitrary ones) and readings (anywhere, at the clock range's ends, stale),
// and it declines only denials, stale readings and readings outside the
// clock range.
func TestFixedWindowAllowOneEqualsDecide(t *testing.T) {
	taken := 0
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.SampledFrom([]int{1, 2, 3, 1000, rapid.IntRange(1, admit.MaxLimit).Draw(rt, "anyLimit")}).Draw(rt, "limit")
		hi := int64(admit.MaxLimitTimesWindow) / int64(limit)
		window := rapid.SampledFrom([]int64{int64(limit), int64(time.Second), hi, rapid.Int64Range(int64(limit), hi).Draw(rt, "anyWindow")}).Draw(rt, "window")
		r := rule(admit.FixedWindow, limit, time.Duration(max(int64(limit), min(window, hi))))
		k := NewFixedWindow(r)
		var s FixedWindowState
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			switch rapid.IntRange(0, 5).Draw(rt, "move") {
			case 0:
				now = time.Duration(rapid.Int64().Draw(rt, "anywhere"))
			case 1:
				now = rapid.SampledFrom([]time.Duration{maxTime, minTime, maxTime + 1, minTime - 1}).Draw(rt, "edge")
			case 2:
				if c := rapid.Int64Range(0, int64(limit)).Draw(rt, "count"); c > 0 {
					s = FixedWindowState{Window: k.Index(time.Duration(rapid.Int64().Draw(rt, "at"))), Count: c}
				}
			default:
				now += time.Duration(rapid.Int64Range(-2*min(int64(r.Window), 1<<60), 2*min(int64(r.Window), 1<<60)).Draw(rt, "step"))
			}
			want := s
			wantV := k.Decide(&want, now, 1)
			got := s
			v, ok := k.AllowOne(&got, now)
			if ok {
				taken++
				if v != wantV || got != want {
					rt.Fatalf("%v op %d: AllowOne(%+v, t=%d) = %+v, %+v; Decide: %+v, %+v", r, i, s, now, v, got, wantV, want)
				}
			} else if got != s {
				rt.Fatalf("%v op %d: AllowOne declined but moved the state", r, i)
			} else if wantV.Allowed && now >= minTime && now <= maxTime && (s.Count == 0 || k.Index(now) >= s.Window) {
				rt.Fatalf("%v op %d: AllowOne(%+v, t=%d) declined an admission in its range", r, i, s, now)
			}
			s = want
		}
	})
	if taken == 0 {
		t.Fatal("AllowOne never took the fast path")
	}
}

// TestSlidingCounterAllowOneEqualsDecide: the sliding counter's one-request fast
// path is the kernel, over random rules, states (from random sequences, and
// arbitrary ones) and readings (anywhere, at the clock range's ends, stale),
// and it declines only denials, stale readings and readings outside the
// clock range.
func TestSlidingCounterAllowOneEqualsDecide(t *testing.T) {
	taken := 0
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.SampledFrom([]int{1, 2, 3, 1000, rapid.IntRange(1, admit.MaxLimit).Draw(rt, "anyLimit")}).Draw(rt, "limit")
		hi := int64(admit.MaxLimitTimesWindow) / int64(limit)
		window := rapid.SampledFrom([]int64{int64(limit), int64(time.Second), hi, rapid.Int64Range(int64(limit), hi).Draw(rt, "anyWindow")}).Draw(rt, "window")
		r := rule(admit.SlidingCounter, limit, time.Duration(max(int64(limit), min(window, hi))))
		k := NewSlidingCounter(r)
		var s SlidingCounterState
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			switch rapid.IntRange(0, 5).Draw(rt, "move") {
			case 0:
				now = time.Duration(rapid.Int64().Draw(rt, "anywhere"))
			case 1:
				now = rapid.SampledFrom([]time.Duration{maxTime, minTime, maxTime + 1, minTime - 1}).Draw(rt, "edge")
			case 2:
				s = SlidingCounterState{
					Window: k.Index(time.Duration(rapid.Int64().Draw(rt, "at"))),
					Prev:   rapid.Int64Range(0, int64(limit)).Draw(rt, "prev"),
					Curr:   rapid.Int64Range(0, int64(limit)).Draw(rt, "curr"),
				}
			default:
				now += time.Duration(rapid.Int64Range(-2*min(int64(r.Window), 1<<60), 2*min(int64(r.Window), 1<<60)).Draw(rt, "step"))
			}
			want := s
			wantV := k.Decide(&want, now, 1)
			got := s
			v, ok := k.AllowOne(&got, now)
			if ok {
				taken++
				if v != wantV || got != want {
					rt.Fatalf("%v op %d: AllowOne(%+v, t=%d) = %+v, %+v; Decide: %+v, %+v", r, i, s, now, v, got, wantV, want)
				}
			} else if got != s {
				rt.Fatalf("%v op %d: AllowOne declined but moved the state", r, i)
			} else if wantV.Allowed && now >= minTime && now <= maxTime && (s.Prev == 0 && s.Curr == 0 || k.Index(now) >= s.Window) {
				rt.Fatalf("%v op %d: AllowOne(%+v, t=%d) declined an admission in its range", r, i, s, now)
			}
			s = want
		}
	})
	if taken == 0 {
		t.Fatal("AllowOne never took the fast path")
	}
}
