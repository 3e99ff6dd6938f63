package keyed_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// cell is the simplest keyed.Cell: a packed bucket's word (kernel.TokenBucket
// Pack and Unpack), with Pack's two unused words as the sentinels, as
// package atomic's tbCell has them.
type cell struct{ w atomic.Uint64 }

const (
	tombWord = 1
	heldWord = 2
)

func (c *cell) Load() uint64 { return c.w.Load() }

func (c *cell) State(k *kernel.TokenBucket, w uint64) (kernel.TokenBucketState, bool, bool) {
	return k.Unpack(w), w == heldWord, w == tombWord
}

func (c *cell) Fits(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	_, ok := k.Pack(s)
	return ok
}

func (c *cell) CAS(k *kernel.TokenBucket, old uint64, s kernel.TokenBucketState) bool {
	w, _ := k.Pack(s)
	return c.w.CompareAndSwap(old, w)
}

func (c *cell) CASHeld(old uint64) bool { return c.w.CompareAndSwap(old, heldWord) }

func (c *cell) Release(k *kernel.TokenBucket, s kernel.TokenBucketState) bool {
	w, ok := k.Pack(s)
	if ok {
		c.w.Store(w)
	}
	return ok
}

func (c *cell) Bury() { c.w.Store(tombWord) }

// store is a caller of the held protocol that keys its records by a string (as
// a table whose slots move would) and holds its own mutex around every call.
type store struct {
	k  *kernel.TokenBucket
	mu sync.Mutex
	h  keyed.Holds[uint64, string, *cell] // guarded by mu
	c  cell
}

const key = "k"

func newStore(rule admit.Rule) *store {
	s := &store{k: kernel.NewTokenBucket(rule)}
	s.h.Init(s.k)
	return s
}

func (s *store) decide(now time.Duration, n int) (kernel.Verdict, keyed.HoldResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h.Decide(&s.c, key, now, n)
}

func (s *store) spill(old uint64, st kernel.TokenBucketState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h.Spill(&s.c, key, old, st)
}

func (s *store) reserve(now time.Duration, n int, maxWait time.Duration) (time.Duration, bool, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h.Reserve(&s.c, key, now, n, maxWait)
}

func (s *store) cancel(ticket uint64, now time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h.Cancel(&s.c, key, ticket, now)
}

// settle is Holds.Settle with a floor that records the readings raised to.
func (s *store) settle(at time.Duration, raised *[]time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h.Settle(&s.c, key, at, func(at time.Duration) { *raised = append(*raised, at) })
}

// rec returns the cell's record (the zero Rec if it has none).
func (s *store) rec() keyed.Rec {
	r, _ := s.h.Record(key)
	return r
}

// check fails the test unless the cell is held exactly when want is, and
// holds a record exactly then: a cell is held exactly while its record exists.
func (s *store) check(t *testing.T, step string, want bool) {
	t.Helper()
	_, hasRec := s.h.Record(key)
	if got := s.c.Load() == heldWord; got != want || hasRec != want {
		t.Fatalf("%s: held = %v, record = %v; want both %v", step, got, hasRec, want)
	}
}

// scaled is a rule whose emission interval is not whole nanoseconds, so its
// word has a horizon (10.7 days either side of the origin).
var scaled = admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}

// TestSpillThenRelease spills a state past the word's horizon, decides on
// the held cell, and releases it once a decision leaves a state that fits.
func TestSpillThenRelease(t *testing.T) {
	s := newStore(scaled)
	past := -(s.k.Horizon() + time.Second) // an admission here leaves a TAT past -Horizon
	var st kernel.TokenBucketState
	if v := s.k.Decide(&st, past, 1); !v.Allowed {
		t.Fatalf("Decide(fresh, %v, 1) denied", past)
	}
	if s.c.Fits(s.k, st) {
		t.Fatalf("the state after an admission at %v fits the word; want it past the horizon", past)
	}
	if s.spill(heldWord, st) {
		t.Fatal("step 1: Spill(old = the held word) on a fresh cell = true, want false: the value is not old")
	}
	s.check(t, "step 1", false)
	if !s.spill(0, st) {
		t.Fatal("step 2: Spill(old = 0) = false, want true")
	}
	s.check(t, "step 2", true)
	if got, _ := s.h.Record(key); got != (keyed.Rec{State: st}) {
		t.Fatalf("step 2: record %+v, want the spilled state %+v and no hold", got, st)
	}

	// Another admission at the same reading is decided on the record and
	// stays past the horizon: the cell stays held.
	want := st
	wantV := s.k.Decide(&want, past, 1)
	if v, o := s.decide(past, 1); o != keyed.Decided || v != wantV {
		t.Fatalf("step 3: Decide(%v, 1) = %+v, %v; want %+v, Decided", past, v, o, wantV)
	}
	s.check(t, "step 3", true)
	if got := s.rec().State; got != want {
		t.Fatalf("step 3: record's state %+v, want %+v", got, want)
	}

	// An admission at 0 leaves a TAT of one emission interval, which fits:
	// the cell is released with the state's word.
	wantV = s.k.Decide(&want, 0, 1)
	if v, o := s.decide(0, 1); o != keyed.Decided || v != wantV {
		t.Fatalf("step 4: Decide(0, 1) = %+v, %v; want %+v, Decided", v, o, wantV)
	}
	s.check(t, "step 4", false)
	if w, _ := s.k.Pack(want); s.c.Load() != w {
		t.Fatalf("step 4: word %#x, want %#x (the state %+v)", s.c.Load(), w, want)
	}

	// A call that found the held word before the release decides nothing.
	if _, o := s.decide(0, 1); o != keyed.Released {
		t.Fatalf("step 5: Decide on a released cell: %v, want Released", o)
	}
}

