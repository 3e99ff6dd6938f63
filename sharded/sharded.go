package sharded

import (
	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/plumb"
)

// New returns a keyed limiter enforcing rule independently for every key,
// with its keys in hash shards, each under its own mutex, and idle-key
// eviction; see the package documentation. It supports all four algorithms
// and honours every option: [admit.WithShards], [admit.WithMaxKeys],
// [admit.WithHashedKeys] and [admit.WithClock]. The error wraps
// [admit.ErrInvalidRule] or [admit.ErrInvalidOption]. Its result, an
// [admit.Store], has every control of the store.
func New(rule admit.Rule, opts ...admit.Option) (admit.Store, error) {
	if err := rule.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	set, err := plumb.ResolveLimiter("sharded", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	return mapstore.New(rule, set), nil
}
