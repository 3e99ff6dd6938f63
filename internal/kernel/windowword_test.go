package kernel

import (
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// TestWindowWords: every state the window kernels write round-trips through
// its word, the zero word is a fresh state, and no state with a count takes
// a spare word, over random rules, requests and readings across the whole
// clock range.
func TestWindowWords(t *testing.T) {
	t.Run("fixed-window", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			k := NewFixedWindow(drawRule(rt, admit.FixedWindow))
			p := k.Word()
			if p.Unpack(0) != (FixedWindowState{}) {
				rt.Fatalf("the zero word is not fresh")
			}
			var s FixedWindowState
			now := drawStart(rt, k.window)
			for i := range rapid.IntRange(1, 30).Draw(rt, "calls") {
				now = move(rt, now, k.limit, k.window, "now")
				k.Decide(&s, time.Duration(now), drawN(rt, int(k.limit), "n"))
				if s.Count == 0 {
					continue
				}
				w := p.Pack(s)
				if got := p.Unpack(w); got != s {
					rt.Fatalf("call %d: Unpack(Pack(%+v)) = %+v", i, s, got)
				}
				if w == p.Spare(1) || w == p.Spare(2) {
					rt.Fatalf("call %d: %+v packs to a spare word %#x", i, s, w)
				}
			}
		})
	})
	t.Run("sliding-counter", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			k := NewSlidingCounter(drawRule(rt, admit.SlidingCounter))
			p, ok := k.Word()
			if !ok {
				cb := uint(bits.Len64(uint64(k.limit)))
				if k.limit <= MaxWordLimit && uint64(k.Index(math.MaxInt64)-k.Index(math.MinInt64))>>(64-2*cb) == 0 {
					rt.Fatalf("Word refused a rule whose windows fit")
				}
				return
			}
			var s SlidingCounterState
			now := drawStart(rt, k.window)
			for i := range rapid.IntRange(1, 30).Draw(rt, "calls") {
				now = move(rt, now, k.limit, k.window, "now")
				k.Decide(&s, time.Duration(now), drawN(rt, int(k.limit), "n"))
				if s.Curr == 0 {
					continue
				}
				w := p.Pack(s)
				if got := p.Unpack(w); got != s {
					rt.Fatalf("call %d: Unpack(Pack(%+v)) = %+v", i, s, got)
				}
				if w == p.Spare(1) || w == p.Spare(2) {
					rt.Fatalf("call %d: %+v packs to a spare word %#x", i, s, w)
				}
			}
		})
	})
}

// TestFixedWindowBitBudget (FixedWindowWord): the count takes cb = bits.Len(Limit) bits and the
// index offset from the clock range's first window the other 64-cb. The worst
// rule of each width, Limit = Window = 2^(cb-1) ns (the shortest window, so
// the most windows), has at most 2^(64-cb) windows in the range, so every
// offset fits, and states at both ends of the range restore exactly.
func TestFixedWindowBitBudget(t *testing.T) {
	for cb := uint(1); cb <= 31; cb++ {
		for _, limit := range []int{1 << (cb - 1), 1<<cb - 1} {
			k := NewFixedWindow(rule(admit.FixedWindow, limit, time.Duration(1<<(cb-1))))
			c := k.Word()
			require.Equal(t, cb, c.cb)
			last := k.Index(maxTime)
			if span := uint64(last - c.base); span>>(64-cb) != 0 {
				t.Fatalf("%d per %dns: %d window offsets do not fit %d bits", limit, 1<<(cb-1), span+1, 64-cb)
			}
			for _, s := range []FixedWindowState{
				{Window: c.base, Count: 1}, {Window: c.base, Count: int64(limit)},
				{Window: last, Count: 1}, {Window: last, Count: int64(limit)},
				{Window: 0, Count: int64(limit)}, {Window: -1, Count: 1},
			} {
				if got := c.Unpack(c.Pack(s)); got != s {
					t.Fatalf("%d per %dns: unpack(pack(%+v)) = %+v", limit, 1<<(cb-1), s, got)
				}
				if c.Pack(s) == c.Spare(1) {
					t.Fatalf("%d per %dns: %+v packs to a spare word", limit, 1<<(cb-1), s)
				}
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, admit.MaxLimit).Draw(rt, "limit")
		window := rapid.Int64Range(int64(limit), admit.MaxLimitTimesWindow/int64(limit)).Draw(rt, "window")
		k := NewFixedWindow(rule(admit.FixedWindow, limit, time.Duration(window)))
		c := k.Word()
		now := time.Duration(rapid.Int64().Draw(rt, "now"))
		s := FixedWindowState{Window: k.Index(now), Count: rapid.Int64Range(1, int64(limit)).Draw(rt, "count")}
		if got := c.Unpack(c.Pack(s)); got != s {
			rt.Fatalf("%d per %dns: unpack(pack(%+v)) = %+v", limit, window, s, got)
		}
	})
	c := NewFixedWindow(rule(admit.FixedWindow, 7, time.Second)).Word()
	assert.Equal(t, FixedWindowState{}, c.Unpack(c.Pack(FixedWindowState{Window: 12345})), "a zero count is fresh whatever the index")
	assert.Equal(t, FixedWindowState{}, c.Unpack(0), "the zero word is fresh")
}

