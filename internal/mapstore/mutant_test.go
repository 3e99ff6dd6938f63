package mapstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// Tests that kill mutants `make mutate` found alive; the survivors no test
// can kill are listed in docs/stress.md ("Mutation testing").

// TestShardRebuild pins when an eviction rebuilds a shard's map: once it
// holds at most a quarter of its peak, if that peak was at least
// keyed.RebuildMin (docs/keyed-stores.md). A rebuild resets the peak to the
// keys left, so the peak shows whether it happened.
func TestShardRebuild(t *testing.T) {
	const w = time.Second
	for _, c := range []struct {
		old, young int // keys admitted at 0 (evicted at 1.9s) and at 1.5s (kept)
		peak       int // the shard's peak after the eviction
	}{
		{24, 8, 8},   // peak 32 = RebuildMin, 8 left = 32/4: rebuilt
		{23, 9, 32},  // 9 left > 32/4: not rebuilt
		{24, 7, 31},  // 7 left <= 31/4, but the peak is below RebuildMin
		{38, 12, 12}, // 12 left = 50/4, rounded down
		{37, 13, 50},
	} {
		t.Run(fmt.Sprintf("old=%d/young=%d", c.old, c.young), func(t *testing.T) {
			if c.old+c.young > keyed.SweepMinLen {
				t.Fatal("the insertions would sweep")
			}
			fake := clock.NewFake()
			lim := New(admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: w}, plumb.Settings{Clock: fake, Shards: 1})
			l := lim.(*fullKeys[kernel.FixedWindowState])
			for i := range c.old {
				if !lim.Allow(fmt.Sprint("old", i)).Allowed {
					t.Fatalf("old key %d denied", i)
				}
			}
			fake.Set(1500 * time.Millisecond)
			for i := range c.young {
				if !lim.Allow(fmt.Sprint("young", i)).Allowed {
					t.Fatalf("young key %d denied", i)
				}
			}
			st := &l.shards[0]
			if st.peak != c.old+c.young {
				t.Fatalf("peak %d before the eviction, want %d", st.peak, c.old+c.young)
			}
			if n := l.sweepAt(1900 * time.Millisecond); n != c.old {
				t.Fatalf("evicted %d keys, want the %d old ones", n, c.old)
			}
			if len(st.m) != c.young || st.peak != c.peak {
				t.Errorf("after the eviction: %d keys, peak %d; want %d keys, peak %d", len(st.m), st.peak, c.young, c.peak)
			}
			for i := range c.young {
				if lim.Allow(fmt.Sprint("young", i)).Allowed {
					t.Errorf("young key %d lost its count in the rebuild", i)
				}
			}
		})
	}
}

// TestCancelStoresNoHold: presenting a reservation on a key that holds none
// gives nothing back and records nothing for that key. (A hold that died
// keeps its entry, with Ticket 0, until a new entry prunes it.)
func TestCancelStoresNoHold(t *testing.T) {
	fake := clock.NewFake()
	lim := New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}, plumb.Settings{Clock: fake, Shards: 1})
	r := lim
	st := &lim.(tbFullKeys[uint64]).shards[0]
	r.Allow("a")
	r.Allow("b")
	res, ok := r.ReserveN("b", 1, time.Hour)
	if !ok || res.Delay != time.Second {
		t.Fatalf("ReserveN(b) = %+v, %t; want a wait of 1s", res, ok)
	}
	if len(st.holds.M) != 1 {
		t.Fatalf("%d holds after one reservation, want 1", len(st.holds.M))
	}
	for _, key := range []string{"a", "missing"} {
		if r.CancelReservation(key, res) {
			t.Errorf("b's reservation cancelled on %s", key)
		}
		if len(st.holds.M) != 1 {
			t.Errorf("%d holds after presenting b's reservation on %s, want 1", len(st.holds.M), key)
		}
	}
	if !r.CancelReservation("b", res) {
		t.Error("b's reservation not cancelled on b")
	}
	if h, ok := st.holds.M[st.m["b"]]; len(st.holds.M) != 1 || !ok || h.Ticket != 0 {
		t.Errorf("holds %v after the cancellation, want only b's, dead", st.holds)
	}
}

// TestEvictionDropsHold: the eviction of a key deletes its hold's entry,
// which is keyed by the address of the key's state, so that no entry keeps
// an evicted state alive or outlives its key, even a live-looking one.
func TestEvictionDropsHold(t *testing.T) {
	fake := clock.NewFake()
	lim := New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}, plumb.Settings{Clock: fake, Shards: 1})
	r := lim
	st := &lim.(tbFullKeys[uint64]).shards[0]
	r.Allow("b")
	res, ok := r.ReserveN("b", 1, time.Hour)
	if !ok || res.Delay != time.Second {
		t.Fatalf("ReserveN(b) = %+v, %t; want a wait of 1s", res, ok)
	}
	fake.Set(time.Minute) // b's reservation is long due: b is idle
	if n := lim.Sweep(); n != 1 {
		t.Fatalf("Sweep evicted %d keys, want b", n)
	}
	if len(st.holds.M) != 0 {
		t.Errorf("holds %v after b's eviction, want none", st.holds)
	}
	r.Allow("b")
	if r.CancelReservation("b", res) {
		t.Error("b's reservation from before its eviction cancelled on b stored again")
	}
}
