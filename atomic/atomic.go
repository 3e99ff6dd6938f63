package atomic

import (
	"fmt"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// Store is the keyed limiter [New] returns, with the controls of its store.
// New's result type is admit.KeyedLimiter, so that New is an [admit.Factory];
// assert it to reach these methods:
//
//	store := lim.(admitatomic.Store)
type Store interface {
	admit.KeyedLimiter

	// Len returns the number of keys stored now (xsync's count, which may
	// not include all of the latest insertions and evictions).
	Len() int

	// Sweep evicts every key that is idle now (its state equivalent to a
	// fresh key's at the clock's reading minus the slack of 100ms) and
	// returns the number of keys it evicted. It costs time in proportion to
	// the keys stored. Calls need not sweep: it is for owners who want
	// memory back while no new keys arrive.
	Sweep() int
}

// New returns a keyed limiter enforcing rule independently for every key,
// lock-free: keys live in a concurrent hash map (lookups take no lock; a new
// key is created once even when goroutines race on it) and each key's state is
// a word or a snapshot swapped by CAS. It supports the token bucket, the fixed
// window and the sliding counter; for the sliding log it returns an error
// wrapping [admit.ErrUnsupported].
//
// The limiter evicts idle keys, and only keys whose state is equivalent to a
// fresh key's, by a tombstone protocol that never lets a call admit on an
// evicted state (see keyed.go and docs/keyed-stores.md): each new key joins
// one of the store's rings, and each insertion examines a few cells at the
// head of its ring. It honours [admit.WithShards] (the number of rings, whose
// locks only insertions and sweeps take), [admit.WithMaxKeys] (with the
// full-store policy of package sharded) and [admit.WithClock]; it returns an
// error wrapping [admit.ErrUnsupported] for [admit.WithHashedKeys]. The
// limiter is always a [Store].
func New(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
	set, err := keyedSettings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		if k := kernel.NewTokenBucket(rule); k.Packable() {
			return newKeyed[tbCell](newTBKernel(k, set.ShardCount()), rule, set), nil
		} else {
			return newKeyed[tbSnapCell](newTBKernel(k, set.ShardCount()), rule, set), nil
		}
	case admit.FixedWindow:
		return newKeyed[fwCell](newFWCodec(rule), rule, set), nil
	default: // admit.SlidingCounter; keyedSettings rejected the sliding log
		if c, ok := newSCCodec(rule); ok {
			return newKeyed[scCell](c, rule, set), nil
		}
		return newKeyed[scSnapCell](kernel.NewSlidingCounter(rule), rule, set), nil
	}
}

// NewLimiter returns a lock-free limiter enforcing rule for a single key, in the
// packed form where the rule allows it. It supports the token bucket, the fixed
// window and the sliding counter; for the sliding log it returns an error
// wrapping [admit.ErrUnsupported].
func NewLimiter(rule admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		if k := kernel.NewTokenBucket(rule); k.Packable() {
			return &TokenBucket{k: *newTBKernel(k, 1), clock: set.Clock}, nil
		}
		return &TokenBucketSnapshot{k: *newTBKernel(kernel.NewTokenBucket(rule), 1), clock: set.Clock}, nil
	case admit.FixedWindow:
		return &FixedWindow{codec: newFWCodec(rule), clock: set.Clock}, nil
	default:
		if c, ok := newSCCodec(rule); ok {
			return &slidingCounter{codec: c, clock: set.Clock}, nil
		}
		return &slidingCounterSnapshot{k: kernel.NewSlidingCounter(rule), clock: set.Clock}, nil
	}
}

// settings validates rule and applies opts for a single-key constructor,
// which has no store: the keyed-store options are an error.
func settings(rule admit.Rule, opts []admit.Option) (admit.Settings, error) {
	set, err := keyedSettings(rule, opts)
	if err != nil {
		return admit.Settings{}, err
	}
	if names := set.StoreOptions(); names != "" {
		return admit.Settings{}, fmt.Errorf("atomic: %w: %s shape a keyed store; a single-key limiter has none, use New", admit.ErrUnsupported, names)
	}
	return set, nil
}

// keyedSettings validates rule and applies opts for New.
func keyedSettings(rule admit.Rule, opts []admit.Option) (admit.Settings, error) {
	if err := rule.Validate(); err != nil {
		return admit.Settings{}, fmt.Errorf("atomic: %w", err)
	}
	if rule.Algorithm == admit.SlidingLog {
		return admit.Settings{}, fmt.Errorf("atomic: %w: the sliding log keeps a ring of %d timestamps per key, which no single compare-and-swap can update; use locked.New (or sharded.New) for %v",
			admit.ErrUnsupported, rule.Limit, rule)
	}
	set, err := admit.NewSettings(opts...)
	if err != nil {
		return admit.Settings{}, fmt.Errorf("atomic: %w", err)
	}
	if set.HashedKeys {
		return admit.Settings{}, fmt.Errorf("atomic: %w: WithHashedKeys; an atomic store keeps full keys, use sharded.New to store hashes", admit.ErrUnsupported)
	}
	return set, nil
}
