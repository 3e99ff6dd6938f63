package sharded

import (
	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/plumb"
)

// NewLimits returns a keyed limiter enforcing limits independently for
// every key: a request is admitted only if every rule admits it, and then
// every rule is charged (see [admit.Limits]). For Limits of one rule it
// returns exactly what [New] returns for that rule, which is an
// [admit.CompositeStore] too. For two rules or more every rule's state of
// a key lives in one state (32 bytes per rule) behind the key's pointer in
// the shard's map, decided in place under the shard's mutex, all or
// nothing, with no allocation per call on a stored key; when every rule is
// a token bucket its ReserveN reserves ahead in every rule, so
// [admit.WaitKey] paces its waiters. Idle keys
// are evicted only when every rule's state is fresh, so eviction changes no
// decision. It supports every mix of the four algorithms and honours every
// option: [admit.WithShards], [admit.WithMaxKeys], [admit.WithHashedKeys]
// and [admit.WithClock]. The error wraps [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption].
func NewLimits(limits admit.Limits, opts ...admit.Option) (admit.CompositeStore, error) {
	if err := limits.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if limits.Len() == 1 {
		return New(limits.At(0), opts...)
	}
	set, err := plumb.ResolveLimiter("sharded", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	return mapstore.NewLimits(limits, set), nil
}
