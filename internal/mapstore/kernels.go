package mapstore

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
	d, _ := l.decideWhich(s, now, n)
	return d
}

// decideWhich is decide, and also returns the index of the rule that bound
// the decision: a composite's (kernel.Composite.Allow), 0 for one rule.
func (l *store[KT, S]) decideWhich(s *S, now time.Duration, n int) (admit.Decision, int) {
	switch k := l.kern.(type) {
	case *packedTB:
		return k.Allow(any(s).(*uint64), now, n), 0
	case *kernel.TokenBucket:
		return k.Allow(any(s).(*kernel.TokenBucketState), now, n), 0
	case *kernel.FixedWindow:
		return k.Allow(any(s).(*kernel.FixedWindowState), now, n), 0
	case *kernel.SlidingLog:
		return k.Allow(any(s).(*kernel.Log), now, n), 0
	case *kernel.Composite:
		return k.Allow(parts(s), now, n)
	default:
		return l.kern.(*kernel.SlidingCounter).Allow(any(s).(*kernel.SlidingCounterState), now, n), 0
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
	case *kernel.Composite:
		return k.Fresh(parts(s), now)
	default:
		return l.kern.(*kernel.SlidingCounter).Fresh(any(s).(*kernel.SlidingCounterState), now)
	}
}

// tbState returns the token-bucket state *s: a packed word's, or the
// kernel's state itself.
func tbState[S any](s *S) kernel.TokenBucketState {
	if w, ok := any(s).(*uint64); ok {
		return kernel.TokenBucketState{TAT: *w}
	}
	return *any(s).(*kernel.TokenBucketState)
}

// setTBState stores st in *s, as tbState reads it. A packed word's Frac is
// always 0 (kernel.TokenBucket.Packable).
func setTBState[S any](s *S, st kernel.TokenBucketState) {
	if w, ok := any(s).(*uint64); ok {
		*w = st.TAT
		return
	}
	*any(s).(*kernel.TokenBucketState) = st
}

// tbKernel returns the store's token-bucket kernel. The store must be a
// token bucket's.
func (l *store[KT, S]) tbKernel() *kernel.TokenBucket {
	if k, ok := l.kern.(*packedTB); ok {
		return k.k
	}
	return l.kern.(*kernel.TokenBucket)
}
