package atomic

import (
	"fmt"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// Tests that kill mutants `make mutate` found alive; the survivors no test
// can kill are listed in docs/stress.md ("Mutation testing").

// tbShapes are the single-key and keyed token buckets, as the Limiter of one
// key.
func tbShapes(t *testing.T, r admit.Rule, fake *clock.Fake) map[string]admit.Reserver {
	single, err := NewLimiter(r, admit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := New(r, admit.WithClock(fake), admit.WithShards(1))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]admit.Reserver{
		"single": single.(admit.Reserver),
		"keyed":  keyReserver{keyed, "k"},
	}
}

// keyReserver is one key of a keyed reserver.
type keyReserver struct {
	l   admit.Store
	key string
}

func (k keyReserver) Allow() admit.Decision       { return k.l.Allow(k.key) }
func (k keyReserver) AllowN(n int) admit.Decision { return k.l.AllowN(k.key, n) }
func (k keyReserver) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	return k.l.ReserveN(k.key, n, maxWait)
}
func (k keyReserver) CancelReservation(r admit.Reservation) bool {
	return k.l.CancelReservation(k.key, r)
}

// TestHeldBucketDecidesOnce: a call on a bucket held by a reservation whose
// tokens the call finds due is decided once, under the hold, which it
// releases: its admission is charged once.
func TestHeldBucketDecidesOnce(t *testing.T) {
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: 2 * time.Second} // a token a second
	fake := clock.NewFake()
	for name, lim := range tbShapes(t, r, fake) {
		fake.Set(0)
		if d := lim.AllowN(2); !d.Allowed {
			t.Fatalf("%s: AllowN(2) at 0 denied", name)
		}
		if res, ok := lim.ReserveN(1, time.Hour); !ok || res.Delay != time.Second {
			t.Fatalf("%s: ReserveN(1) at 0 = %+v, %t; want a wait of 1s", name, res, ok)
		}
		fake.Set(3 * time.Second) // the bucket is full again
		for i, want := range []admit.Decision{
			{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: time.Second},
			{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 2 * time.Second},
			{Limit: 2, RetryAfter: time.Second, ResetAfter: 2 * time.Second},
		} {
			if got := lim.Allow(); got != want {
				t.Errorf("%s: Allow %d at 3s = %+v, want %+v", name, i, got, want)
			}
		}
	}
}

// TestSweepAndHolds: a sweep evicts a key held by a reservation nobody came
// back for once its tokens are due and the key is fresh, and never a key
// whose reservation is still pending.
func TestSweepAndHolds(t *testing.T) {
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: 2 * time.Second}
	fake := clock.NewFake()
	lim, err := New(r, admit.WithClock(fake), admit.WithShards(1))
	if err != nil {
		t.Fatal(err)
	}
	store, res := lim, lim
	lim.AllowN("k", 2)
	if rv, ok := res.ReserveN("k", 1, time.Hour); !ok || rv.Delay != time.Second {
		t.Fatalf("ReserveN(1) at 0 = %+v, %t; want a wait of 1s", rv, ok)
	}
	fake.Set(500 * time.Millisecond)
	if n := store.Sweep(); n != 0 || store.Len() != 1 {
		t.Fatalf("Sweep at 0.5s evicted %d keys, leaving %d; want 0, leaving 1", n, store.Len())
	}
	if d := lim.Allow("k"); d.Allowed {
		t.Fatalf("Allow at 0.5s admitted on a bucket that owes a reservation: %+v", d)
	}
	fake.Set(2 * time.Second) // the sweep sees the tokens due, but the bucket owes one
	if n := store.Sweep(); n != 0 || store.Len() != 1 {
		t.Fatalf("Sweep at 2s evicted %d keys, leaving %d; want 0, leaving 1", n, store.Len())
	}
	if d := lim.AllowN("k", 2); d.Allowed {
		t.Fatalf("AllowN(2) at 2s admitted on a bucket that owes a token: %+v", d)
	}
	fake.Set(3*time.Second + keyed.Slack) // the bucket is full at 3s
	if n := store.Sweep(); n != 1 || store.Len() != 0 {
		t.Errorf("Sweep at 3s+slack evicted %d keys, leaving %d; want 1, leaving 0", n, store.Len())
	}
}

