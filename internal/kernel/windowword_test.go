package kernel

import (
	"math"
	"testing"
	"time"

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
				if k.limit <= MaxWordLimit && uint64(k.Index(math.MaxInt64)-k.Index(math.MinInt64))>>(64-2*p.cb) == 0 {
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
