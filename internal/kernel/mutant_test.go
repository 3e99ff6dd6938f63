package kernel

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Tests that kill mutants `make mutate` found alive: each pins a boundary or
// a branch the other tests passed through without looking. The mutants that
// no test can kill are listed, with the reason, in docs/stress.md
// ("Mutation testing").

// TestDividerRefusesNonPositive: a divider of zero would divide by a shift of
// 64 (every quotient 0) instead of failing where it is made.
func TestDividerRefusesNonPositive(t *testing.T) {
	for _, d := range []int64{0, -1, minTime} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newDivider(%d) did not panic", d)
				}
			}()
			newDivider(d)
		}()
	}
	if v := newDivider(1); v.div(7) != 7 {
		t.Errorf("newDivider(1).div(7) = %d, want 7", v.div(7))
	}
}

// TestObserveLive: a hold is live while the state is the one its reservation
// left and its tokens are not due at the newest reading seen, and not a
// nanosecond longer.
func TestObserveLive(t *testing.T) {
	k := NewTokenBucket(tb(1, time.Second))
	var s TokenBucketState
	k.Decide(&s, 0, 1) // empty: the next token comes at 1s
	var h Hold
	d, ok, tr := k.ReserveHold(&s, &h, 0, 1, time.Hour)
	if !ok || d != time.Second || tr == 0 || h.Ticket != tr {
		t.Fatalf("ReserveHold(0, 1) = %v, %t, ticket %d, hold %+v; want 1s, true, a ticket held", d, ok, tr, h)
	}
	due := k.Due(h.After)
	if due != time.Second {
		t.Fatalf("Due = %v, want 1s", due)
	}
	moved := h.After
	moved.TAT++ // something was admitted or reserved since
	for i, c := range []struct {
		s    TokenBucketState
		now  time.Duration
		live bool
	}{
		{h.After, 0, true},
		{h.After, due - 1, true},
		{h.After, due, false},     // due at the reading: spent
		{h.After, due + 1, false}, // and later
		{moved, 0, false},         // another state, not yet due
		{moved, due - 1, false},
		{TokenBucketState{}, 0, false},
	} {
		hc := h
		if got := k.Observe(&hc, c.s, c.now); got != c.live {
			t.Errorf("case %d: Observe(state %+v, now %v) = %t, want %t", i, c.s, c.now, got, c.live)
		}
		if want := max(h.Seen, c.now); hc.Seen != want {
			t.Errorf("case %d: Seen = %v after Observe at %v, want %v", i, hc.Seen, c.now, want)
		}
	}
	zero := Hold{After: h.After}
	if k.Observe(&zero, h.After, 0) {
		t.Error("a hold without a ticket is live")
	}
}

// TestReserveHoldNegativeClock: a reservation made at a negative reading,
// with no hold before it, gets a ticket: its due time is compared with its
// own reading, not with the zero hold's Seen.
func TestReserveHoldNegativeClock(t *testing.T) {
	k := NewTokenBucket(tb(1, time.Second))
	var s TokenBucketState
	var h Hold
	now := -10 * time.Second
	k.Decide(&s, now, 1)
	d, ok, tr := k.ReserveHold(&s, &h, now, 1, time.Hour)
	if !ok || d != time.Second || tr == 0 {
		t.Fatalf("ReserveHold(-10s, 1) = %v, %t, ticket %d; want 1s, true, a ticket", d, ok, tr)
	}
	if h.Seen != now {
		t.Errorf("hold's Seen = %v, want %v", h.Seen, now)
	}
	if ok, drop := k.CancelHold(&s, &h, tr, now+time.Second/2); !ok || !drop {
		t.Errorf("CancelHold at -9.5s = %t, %t; want true, true", ok, drop)
	}
}

// TestReserveHoldRefused: a refused reservation takes nothing and gets no
// ticket, and the hold of the reservation before it stays cancellable.
func TestReserveHoldRefused(t *testing.T) {
	k := NewTokenBucket(tb(1, time.Second))
	var s TokenBucketState
	var h Hold
	k.Decide(&s, 0, 1)
	_, _, tA := k.ReserveHold(&s, &h, 0, 1, time.Hour) // due at 1s
	held := h
	for _, maxWait := range []time.Duration{0, time.Second} { // B would wait 2s
		d, ok, tr := k.ReserveHold(&s, &h, 0, 1, maxWait)
		if ok || d != 2*time.Second || tr != 0 {
			t.Errorf("ReserveHold(0, 1, maxWait %v) = %v, %t, ticket %d; want 2s, false, no ticket", maxWait, d, ok, tr)
		}
		if h != held {
			t.Errorf("maxWait %v: hold %+v after a refusal, want %+v", maxWait, h, held)
		}
	}
	if ok, _ := k.CancelHold(&s, &h, tA, 0); !ok {
		t.Error("A could not be cancelled after B was refused")
	}
}

