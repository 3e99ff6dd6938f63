// Package locked is admit's plainest variant: each algorithm's kernel run
// under a mutex, for one key ([NewLimiter]) or many ([New], keys striped over
// padded mutexes). Pick it for the sliding log on one key (package atomic has
// no sliding log), for the simplest code to read, or as an oracle in your own
// tests; for one key of the other algorithms pick package atomic, and for
// many keys package sharded. All three give the same decisions for the same
// calls.
//
// A keyed limiter spreads its keys over 2^k stripes ([admit.WithShards],
// default [admit.DefaultShards]) by a hash seeded per limiter, so
// attacker-chosen keys cannot be aimed at one stripe; no lock is shared by
// all keys. It evicts a key only when its state is equivalent to a fresh
// key's, so eviction changes no decision, and [admit.WithMaxKeys] bounds its
// keys (docs/keyed-stores.md). Every limiter here reads its clock once per
// call and is safe for concurrent use.
package locked

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/evict"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
	"github.com/admit-go/admit/internal/plumb"
)

// New returns a keyed limiter enforcing rule independently for every key. It
// supports all four algorithms, and the options [admit.WithShards] (the number
// of lock stripes), [admit.WithMaxKeys] and [admit.WithClock]; it returns an
// error wrapping [admit.ErrUnsupported] for [admit.WithHashedKeys] (package
// sharded has it). Other errors wrap [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption]. The limiter is always a [admit.Store].
func New(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
	if err := rule.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	set, err := plumb.ResolveLimiter("locked", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if set.HashedKeys {
		return nil, fmt.Errorf("%w: locked.New: WithHashedKeys; a locked store keeps full keys, use sharded.New to store hashes", admit.ErrUnsupported)
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		return keyedTokenBucket{newKeyed[kernel.TokenBucketState](kernel.NewTokenBucket(rule), rule, set)}, nil
	case admit.FixedWindow:
		return newKeyed[kernel.FixedWindowState](kernel.NewFixedWindow(rule), rule, set), nil
	case admit.SlidingLog:
		return newKeyed[kernel.Log](kernel.NewSlidingLog(rule), rule, set), nil
	default: // admit.SlidingCounter; Validate rejected anything else
		return newKeyed[kernel.SlidingCounterState](kernel.NewSlidingCounter(rule), rule, set), nil
	}
}

// NewLimiter returns a limiter enforcing rule for a single key. It supports all
// four algorithms. The error wraps [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption], or [admit.ErrUnsupported] for the keyed-store
// options ([admit.WithShards], [admit.WithMaxKeys], [admit.WithHashedKeys]),
// which a single key has no use for.
func NewLimiter(rule admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
	if err := rule.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	set, err := plumb.ResolveLimiter("locked", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if names := set.StoreOptions(); names != "" {
		return nil, fmt.Errorf("%w: locked.NewLimiter: %s shape a keyed store; NewLimiter guards a single key, use New", admit.ErrUnsupported, names)
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		return &tokenBucket{single: single[kernel.TokenBucketState, *kernel.TokenBucket]{k: kernel.NewTokenBucket(rule), clock: set.Clock, rule: rule}}, nil
	case admit.FixedWindow:
		return &single[kernel.FixedWindowState, *kernel.FixedWindow]{k: kernel.NewFixedWindow(rule), clock: set.Clock, rule: rule}, nil
	case admit.SlidingLog:
		return &single[kernel.Log, *kernel.SlidingLog]{k: kernel.NewSlidingLog(rule), clock: set.Clock, rule: rule}, nil
	default:
		return &single[kernel.SlidingCounterState, *kernel.SlidingCounter]{k: kernel.NewSlidingCounter(rule), clock: set.Clock, rule: rule}, nil
	}
}

// single guards one key's state with one mutex.
type single[S any, K kernel.Kernel[S]] struct {
	mu    sync.Mutex
	state S // guarded by mu
	k     K
	clock clock.Clock
	rule  admit.Rule
}

// Rule returns the rule the limiter enforces.
func (l *single[S, K]) Rule() admit.Rule { return l.rule }

func (l *single[S, K]) Allow() admit.Decision { return l.AllowN(1) }

func (l *single[S, K]) AllowN(n int) admit.Decision {
	now := l.clock.Now() // read outside the lock; the kernel clamps a stale reading
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.k.Allow(&l.state, now, n)
}

// stripeFields mirrors the fields of stripe, whose size cannot be taken in a
// constant expression because stripe is generic. TestStripeSize pins the two
// together.
type stripeFields struct {
	mu    sync.Mutex
	m     map[string]unsafe.Pointer
	floor time.Duration
	peak  int
	holds map[unsafe.Pointer]kernel.Hold
}

// stripe is a mutex and the states of the keys that hash to it.
type stripe[S any] struct {
	mu sync.Mutex
	m  map[string]*S // guarded by mu

	// floor is guarded by mu: the newest reading at which a key of this
	// stripe has been evicted (math.MinInt64 before the first). A call that
	// finds its key missing decides at max(its reading, floor): the key may
	// have been evicted as fresh at floor, and a fresh state is equivalent
	// to a new one only from floor on. Calls on stored keys use their own
	// reading, exactly as without eviction. docs/keyed-stores.md has the proof.
	floor time.Duration

	peak int // guarded by mu: the most keys m has held since it was made

	// holds is guarded by mu: the holds (kernel.Hold) of the token-bucket
	// reservations of this stripe's keys that may still be cancelled, by the
	// address of the key's state (a key evicted and stored again has a new
	// one). Calls of a stripe that never had a hold pay one comparison.
	holds map[*S]kernel.Hold

	_ [layout.CacheLinePad - unsafe.Sizeof(stripeFields{})]byte
}

// keyed spreads keys over striped locks.
type keyed[S any, K kernel.Kernel[S]] struct {
	k       K
	rule    admit.Rule
	clock   clock.Clock
	seed    maphash.Seed
	shift   uint          // a hash's stripe is hash >> shift (64 for one stripe: 0)
	limit   int           // the rule's Limit
	maxKeys int64         // WithMaxKeys, or 0 for no bound
	horizon time.Duration // the longest a state can take to become fresh
	stripes []stripe[S]
	keys    evict.Counter // keys stored (when maxKeys > 0), and makeRoom's cursor

	// pause, when set (by tests only), is called once, by the first call to
	// reach it after it has read the clock and before it takes its stripe's
	// lock.
	pause atomic.Pointer[func()]
}

func newKeyed[S any, K kernel.Kernel[S]](k K, rule admit.Rule, set plumb.Settings) *keyed[S, K] {
	n := set.ShardCount()
	l := &keyed[S, K]{
		k:       k,
		rule:    rule,
		clock:   set.Clock,
		seed:    maphash.MakeSeed(),
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		limit:   rule.Limit,
		maxKeys: int64(set.MaxKeys),
		horizon: evict.Horizon(rule),
		stripes: make([]stripe[S], n),
	}
	for i := range l.stripes {
		l.stripes[i].m = make(map[string]*S)
		l.stripes[i].floor = math.MinInt64
	}
	return l
}

func (l *keyed[S, K]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

// Rule implements [admit.Store].
func (l *keyed[S, K]) Rule() admit.Rule { return l.rule }

func (l *keyed[S, K]) AllowN(key string, n int) admit.Decision {
	now := l.clock.Now()
	l.paused()
	st := l.stripeOf(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if s := st.m[key]; s != nil {
		d := l.k.Allow(s, now, n)
		if len(st.holds) != 0 {
			showHold(st, l.k, s, now)
		}
		return d
	}
	return l.insert(st, key, now, n)
}

// paused calls the stress harness's hook (a no-op in a normal build), then
// runs the test hook pause, if it is set, and clears it.
func (l *keyed[S, K]) paused() {
	hook.Between(hook.BeforeLock)
	if p := l.pause.Load(); p != nil && l.pause.CompareAndSwap(p, nil) {
		(*p)()
	}
}

// stripeOf returns key's stripe.
func (l *keyed[S, K]) stripeOf(key string) *stripe[S] {
	return &l.stripes[maphash.String(l.seed, key)>>l.shift]
}

// insert decides a request for a key that st does not hold, and stores the
// key if it admitted something: a probe or a request that can never pass
// leaves no state behind, like any denial. It requires that st.mu is held.
func (l *keyed[S, K]) insert(st *stripe[S], key string, now time.Duration, n int) admit.Decision {
	now = max(now, st.floor) // the key may have been evicted as fresh at floor
	s := new(S)
	d := l.k.Allow(s, now, n)
	if !d.Allowed || n == 0 {
		return d
	}
	if wait, ok := l.add(st, key, s, now); !ok {
		return admit.Decision{Limit: l.limit, RetryAfter: wait}
	}
	return d
}

// add stores s, the state of a key that st does not hold, decided at now
// (already clamped to the floor): it sweeps a few keys of st first, and in a
// full store makes room or returns, with ok false, the RetryAfter of the
// denial, storing nothing. It requires that st.mu is held.
func (l *keyed[S, K]) add(st *stripe[S], key string, s *S, now time.Duration) (wait time.Duration, ok bool) {
	if len(st.m) >= evict.SweepMinLen {
		l.sweep(st, now, evict.SweepBatch)
	}
	if l.maxKeys > 0 && !l.reserve() {
		if wait, ok := l.makeRoom(st, now); !ok {
			return wait, false
		}
	}
	st.m[strings.Clone(key)] = s // our own copy: the caller may reuse key's memory
	st.peak = max(st.peak, len(st.m))
	return 0, true
}

// reserve counts one more key if the limiter has room for it.
func (l *keyed[S, K]) reserve() bool {
	return l.keys.Reserve(l.maxKeys)
}

// Len implements [admit.Store].
func (l *keyed[S, K]) Len() int {
	total := 0
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		total += len(st.m)
		st.mu.Unlock()
	}
	return total
}
