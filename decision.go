package admit

import (
	"math"
	"time"
)

// Never is the RetryAfter of a request that can never be admitted, whatever the
// caller waits: AllowN with n greater than the rule's Limit, or n negative.
const Never time.Duration = math.MaxInt64

// Decision is the answer to one admission request.
//
// A Decision is a plain value: returning it allocates nothing, and it carries
// everything an HTTP server needs for the RateLimit and Retry-After headers.
type Decision struct {
	// Allowed reports whether the request was admitted. An admitted request has
	// consumed its share of the limit; a denied one consumed nothing.
	Allowed bool

	// Limit is the rule's Limit: the burst a fresh key may spend at once.
	Limit int

	// Remaining is how many more single requests would be admitted now, after
	// this one. It is always within [0, Limit], and 0 when the request was denied.
	Remaining int

	// RetryAfter is 0 when the request was admitted. When it was denied, it is
	// the wait after which this same request would be admitted if nothing else
	// arrives for the key: retrying at now+RetryAfter is admitted, and for every
	// algorithm but the sliding counter retrying 1ns earlier is not. It is
	// [Never] when the request can never be admitted (n > Limit or n < 0).
	RetryAfter time.Duration

	// ResetAfter is the wait until the key is back to its fresh state (a full
	// bucket, an empty window) if nothing else arrives; 0 when it already is.
	ResetAfter time.Duration
}

// Limiter guards a single key: one budget shared by every caller.
//
// Implementations are safe for concurrent use, and an admission never takes a
// lock shared with any other limiter.
type Limiter interface {
	// Allow is AllowN(1).
	Allow() Decision

	// AllowN asks to admit n requests at once, all or nothing. n == 0 is a free
	// probe: it is allowed, consumes nothing and reports the current Remaining.
	// n > Limit or n < 0 is denied with RetryAfter [Never] and consumes nothing.
	AllowN(n int) Decision
}

// KeyedLimiter keeps one independent budget per key (a user id, an API key, a
// client address): requests for one key never consume another key's budget.
//
// Implementations are safe for concurrent use and never take a lock shared by
// all keys. Keys are compared as strings; the limiter keeps its own copy of a
// key, so callers may reuse the memory behind a key after the call returns.
type KeyedLimiter interface {
	// Allow is AllowN(key, 1).
	Allow(key string) Decision

	// AllowN asks to admit n requests for key at once, with the semantics of
	// [Limiter.AllowN].
	AllowN(key string, n int) Decision
}

// Store is what New returns in packages atomic, locked and sharded: a
// keyed limiter of one rule with every control of its store. Every keyed
// store of the three packages does all of it, so a caller never asserts a
// capability. A Store is a [CompositeStore] whose Limits is its one rule.
type Store interface {
	CompositeStore

	// Rule returns the rule the store enforces for every key.
	Rule() Rule
}