// TestReserveHoldDropsSpent: a reservation that takes its tokens at once
// drops the hold of an earlier one whose tokens the reading saw due, and
// keeps a hold that is still live.
func TestReserveHoldDropsSpent(t *testing.T) {
	k := NewTokenBucket(tb(2, 2*time.Second)) // a token a second
	var s TokenBucketState
	var h Hold
	k.Decide(&s, 0, 2)
	_, _, tA := k.ReserveHold(&s, &h, 0, 1, time.Hour) // due at 1s
	if tA == 0 {
		t.Fatal("A got no ticket")
	}
	d, ok, tr := k.ReserveHold(&s, &h, 3*time.Second, 1, 0) // the bucket has refilled past A
	if !ok || d != 0 || tr != 0 {
		t.Fatalf("ReserveHold(3s, 1) = %v, %t, ticket %d; want 0, true, no ticket", d, ok, tr)
	}
	if h != (Hold{}) {
		t.Errorf("hold %+v after A's tokens were seen due, want none", h)
	}

	// A hold that is still live survives a probe reservation (n == 0).
	var s2 TokenBucketState
	var h2 Hold
	k.Decide(&s2, 0, 2)
	_, _, tB := k.ReserveHold(&s2, &h2, 0, 1, time.Hour)
	held := h2
	if _, _, tr := k.ReserveHold(&s2, &h2, 500*time.Millisecond, 0, 0); tr != 0 {
		t.Errorf("a probe reservation got ticket %d", tr)
	}
	held.Seen = 500 * time.Millisecond
	if h2 != held || h2.Ticket != tB {
		t.Errorf("hold %+v after a probe, want %+v", h2, held)
	}
}

// TestTokenBucketStaleBeyondDebt: 1 per 1ns, whose whole bucket is one unit.
// A reading further behind the TAT than any debt (a stale one) is denied,
// and a probe there finds nothing left: the debt saturates above the
// capacity, not below it.
func TestTokenBucketStaleBeyondDebt(t *testing.T) {
	runSteps(t, tb(1, time.Nanosecond), []step{
		{10, 1, allowed(0, 1)},
		{5, 0, allowed(0, 6)},
		{5, 1, denied(6, 6)},
		{10, 1, denied(1, 1)},
		{11, 1, allowed(0, 1)},
	})
}

// TestTokenBucketFracCarry: 3 per 4ns, a token every 4/3 ns. The fraction
// of a nanosecond carries into the TAT as soon as it reaches a whole one, so
// the state's Frac stays below Limit, and a reservation whose due time is the
// TAT's whole nanosecond (but lies before the exact TAT) is charged from the
// exact TAT.
func TestTokenBucketFracCarry(t *testing.T) {
	k := NewTokenBucket(tb(3, 4*time.Nanosecond))
	var s TokenBucketState
	for i, c := range []struct {
		n    int
		tat  int64 // the TAT's whole nanoseconds
		frac int64 // and its fraction, in thirds
	}{
		{2, 2, 2}, // 8/3
		{1, 4, 0}, // 12/3: the carry
	} {
		if v := k.Decide(&s, 0, c.n); !v.Allowed {
			t.Fatalf("step %d: AllowN(0, %d) denied", i, c.n)
		}
		if tat := int64(s.TAT ^ bias); tat != c.tat || s.Frac != c.frac {
			t.Errorf("step %d: TAT %d + %d/3 after AllowN(0, %d), want %d + %d/3", i, tat, s.Frac, c.n, c.tat, c.frac)
		}
	}

	// From TAT 8/3: ReserveN(2) takes the TAT to 16/3, due at ceil(4/3) = 2,
	// which is the TAT's whole nanosecond but before 8/3: no restart from 2.
	// ReserveN(1) is then due at ceil(20/3 - 4) = 3. Five tokens by 2ns would
	// be one more than 3 + floor(2×3/4) allows.
	s = TokenBucketState{}
	k.Decide(&s, 0, 2)
	for i, c := range []struct {
		n    int
		wait time.Duration
	}{{2, 2}, {1, 3}, {1, 4}} {
		if d, ok := k.Reserve(&s, 0, c.n, time.Hour); !ok || d != c.wait {
			t.Errorf("reservation %d: ReserveN(0, %d) = %v, %t, want %v, true", i, c.n, d, ok, c.wait)
		}
	}
}

