package admit_test

import (
	"context"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// A test that kills a mutant `make mutate` found alive; see
// docs/stress.md ("Mutation testing").

// scriptedReserver is a KeyedReserver whose ReserveN answers from a script,
// as a full store does: refused with the time until room may appear, then
// admitted.
type scriptedReserver struct {
	answers []admit.Reservation // refused while Delay > 0, admitted at Delay 0
	calls   int
}

func (s *scriptedReserver) Allow(key string) admit.Decision { return s.AllowN(key, 1) }
func (s *scriptedReserver) AllowN(string, int) admit.Decision {
	panic("WaitKeyN polls a KeyedReserver")
}

func (s *scriptedReserver) ReserveN(_ string, _ int, maxWait time.Duration) (admit.Reservation, bool) {
	r := s.answers[min(s.calls, len(s.answers)-1)]
	s.calls++
	return r, r.Delay == 0
}

func (s *scriptedReserver) CancelReservation(string, admit.Reservation) bool { return false }

// TestWaitKeyRetriesAfterRoom: a reservation refused for lack of room is
// asked again after the wait it reported, and WaitKeyN returns nil only once
// one was admitted.
func TestWaitKeyRetriesAfterRoom(t *testing.T) {
	inBubble(t, func(t *testing.T, _ admit.Option) {
		lim := &scriptedReserver{answers: []admit.Reservation{{Delay: time.Second}, {Delay: time.Second}, {}}}
		start := time.Now()
		if err := admit.WaitKeyN(context.Background(), lim, "k", 1); err != nil {
			t.Fatalf("WaitKeyN = %v, want nil", err)
		}
		if lim.calls != 3 {
			t.Errorf("ReserveN called %d times, want 3: twice refused, then admitted", lim.calls)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("WaitKeyN returned after %v of bubble time, want 2s", got)
		}
	})
}
