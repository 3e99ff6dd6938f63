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
// capability.
type Store interface {
	KeyedLimiter

	// ReserveN is [Reserver.ReserveN] for key. A token bucket takes n
	// tokens now and reports when they are due. A store of another
	// algorithm reserves nothing ahead: it admits n now when AllowN would
	// (Delay 0, true), and otherwise takes nothing and reports the
	// Decision's RetryAfter as the Delay, with false; [WaitKeyN] then
	// sleeps that long and asks again, as it polls.
	ReserveN(key string, n int, maxWait time.Duration) (Reservation, bool)

	// CancelReservation is [Reserver.CancelReservation] for key: it gives
	// back nothing for a reservation made on another key, or on this key
	// before the store evicted it or Reset it. A reservation of a store
	// that reserves nothing ahead (not a token bucket) took nothing to
	// give back: cancelling it returns false.
	CancelReservation(key string, r Reservation) bool

	// Reset makes key's state a fresh key's, for example to lift a user's
	// limit by hand after a support call: after Reset returns, the key's
	// next decision sees a full budget at its own reading. A decision on
	// key concurrent with Reset is ordered before or after it (Reset is
	// linearizable), never lost or counted twice. A reservation made on
	// key before Reset can no longer be cancelled after it: its hold goes
	// with the state. Reset of a key the store does not hold does nothing.
	Reset(key string)

	// Rule returns the rule the store enforces for every key.
	Rule() Rule

	// Limits returns the store's rule as Limits of one rule, so that a
	// Store is also a [CompositeStore].
	Limits() Limits

	// AllowNWhich is AllowN, and also returns the index in Limits of the
	// rule that bound the decision: always 0, the store's one rule, a
	// denial for want of room in a full store ([WithMaxKeys]) included.
	AllowNWhich(key string, n int) (Decision, int)

	// Len returns the number of keys stored now. Under concurrent calls it
	// may not include all of the latest insertions and evictions.
	Len() int

	// Sweep evicts every key that is idle now (its state equivalent to a
	// fresh key's at the clock's reading minus a slack of 100ms, so that
	// eviction never changes a decision) and returns the number of keys it
	// evicted. It costs time in proportion to the keys stored. Calls need
	// not sweep (each new key examines a few keys for eviction): it is for
	// owners who want memory back while no new keys arrive, for example
	// from a time.Ticker in a goroutine of their own.
	Sweep() int

	// Stats reports the keys stored, the bound of [WithMaxKeys], and the
	// keys evicted and the requests for new keys a full store denied since
	// it was built. It costs time in proportion to the store's shards (it
	// reads Len), and is meant for a metrics scrape, not the decision path.
	Stats() StoreStats
}
