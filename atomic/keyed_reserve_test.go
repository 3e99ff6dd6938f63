package atomic

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// TestKeyedReserveMeetsTombstone: a reservation that has loaded its key's
// cell when the key is evicted publishes nothing on the tombstone, unlinks it
// and starts over from the map, where it recreates the key at the floor; the
// store then holds one key, with the reservation's tokens taken. A
// cancellation of a reservation from before the eviction gives nothing back;
// one of the key's latest, not yet due, does.
func TestKeyedReserveMeetsTombstone(t *testing.T) {
	for _, window := range []time.Duration{2 * time.Second, 2*time.Second + 1} {
		fake := clock.NewFake()
		lim, err := New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: window}, admit.WithClock(fake))
		if err != nil {
			t.Fatal(err)
		}
		kr := lim.(keyedReserver)
		old, ok := kr.ReserveN("k", 1, 0)
		if !ok {
			t.Fatal("the first reservation was refused")
		}
		fake.Advance(window) // k is full again: fresh
		evicted := 0
		lim.(testHooks).setPause(func() { evicted = lim.(testHooks).evictAt(fake.Now()) })
		r, ok := kr.ReserveN("k", 2, 0)
		if evicted != 1 || !ok || r.Delay != 0 {
			t.Fatalf("window %v: evicted %d, reservation %v %v; want 1, 0 true", window, evicted, r.Delay, ok)
		}
		if n := lim.(admit.Store).Len(); n != 1 {
			t.Errorf("window %v: Len = %d after the retry, want 1", window, n)
		}
		if d := lim.AllowN("k", 0); d.Remaining != 0 {
			t.Errorf("window %v: the recreated key has %d tokens left, want 0", window, d.Remaining)
		}
		if kr.CancelReservation("k", old) {
			t.Errorf("window %v: a reservation from before the eviction was cancelled", window)
		}
		next, ok := kr.ReserveN("k", 1, window)
		if !ok || next.Delay <= 0 {
			t.Fatalf("window %v: the next reservation = %v %v, want a wait", window, next.Delay, ok)
		}
		if !kr.CancelReservation("k", next) {
			t.Errorf("window %v: the latest reservation, not yet due, was not cancelled", window)
		}
	}
}
