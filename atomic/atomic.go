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
// lock-free: the open-addressing table of package sharded's one-word
// states, one slot per key, each decision published by one compare-and-swap
// on the slot's word, with no allocation per call. It supports every token
// bucket and fixed window, and the sliding counters whose state packs in
// one word; for the sliding log and the wider sliding counters it returns
// an error wrapping [admit.ErrUnsupported] that names sharded.New, which
// holds every rule.
//
// It evicts a key only when its state is equivalent to a fresh key's, so
// eviction changes no decision, and honours [admit.WithShards],
// [admit.WithMaxKeys], [admit.WithHashedKeys] and [admit.WithClock]. Its
// result, an [admit.Store], has every control of the store.
// docs/keyed-stores.md has the eviction protocol.
func New(rule admit.Rule, opts ...admit.Option) (admit.Store, error) {
	if err := rule.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if !table.Packs(rule) {
		return nil, fmt.Errorf("%w: atomic.New(%v): a key's state of this rule is more than one compare-and-swap on a table's slot can hold; use sharded.New",
			admit.ErrUnsupported, rule)
	}
	set, err := plumb.ResolveLimiter("atomic", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	return table.New(rule, set), nil
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
		return &TokenBucket{k: *newTBKernel(kernel.NewTokenBucket(rule), 1), clock: clockref.New(set.Clock), rule: rule}, nil
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
	set, err := keyedSettings(rule, opts)
	if err != nil {
		return plumb.Settings{}, err
	}
	if names := set.StoreOptions(); names != "" {
		return plumb.Settings{}, fmt.Errorf("%w: atomic: %s shape a keyed store; a single-key limiter has none, use New", admit.ErrUnsupported, names)
	}
	return set, nil
}

// keyedSettings validates rule and applies opts for New.
func keyedSettings(rule admit.Rule, opts []admit.Option) (plumb.Settings, error) {
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
	if set.HashedKeys {
		return plumb.Settings{}, fmt.Errorf("%w: atomic.New: WithHashedKeys; an atomic store keeps full keys, use sharded.New to store hashes", admit.ErrUnsupported)
	}
	return set, nil
}
