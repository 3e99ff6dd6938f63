package atomic

import (
	"runtime"
	"sync"
	satomic "sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// resetRules are rules for every cell New builds: the packed bucket with
// whole and with scaled units, the packed window and counter, and the
// snapshot counter (a Window so short that the counter's index does not
// pack: TestResetEveryCell checks that each gets the store it names).
var resetRules = []struct {
	name string
	rule admit.Rule
}{
	{"token-bucket", admit.Rule{Algorithm: admit.TokenBucket, Limit: 4, Window: time.Second}},
	{"token-bucket-scaled", admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: time.Second}},
	{"fixed-window", admit.Rule{Algorithm: admit.FixedWindow, Limit: 4, Window: time.Second}},
	{"sliding-counter", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 4, Window: time.Second}},
	{"sliding-counter-snapshot", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 200, Window: 10 * time.Microsecond}},
}

func newResetStore(t *testing.T, rule admit.Rule) (admit.KeyedLimiter, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake()
	lim, err := New(rule, admit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	return lim, fake
}

// TestResetEveryCell: on a frozen clock, a key that has spent its budget
// has all of it again after Reset, at the same reading; another key's
// budget is untouched, and a key never stored stays unstored.
func TestResetEveryCell(t *testing.T) {
	for _, tc := range resetRules {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := newResetStore(t, tc.rule)
			if _, snap := lim.(keyedSlidingCounterSnapshot); snap != (tc.name == "sliding-counter-snapshot") {
				t.Fatalf("New(%v) built a %T", tc.rule, lim)
			}
			r := lim.(resetter)
			L := tc.rule.Limit
			for _, key := range []string{"a", "b"} {
				if d := lim.AllowN(key, L); !d.Allowed {
					t.Fatalf("AllowN(%q, %d) on a fresh key = %+v, want allowed", key, L, d)
				}
			}
			if d := lim.Allow("a"); d.Allowed {
				t.Fatalf("Allow(a) after AllowN(a, %d) = %+v, want denied", L, d)
			}
			r.Reset("a")
			r.Reset("never-seen")
			if n := lim.(admit.Store).Len(); n != 2 {
				t.Errorf("Len after Reset = %d, want 2 (Reset keeps the cell and adds none)", n)
			}
			if d := lim.AllowN("a", 0); !d.Allowed || d.Remaining != L || d.RetryAfter != 0 || d.ResetAfter != 0 {
				t.Errorf("AllowN(a, 0) after Reset = %+v, want a fresh key's: Remaining %d", d, L)
			}
			if d := lim.AllowN("b", 0); d.Remaining != 0 {
				t.Errorf("AllowN(b, 0) after Reset(a) = %+v, want Remaining 0: b's budget is its own", d)
			}
			for i := range L {
				if d := lim.Allow("a"); !d.Allowed || d.Remaining != L-1-i {
					t.Fatalf("Allow(a) #%d after Reset = %+v, want allowed, Remaining %d", i+1, d, L-1-i)
				}
			}
			if d := lim.Allow("a"); d.Allowed {
				t.Errorf("Allow(a) #%d after Reset = %+v, want denied: Reset gives one budget", L+1, d)
			}
		})
	}
}

// TestResetTombstone: a cell the sweeper has buried stays a tombstone when
// reset, so it never comes back to life outside the map.
func TestResetTombstone(t *testing.T) {
	tb := newTBKernel(kernel.NewTokenBucket(resetRules[0].rule), 1)
	var c tbCell
	c.w.Store(tbTombstone)
	if c.reset(tb); c.w.Load() != tbTombstone {
		t.Errorf("token bucket: reset replaced the tombstone with %#x", c.w.Load())
	}
	fw := newFWCodec(resetRules[2].rule)
	var f fwCell
	f.w.Store(fw.tomb)
	if f.reset(fw); f.w.Load() != fw.tomb {
		t.Errorf("fixed window: reset replaced the tombstone with %#x", f.w.Load())
	}
	sc, _ := newSCCodec(resetRules[3].rule)
	var s scCell
	s.w.Store(sc.tomb)
	if s.reset(sc); s.w.Load() != sc.tomb {
		t.Errorf("sliding counter: reset replaced the tombstone with %#x", s.w.Load())
	}
	var p scSnapCell
	p.p.Store(scSnapTombstone)
	if p.reset(nil); p.p.Load() != scSnapTombstone {
		t.Error("sliding counter snapshot: reset replaced the tombstone")
	}
}