// TestReserveDecideCancel holds a cell with a reservation that must wait,
// decides on the held cell, and cancels the reservation at most once.
func TestReserveDecideCancel(t *testing.T) {
	s := newStore(admit.Rule{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Second})
	const t0 = time.Second
	if d, ok, ticket, live := s.reserve(t0, 10, 0); d != 0 || !ok || ticket != 0 || !live {
		t.Fatalf("step 1: Reserve(t0, 10, 0) = %v, %v, %d, %v; want 0, true, 0 (due at once: no hold), true", d, ok, ticket, live)
	}
	s.check(t, "step 1", false)
	emptied := s.k.Unpack(s.c.Load())

	d, ok, ticket, live := s.reserve(t0, 1, time.Second)
	if d != 100*time.Millisecond || !ok || ticket == 0 || !live {
		t.Fatalf("step 2: Reserve(t0, 1, 1s) = %v, %v, %d, %v; want 100ms, true, a ticket, true", d, ok, ticket, live)
	}
	s.check(t, "step 2", true)
	if h := s.rec().Hold; h.Ticket != ticket || h.Before != emptied {
		t.Fatalf("step 2: hold %+v, want ticket %d and Before %+v", h, ticket, emptied)
	}

	// A denial on the held cell is decided on the record and shows the
	// hold its reading.
	if v, o := s.decide(t0+50*time.Millisecond, 1); o != keyed.Decided || v.Allowed {
		t.Fatalf("step 3: Decide(t0+50ms, 1) = %+v, %v; want a denial, Decided", v, o)
	}
	s.check(t, "step 3", true)
	if seen := s.rec().Hold.Seen; seen != t0+50*time.Millisecond {
		t.Fatalf("step 3: hold's Seen %v, want t0+50ms", seen)
	}

	if s.cancel(ticket+1, t0) {
		t.Fatal("step 4: Cancel(another ticket) = true, want false")
	}
	s.check(t, "step 4", true)
	// At a stale reading, judged at the hold's Seen, t0+50ms: not due yet.
	if !s.cancel(ticket, t0) {
		t.Fatal("step 5: Cancel(ticket, t0) = false, want true")
	}
	s.check(t, "step 5", false)
	if got := s.k.Unpack(s.c.Load()); got != emptied {
		t.Fatalf("step 5: state %+v after the cancellation, want the state before the reservation %+v", got, emptied)
	}
	if s.cancel(ticket, t0) {
		t.Fatal("step 6: Cancel(ticket) a second time = true, want false")
	}

	s.c.Bury()
	if _, o := s.decide(t0, 1); o != keyed.Tomb {
		t.Fatalf("step 7: Decide on a tombstone: %v, want Tomb", o)
	}
	if _, _, _, live := s.reserve(t0, 1, time.Second); live {
		t.Fatal("step 8: Reserve on a tombstone: live, want not")
	}
}

// TestSettle shows a sweep's reading to a held cell: it releases a hold
// that is no longer live, keeps a live one, and buries a spilled state that
// is fresh, raising the floor first.
func TestSettle(t *testing.T) {
	t.Run("hold", func(t *testing.T) {
		s := newStore(admit.Rule{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Second})
		var raised []time.Duration
		s.reserve(0, 10, 0)
		_, _, ticket, _ := s.reserve(0, 1, time.Second) // due at 100ms
		s.check(t, "reserved", true)
		if s.settle(50*time.Millisecond, &raised) {
			t.Fatal("Settle(50ms) on a live hold = true, want false")
		}
		s.check(t, "Settle(50ms)", true)
		if s.settle(100*time.Millisecond, &raised) {
			t.Fatal("Settle(100ms) = true, want false: the released state is not fresh")
		}
		s.check(t, "Settle(100ms)", false)
		if s.cancel(ticket, 0) {
			t.Fatal("Cancel after the hold was seen due = true, want false")
		}
		if s.settle(10*time.Second, &raised) || len(raised) != 0 {
			t.Fatalf("Settle on a cell not held = true or raised %v; want false, nothing raised", raised)
		}
	})
	t.Run("spill", func(t *testing.T) {
		s := newStore(scaled)
		var raised []time.Duration
		past := -(s.k.Horizon() + time.Second)
		var st kernel.TokenBucketState
		s.k.Decide(&st, past, 1)
		s.spill(0, st)
		if s.settle(past, &raised) || len(raised) != 0 {
			t.Fatalf("Settle(%v) right after the admission = true or raised %v; want false, nothing raised", past, raised)
		}
		s.check(t, "Settle(past)", true)
		at := -s.k.Horizon() // full again, yet still past the horizon
		if !s.settle(at, &raised) {
			t.Fatalf("Settle(%v) on a fresh spilled state = false, want true", at)
		}
		if len(raised) != 1 || raised[0] != at {
			t.Fatalf("Settle(%v) raised the floor to %v, want [%v]", at, raised, at)
		}
		if _, has := s.h.Record(key); s.c.Load() != tombWord || has {
			t.Fatalf("after Settle: word %#x, a record %v; want the tombstone and none", s.c.Load(), has)
		}
	})
}