// TestAllowOneClockEnds: the windows' one-request fast paths take every
// reading of the clock range, its two ends included, and decide there as
// Decide does; a reading outside it is declined (Decide clamps it).
func TestAllowOneClockEnds(t *testing.T) {
	fwk := NewFixedWindow(fw(3, time.Second))
	sck := NewSlidingCounter(sc(3, time.Second))
	for _, c := range []struct {
		now time.Duration
		ok  bool
	}{
		{minTime, true},
		{maxTime, true},
		{minTime - 1, false},
		{maxTime + 1, false},
	} {
		var s, sd FixedWindowState
		v, ok := fwk.AllowOne(&s, c.now)
		if ok != c.ok {
			t.Errorf("FixedWindow.AllowOne(fresh, %d) ok = %t, want %t", c.now, ok, c.ok)
		}
		if want := fwk.Decide(&sd, c.now, 1); ok && (v != want || s != sd) {
			t.Errorf("FixedWindow.AllowOne(fresh, %d) = %+v, state %+v; Decide: %+v, state %+v", c.now, v, s, want, sd)
		}
		var cs, csd SlidingCounterState
		cv, ok := sck.AllowOne(&cs, c.now)
		if ok != c.ok {
			t.Errorf("SlidingCounter.AllowOne(fresh, %d) ok = %t, want %t", c.now, ok, c.ok)
		}
		if want := sck.Decide(&csd, c.now, 1); ok && (cv != want || cs != csd) {
			t.Errorf("SlidingCounter.AllowOne(fresh, %d) = %+v, state %+v; Decide: %+v, state %+v", c.now, cv, cs, want, csd)
		}
	}
}

// TestPruneHolds: PruneHolds examines up to limit entries other than skip's,
// keeps the live ones (showing them the reading) and drops the others: a
// state moved on, a key the store no longer holds, tokens due.
func TestPruneHolds(t *testing.T) {
	k := NewTokenBucket(tb(1, time.Second))
	var s TokenBucketState
	var live Hold
	k.Decide(&s, 0, 1)
	if _, _, tr := k.ReserveHold(&s, &live, 0, 1, time.Hour); tr == 0 { // due at 1s
		t.Fatal("no hold")
	}
	moved := s
	moved.TAT++
	states := map[string]TokenBucketState{"live": s, "moved": moved, "due": {}, "skip": moved}
	state := func(key string) (TokenBucketState, bool) {
		st, ok := states[key]
		return st, ok
	}
	const now = 500 * time.Millisecond
	spent := Hold{Ticket: live.Ticket + 1} // its After, the zero state, was due long ago
	hs := map[string]Hold{"live": live, "moved": live, "gone": live, "due": spent, "skip": live}
	PruneHolds(k, hs, now, 10, "skip", state)
	seen := live
	seen.Seen = now
	if len(hs) != 2 || hs["live"] != seen || hs["skip"] != live {
		t.Errorf("after PruneHolds: %+v; want only live (seen at %v) and skip (untouched)", hs, now)
	}

	for _, limit := range []int{0, 1, 2, 3} {
		hs := map[string]Hold{"a": spent, "b": spent, "c": spent, "skip": spent}
		PruneHolds(k, hs, now, limit, "skip", func(string) (TokenBucketState, bool) { return TokenBucketState{}, true })
		if want := 4 - limit; len(hs) != want {
			t.Errorf("limit %d: %d entries left of 4, want %d", limit, len(hs), want)
		}
		if _, ok := hs["skip"]; !ok {
			t.Errorf("limit %d: skip's entry was dropped", limit)
		}
	}
}

// TestPackZeroWord: the zero word is the zero state (a fresh bucket) both
// ways, whatever the packing's units.
func TestPackZeroWord(t *testing.T) {
	for _, r := range []admit.Rule{tb(1, time.Second), tb(3, time.Second), tb(9999, time.Second)} {
		k := NewTokenBucket(r)
		if s := k.Unpack(0); s != (TokenBucketState{}) {
			t.Errorf("%v (units %d): Unpack(0) = %+v, want the zero state", r, k.Units(), s)
		}
		if w, ok := k.Pack(TokenBucketState{}); w != 0 || !ok {
			t.Errorf("%v (units %d): Pack(zero state) = %d, %t; want 0, true", r, k.Units(), w, ok)
		}
	}
}