// TestSpilledSweep: a bucket whose state lies past the packed word's
// horizon is kept in its cell's hold record (spilled); a sweep evicts it once
// it is fresh, and not before.
func TestSpilledSweep(t *testing.T) {
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second} // horizon ±10.7 days
	fake := clock.NewFake()
	t0 := kernel.NewTokenBucket(r).Horizon() + time.Hour
	fake.Set(t0)
	lim, err := New(r, admit.WithClock(fake), admit.WithShards(1))
	if err != nil {
		t.Fatal(err)
	}
	store := lim.(admit.Store)
	if d := lim.AllowN("k", 9999); !d.Allowed {
		t.Fatalf("AllowN(9999) past the horizon denied: %+v", d)
	}
	fake.Set(t0 + time.Second/2)
	if n := store.Sweep(); n != 0 || store.Len() != 1 {
		t.Fatalf("Sweep of a spilled bucket that owes evicted %d keys, leaving %d; want 0, leaving 1", n, store.Len())
	}
	if d := lim.Allow("k"); d.Allowed != true || d.Remaining != 4998 {
		t.Fatalf("Allow half a window on = %+v, want admitted with 4998 left", d)
	}
	fake.Set(t0 + 2*time.Second + keyed.Slack)
	if n := store.Sweep(); n != 1 || store.Len() != 0 {
		t.Errorf("Sweep of a full spilled bucket evicted %d keys, leaving %d; want 1, leaving 0", n, store.Len())
	}
}

// TestSnapshotProbeDenyAllocs: the single-key snapshot forms (the token
// bucket's TokenBucketSnapshot, a sliding counter too wide to pack) allocate only to
// publish an admission: a probe and a denial allocate nothing.
func TestSnapshotProbeDenyAllocs(t *testing.T) {
	fake := clock.NewFake()
	tb, err := NewTokenBucketSnapshot(admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: time.Second}, admit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 4, -1} { // a probe and impossible requests publish nothing
		if d := tb.AllowN(n); d.Allowed != (n == 0) {
			t.Fatalf("AllowN(%d) on a fresh bucket = %+v", n, d)
		}
		if p := tb.c.p.Load(); p != nil {
			t.Errorf("TokenBucketSnapshot: AllowN(%d) on a fresh bucket published the state %+v", n, *p)
		}
	}
	tb.AllowN(3)
	if a := testing.AllocsPerRun(100, func() {
		if d := tb.AllowN(1); d.Allowed {
			panic(fmt.Sprintf("AllowN(1) on a spent bucket = %+v", d))
		}
	}); a != 0 {
		t.Errorf("TokenBucketSnapshot: %v allocations per denied AllowN(1)", a)
	}

	r := admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1 << 16, Window: time.Hour}
	single, err := NewLimiter(r, admit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, r.Limit + 1} {
		if a := testing.AllocsPerRun(100, func() {
			if d := single.AllowN(n); d.Allowed != (n == 0) {
				panic(fmt.Sprintf("AllowN(%d) = %+v", n, d))
			}
		}); a != 0 {
			t.Errorf("%v: %v allocations per AllowN(%d) on a fresh key", r, a, n)
		}
	}
	single.AllowN(r.Limit)
	for _, n := range []int{0, 1} {
		if a := testing.AllocsPerRun(100, func() {
			if d := single.AllowN(n); d.Allowed != (n == 0) {
				panic(fmt.Sprintf("AllowN(%d) = %+v", n, d))
			}
		}); a != 0 {
			t.Errorf("%v: %v allocations per AllowN(%d) on a spent key", r, a, n)
		}
	}
}