// TestSlidingCounterBitBudget (SlidingCounterWord): the counts take 2cb bits and the index offset
// the other 64-2cb, which hold every window of the clock range exactly when
// Window >= 2^(2cb-1) ns. Rules one nanosecond short of that do not pack;
// nor do limits of 2^16 or more.
func TestSlidingCounterBitBudget(t *testing.T) {
	for cb := uint(1); cb <= 16; cb++ {
		for _, limit := range []int{1 << (cb - 1), 1<<cb - 1} {
			shortest := time.Duration(1) << (2*cb - 1)
			if _, ok := NewSlidingCounter(rule(admit.SlidingCounter, limit, shortest-1)).Word(); ok && shortest-1 >= time.Duration(limit) {
				t.Errorf("%d per %dns packs, but its windows do not fit %d bits", limit, shortest-1, 64-2*cb)
			}
			k := NewSlidingCounter(rule(admit.SlidingCounter, limit, shortest))
			c, ok := k.Word()
			if !ok {
				t.Fatalf("%d per %dns does not pack", limit, shortest)
			}
			require.Equal(t, cb, c.cb)
			last := k.Index(maxTime)
			if span := uint64(last - c.base); span>>(64-2*cb) != 0 {
				t.Fatalf("%d per %dns: %d window offsets do not fit %d bits", limit, shortest, span+1, 64-2*cb)
			}
			for _, s := range []SlidingCounterState{
				{Window: c.base, Curr: 1}, {Window: c.base, Prev: int64(limit), Curr: int64(limit)},
				{Window: last, Prev: 1}, {Window: last, Prev: int64(limit), Curr: int64(limit)},
			} {
				if got := c.Unpack(c.Pack(s)); got != s {
					t.Fatalf("%d per %dns: unpack(pack(%+v)) = %+v", limit, shortest, s, got)
				}
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, MaxWordLimit).Draw(rt, "limit")
		window := rapid.Int64Range(int64(limit), admit.MaxLimitTimesWindow/int64(limit)).Draw(rt, "window")
		k := NewSlidingCounter(rule(admit.SlidingCounter, limit, time.Duration(window)))
		c, ok := k.Word()
		if want := window >= 1<<(2*bits.Len(uint(limit))-1); ok != want {
			rt.Fatalf("%d per %dns: packs %v, want %v", limit, window, ok, want)
		}
		if !ok {
			return
		}
		s := SlidingCounterState{
			Window: k.Index(time.Duration(rapid.Int64().Draw(rt, "now"))),
			Prev:   rapid.Int64Range(0, int64(limit)).Draw(rt, "prev"),
			Curr:   rapid.Int64Range(0, int64(limit)).Draw(rt, "curr"),
		}
		if s.Prev == 0 && s.Curr == 0 {
			s = SlidingCounterState{}
		}
		if got := c.Unpack(c.Pack(s)); got != s {
			rt.Fatalf("%d per %dns: unpack(pack(%+v)) = %+v", limit, window, s, got)
		}
	})
	_, ok := NewSlidingCounter(rule(admit.SlidingCounter, MaxWordLimit+1, time.Hour)).Word()
	assert.False(t, ok)
}
