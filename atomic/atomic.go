package atomic

import (
	"fmt"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/table"
)

// New returns a keyed limiter enforcing rule independently for every key,
// lock-free: an open-addressing table in hash shards, where each key is one
// slot holding its state in one word, and each decision is published by one
// compare-and-swap on that word. It supports the token bucket, the fixed
// window and the sliding counters whose state packs in one word (Limit <
// 2^16, with windows long enough for the clock's range); for the sliding
// log, and the sliding counters that do not pack, it returns an error
// wrapping [admit.ErrUnsupported] that names sharded.New, which takes every
// rule.
//
// It evicts a key only when its state is equivalent to a fresh key's, so
// eviction changes no decision, and honours every option:
// [admit.WithShards], [admit.WithMaxKeys], [admit.WithHashedKeys] and
// [admit.WithClock]. Its result, an [admit.Store], has every control of the
// store. docs/keyed-stores.md has the table's layout and
// its eviction protocol.
func New(rule admit.Rule, opts ...admit.Option) (admit.Store, error) {
	if err := rule.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if err := packs(rule); err != nil {
		return nil, err
	}
	set, err := plumb.ResolveLimiter("atomic", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	return table.New(rule, set), nil
}

// packs returns nil if rule's state fits the one word New's table swaps by
// compare-and-swap (table.Packs, which policy's default factory asks too),
// and otherwise the error New returns, naming the constructors that take
// the rule.
func packs(rule admit.Rule) error {
	switch {
	case rule.Algorithm == admit.SlidingLog:
		return fmt.Errorf("%w: atomic.New has no sliding log: its ring of %d timestamps per key is more than one compare-and-swap can update; use sharded.New for many keys (or locked.NewLimiter for one) for %v",
			admit.ErrUnsupported, rule.Limit, rule)
	case !table.Packs(rule):
		return fmt.Errorf("%w: atomic.New: the state of %v does not pack into the one word a compare-and-swap updates (a sliding counter packs for Limit < 2^16 and windows long enough for the clock's range); use sharded.New for many keys (or NewLimiter for one) for it",
			admit.ErrUnsupported, rule)
	}
	return nil
}

// NewLimiter returns a lock-free limiter enforcing rule for a single key, in the
// packed form where the rule allows it: the limiter to pick for one key. It supports the token bucket, the fixed
// window and the sliding counter; for the sliding log it returns an error
// wrapping [admit.ErrUnsupported].
func NewLimiter(rule admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		l := &TokenBucket{clock: clockref.New(set.Clock), rule: rule}
		l.k.init(kernel.NewTokenBucket(rule))
		return l, nil
	case admit.FixedWindow:
		return &FixedWindow{codec: newFWCodec(rule), clock: clockref.New(set.Clock), rule: rule}, nil
	default:
		if c, ok := newSCCodec(rule); ok {
			return &slidingCounter{codec: c, clock: clockref.New(set.Clock), rule: rule}, nil
		}
		return &slidingCounterSnapshot{k: kernel.NewSlidingCounter(rule), clock: clockref.New(set.Clock), rule: rule}, nil
	}
}

// settings validates rule and applies opts for a single-key constructor,
// which has no store: the keyed-store options are an error.
func settings(rule admit.Rule, opts []admit.Option) (plumb.Settings, error) {
	if err := rule.Validate(); err != nil {
		return plumb.Settings{}, err // already "admit: invalid …: …"
	}
	if rule.Algorithm == admit.SlidingLog {
		return plumb.Settings{}, fmt.Errorf("%w: atomic has no sliding log: its ring of %d timestamps per key is more than one compare-and-swap can update; use locked.NewLimiter (or sharded.New) for %v",
			admit.ErrUnsupported, rule.Limit, rule)
	}
	set, err := plumb.ResolveLimiter("atomic", opts)
	if err != nil {
		return plumb.Settings{}, err // already "admit: invalid …: …"
	}
	if names := set.StoreOptions(); names != "" {
		return plumb.Settings{}, fmt.Errorf("%w: atomic: %s shape a keyed store; a single-key limiter has none, use New", admit.ErrUnsupported, names)
	}
	return set, nil
}