// TestResetDropsReservation: a reservation that waits holds its key's cell;
// Reset drops the hold with the state, so the reservation can no longer be
// cancelled, and the key is fresh and no longer held.
func TestResetDropsReservation(t *testing.T) {
	for _, tc := range resetRules[:2] {
		lim, _ := newResetStore(t, tc.rule)
		kr := lim.(keyedReserver)
		L := tc.rule.Limit
		if d := lim.AllowN("k", L); !d.Allowed {
			t.Fatalf("%s: AllowN(k, %d) = %+v", tc.name, L, d)
		}
		res, ok := kr.ReserveN("k", 1, tc.rule.Window)
		if !ok || res.Delay <= 0 {
			t.Fatalf("%s: ReserveN(k, 1) = %v %v, want a wait", tc.name, res.Delay, ok)
		}
		c, _ := lim.(keyedTokenBucket).m.Load("k")
		if c.w.Load() != tbHeld {
			t.Fatalf("%s: a reservation that waits did not hold the cell", tc.name)
		}
		lim.(resetter).Reset("k")
		if w := c.w.Load(); w != 0 {
			t.Errorf("%s: the cell's word after Reset is %#x, want 0", tc.name, w)
		}
		if st := lim.(keyedTokenBucket).k.holds.of(unsafe.Pointer(c)); len(st.m.M) != 0 {
			t.Errorf("%s: Reset left %d records in the stripe", tc.name, len(st.m.M))
		}
		if kr.CancelReservation("k", res) {
			t.Errorf("%s: CancelReservation of a reservation from before Reset succeeded", tc.name)
		}
		if d := lim.AllowN("k", 0); d.Remaining != L {
			t.Errorf("%s: AllowN(k, 0) after Reset and the cancellation = %+v, want Remaining %d", tc.name, d, L)
		}
	}
}

// TestResetSpilled: a bucket whose state is past its word's horizon is held
// with no reservation (spilled); Reset releases it fresh.
func TestResetSpilled(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	lim, _ := newResetStore(t, rule)
	far := kernel.TokenBucketState{TAT: uint64(int64(30*24*time.Hour)) ^ 1<<63}
	SetState(lim, "k", far)
	c, _ := lim.(keyedTokenBucket).m.Load("k")
	if c.w.Load() != tbHeld {
		t.Fatal("a state 30 days ahead did not spill")
	}
	lim.(resetter).Reset("k")
	if w := c.w.Load(); w != 0 {
		t.Errorf("the spilled cell's word after Reset is %#x, want 0", w)
	}
	if d := lim.AllowN("k", 0); d.Remaining != rule.Limit {
		t.Errorf("AllowN(k, 0) after Reset = %+v, want Remaining %d", d, rule.Limit)
	}
}

// TestResetConcurrent hammers one key on a frozen clock from several
// goroutines while another resets it once, when the hammers have counted
// half a budget of admissions. The hammers stop at their first denial after
// the Reset has returned, so the budget after it is spent: the key admits
// exactly Limit after the reset's linearization point, and between Limit/2
// and Limit before it (none lost, none counted twice). A second Reset, with
// nothing running, then gives back exactly one budget.
func TestResetConcurrent(t *testing.T) {
	goroutines := 4
	if testing.Short() {
		goroutines = 2
	}
	for _, tc := range resetRules {
		t.Run(tc.name, func(t *testing.T) {
			rule := tc.rule
			if rule.Limit < 100 { // the same cell, with more to race for: scaled units stay scaled
				rule.Limit, rule.Window = 100, 100*time.Second+rule.Window%time.Duration(rule.Limit)
			}
			lim, _ := newResetStore(t, rule)
			r := lim.(resetter)
			L := int64(rule.Limit)
			var admitted satomic.Int64
			half := make(chan struct{})
			var reset satomic.Bool
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for {
						if lim.Allow("k").Allowed {
							if admitted.Add(1) == L/2 {
								close(half)
							}
							continue
						}
						if reset.Load() {
							return
						}
						runtime.Gosched() // spent: wait for the reset
					}
				})
			}
			wg.Go(func() {
				<-half
				r.Reset("k")
				reset.Store(true)
			})
			wg.Wait()
			if got := admitted.Load(); got < L+L/2 || got > 2*L {
				t.Errorf("admitted %d in all, want between %d and %d", got, L+L/2, 2*L)
			}
			if d := lim.AllowN("k", 0); d.Remaining != 0 {
				t.Errorf("AllowN(k, 0) after the hammers = %+v, want Remaining 0", d)
			}
			r.Reset("k")
			if d := lim.AllowN("k", int(L)); !d.Allowed || d.Remaining != 0 {
				t.Errorf("AllowN(k, %d) after a second Reset = %+v, want allowed, Remaining 0", L, d)
			}
		})
	}
}
