// Package locked is admit's plainest variant: each algorithm's kernel run
// under a mutex, for one key ([NewLimiter]) or many ([New], keys striped over
// padded mutexes), and the same for composite limits ([admit.Limits]:
// several rules on one key, all or nothing) with [NewLimitsLimiter] and
// [NewLimits]. Pick it for the sliding log on one key (package atomic has no
// sliding log), for the simplest code to read, or as an oracle in your own
// tests; for one key of the other algorithms pick package atomic, and for
// many keys atomic's New (the rules its lock-free table holds) or package
// sharded (every rule and composite). New is the map store package sharded
// builds, with full keys only; NewLimiter is the plainest code. All three give the same decisions for the same
// calls, but for a new key in a full store of many shards or keys
// ([admit.WithMaxKeys]), which may find room in one store and not in
// another (docs/keyed-stores.md, "The full-store policy").
//
// A keyed limiter spreads its keys over 2^k stripes ([admit.WithShards],
// default [admit.DefaultShards]) by a hash seeded per limiter, so
// attacker-chosen keys cannot be aimed at one stripe; no lock is shared by
// all keys. It evicts a key only when its state is equivalent to a fresh
// key's, so eviction changes no decision, and [admit.WithMaxKeys] bounds its
// keys (docs/keyed-stores.md). New returns an [admit.Store] and NewLimits
// an [admit.CompositeStore], with every control of the store: Stats
// counts only where keys are inserted, evicted or refused, and takes each
// stripe's lock in turn, as Len does; it is meant for a metrics scrape. Every limiter here reads its clock once per
// call and is safe for concurrent use.
package locked

import (
	"fmt"
	"sync"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/plumb"
)

// New returns a keyed limiter enforcing rule independently for every key. It
// supports all four algorithms, and the options [admit.WithShards] (the number
// of lock stripes), [admit.WithMaxKeys] and [admit.WithClock]; it returns an
// error wrapping [admit.ErrUnsupported] for [admit.WithHashedKeys] (package
// sharded has it). Other errors wrap [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption].
func New(rule admit.Rule, opts ...admit.Option) (admit.Store, error) {
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
	return mapstore.New(rule, set), nil
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
