// Package locked is admit's reference variant: each algorithm's kernel run under
// a mutex. It is simple enough to be obviously correct, which is its job: the
// lock-free variant and the sharded store are checked against it.
//
// Pick locked when you want the sliding log with a small sharded footprint,
// when contention on any one key is high enough that CAS retries would spin
// (a mutex parks waiters instead), or simply when you value the plainest code
// over the last nanoseconds. For the hottest single keys, package atomic is
// faster; for millions of keys with idle-key eviction, package sharded.
//
// A keyed limiter spreads its keys over 2^k stripes, each a mutex and a map of
// that stripe's keys, chosen by a per-limiter seeded hash (hash/maphash) of the
// key, so attacker-chosen keys cannot be aimed at one stripe. Two keys contend
// only when they share a stripe; no lock is ever shared by all keys.
//
// Every limiter here reads its clock once per call, before taking the lock, and
// is safe for concurrent use.
package locked

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// New returns a keyed limiter enforcing rule independently for every key. It
// supports all four algorithms. The error wraps [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption].
func New(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		return newKeyed[kernel.TokenBucketState](kernel.NewTokenBucket(rule), set), nil
	case admit.FixedWindow:
		return newKeyed[kernel.FixedWindowState](kernel.NewFixedWindow(rule), set), nil
	case admit.SlidingLog:
		return newKeyed[kernel.Log](kernel.NewSlidingLog(rule), set), nil
	default: // admit.SlidingCounter; Validate rejected anything else
		return newKeyed[kernel.SlidingCounterState](kernel.NewSlidingCounter(rule), set), nil
	}
}

// NewLimiter returns a limiter enforcing rule for a single key. It supports all
// four algorithms. The error wraps [admit.ErrInvalidRule] or [admit.ErrInvalidOption].
func NewLimiter(rule admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		return &single[kernel.TokenBucketState, *kernel.TokenBucket]{k: kernel.NewTokenBucket(rule), clock: set.Clock}, nil
	case admit.FixedWindow:
		return &single[kernel.FixedWindowState, *kernel.FixedWindow]{k: kernel.NewFixedWindow(rule), clock: set.Clock}, nil
	case admit.SlidingLog:
		return &single[kernel.Log, *kernel.SlidingLog]{k: kernel.NewSlidingLog(rule), clock: set.Clock}, nil
	default:
		return &single[kernel.SlidingCounterState, *kernel.SlidingCounter]{k: kernel.NewSlidingCounter(rule), clock: set.Clock}, nil
	}
}

func settings(rule admit.Rule, opts []admit.Option) (admit.Settings, error) {
	if err := rule.Validate(); err != nil {
		return admit.Settings{}, fmt.Errorf("locked: %w", err)
	}
	set, err := admit.NewSettings(opts...)
	if err != nil {
		return admit.Settings{}, fmt.Errorf("locked: %w", err)
	}
	return set, nil
}

// single guards one key's state with one mutex.
type single[S any, K kernel.Kernel[S]] struct {
	mu    sync.Mutex
	state S // guarded by mu
	k     K
	clock clock.Clock
}

func (l *single[S, K]) Allow() admit.Decision { return l.AllowN(1) }

func (l *single[S, K]) AllowN(n int) admit.Decision {
	now := l.clock.Now() // read outside the lock; the kernel clamps a stale reading
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.k.Allow(&l.state, now, n)
}

// cacheLinePad is the size stripes are padded to. 128, not 64: Intel's
// adjacent-line prefetcher fetches 64-byte lines in pairs, so two stripes that
// share a 128-byte pair still slow each other down; 128 is also the line size
// of Apple's arm64 cores.
const cacheLinePad = 128

// stripeFields mirrors the fields of stripe, whose size cannot be taken in a
// constant expression because stripe is generic. TestStripeSize pins the two
// together.
type stripeFields struct {
	mu sync.Mutex
	m  map[string]unsafe.Pointer
}

// stripe is a mutex and the states of the keys that hash to it.
type stripe[S any] struct {
	mu sync.Mutex
	m  map[string]*S // guarded by mu; a key's state lives as long as the limiter
	_  [cacheLinePad - unsafe.Sizeof(stripeFields{})]byte
}

// keyed spreads keys over striped locks.
type keyed[S any, K kernel.Kernel[S]] struct {
	k       K
	clock   clock.Clock
	seed    maphash.Seed
	mask    uint64
	stripes []stripe[S]
}

// stripeCount is four stripes per processor, rounded up to a power of two, and
// at least 16: enough that independent keys rarely share a stripe.
func stripeCount() int {
	n := 16
	for n < 4*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	return n
}

func newKeyed[S any, K kernel.Kernel[S]](k K, set admit.Settings) *keyed[S, K] {
	n := stripeCount()
	l := &keyed[S, K]{k: k, clock: set.Clock, seed: maphash.MakeSeed(), mask: uint64(n - 1), stripes: make([]stripe[S], n)}
	for i := range l.stripes {
		l.stripes[i].m = make(map[string]*S)
	}
	return l
}

func (l *keyed[S, K]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

func (l *keyed[S, K]) AllowN(key string, n int) admit.Decision {
	now := l.clock.Now()
	st := &l.stripes[maphash.String(l.seed, key)&l.mask]
	st.mu.Lock()
	defer st.mu.Unlock()
	if s := st.m[key]; s != nil {
		return l.k.Allow(s, now, n)
	}
	// A new key is stored only once it has admitted something: a probe or a
	// request that can never pass leaves no state behind, like any denial.
	s := new(S)
	d := l.k.Allow(s, now, n)
	if d.Allowed && n > 0 {
		st.m[strings.Clone(key)] = s // our own copy: the caller may reuse key's memory
	}
	return d
}
