package sharded

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// packedTB is the token-bucket kernel on a bare TAT word, for rules whose
// emission interval Window/Limit is a whole number of nanoseconds
// (kernel.TokenBucket.Packable): the state's Frac is then always 0, and
// storing the TAT alone halves the state. It adds no arithmetic: it moves the
// word in and out of the kernel's state.
type packedTB struct{ k *kernel.TokenBucket }

// Allow is kernel.TokenBucket.Allow on the word.
func (p *packedTB) Allow(s *uint64, now time.Duration, n int) admit.Decision {
	st := kernel.TokenBucketState{TAT: *s}
	d := p.k.Allow(&st, now, n)
	*s = st.TAT
	return d
}

// Fresh is kernel.TokenBucket.Fresh on the word.
func (p *packedTB) Fresh(s *uint64, now time.Duration) bool {
	st := kernel.TokenBucketState{TAT: *s}
	return p.k.Fresh(&st, now)
}

// decide runs the store's kernel on *s. It dispatches on the kernel's
// concrete type rather than calling a method of a type parameter: Go
// compiles such a call through a dictionary, which makes escape analysis
// assume that s escapes, so the caller's state would move to the heap, one
// allocation per call. Here every call is static and s stays on the stack.
func (l *store[KT, S]) decide(s *S, now time.Duration, n int) admit.Decision {
	switch k := l.kern.(type) {
	case *packedTB:
		return k.Allow(any(s).(*uint64), now, n)
	case *kernel.TokenBucket:
		return k.Allow(any(s).(*kernel.TokenBucketState), now, n)
	case *kernel.FixedWindow:
		return k.Allow(any(s).(*kernel.FixedWindowState), now, n)
	case *kernel.SlidingLog:
		return k.Allow(any(s).(*kernel.Log), now, n)
	default:
		return l.kern.(*kernel.SlidingCounter).Allow(any(s).(*kernel.SlidingCounterState), now, n)
	}
}

// fresh reports whether *s is equivalent to a new key's state at reading now
// (kernel.Fresh), dispatching as decide does.
func (l *store[KT, S]) fresh(s *S, now time.Duration) bool {
	switch k := l.kern.(type) {
	case *packedTB:
		return k.Fresh(any(s).(*uint64), now)
	case *kernel.TokenBucket:
		return k.Fresh(any(s).(*kernel.TokenBucketState), now)
	case *kernel.FixedWindow:
		return k.Fresh(any(s).(*kernel.FixedWindowState), now)
	case *kernel.SlidingLog:
		return k.Fresh(any(s).(*kernel.Log), now)
	default:
		return l.kern.(*kernel.SlidingCounter).Fresh(any(s).(*kernel.SlidingCounterState), now)
	}
}

// Reserve is kernel.TokenBucket.Reserve on the word.
func (p *packedTB) Reserve(s *uint64, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool) {
	st := kernel.TokenBucketState{TAT: *s}
	d, ok := p.k.Reserve(&st, now, n, maxWait)
	*s = st.TAT
	return d, ok
}

// Cancel is kernel.TokenBucket.Cancel on the word.
func (p *packedTB) Cancel(s *uint64, now time.Duration, after kernel.TokenBucketState, n int) bool {
	st := kernel.TokenBucketState{TAT: *s}
	ok := p.k.Cancel(&st, now, after, n)
	*s = st.TAT
	return ok
}

// reserveTB runs the store's token-bucket kernel's Reserve on *s, dispatching
// as decide does. The store must be a token bucket's.
func (l *store[KT, S]) reserveTB(s *S, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool) {
	if k, ok := l.kern.(*packedTB); ok {
		return k.Reserve(any(s).(*uint64), now, n, maxWait)
	}
	return l.kern.(*kernel.TokenBucket).Reserve(any(s).(*kernel.TokenBucketState), now, n, maxWait)
}

// cancelTB runs the store's token-bucket kernel's Cancel on *s for r,
// dispatching as decide does. The store must be a token bucket's.
func (l *store[KT, S]) cancelTB(s *S, now time.Duration, r admit.Reservation) bool {
	st := r.State()
	after := kernel.TokenBucketState{TAT: st[0], Frac: int64(st[1])}
	if k, ok := l.kern.(*packedTB); ok {
		return k.Cancel(any(s).(*uint64), now, after, r.N())
	}
	return l.kern.(*kernel.TokenBucket).Cancel(any(s).(*kernel.TokenBucketState), now, after, r.N())
}

// reservation records a reservation of n due after d that left the state *s.
func (l *store[KT, S]) reservation(d time.Duration, n int, s *S) admit.Reservation {
	var st [2]uint64
	switch s := any(s).(type) {
	case *uint64:
		st[0] = *s
	case *kernel.TokenBucketState:
		st = [2]uint64{s.TAT, uint64(s.Frac)}
	}
	return admit.NewReservation(d, n, st)
}
