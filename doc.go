// Package admit is the vocabulary of the admit rate limiters: the [Decision] a
// limiter returns, the [Limiter] and [KeyedLimiter] interfaces, the [Rule] that
// configures them and the [Option]s every variant accepts. It has no
// dependencies beyond the standard library and admit's own clock package.
//
// A limiter answers one question, "may this request pass now?", with a
// Decision: whether it was admitted, how many more would be, and, when it was
// denied, how long to wait before the same request would pass (RetryAfter,
// exact: retrying at now+RetryAfter is admitted and, for every algorithm but
// the sliding counter, 1ns earlier is not).
//
// A [Rule] names an [Algorithm] ([TokenBucket], [FixedWindow], [SlidingLog],
// [SlidingCounter]), a Limit and a Window: "token-bucket,5,10s" reads "five
// per ten seconds, as a token bucket". Every algorithm starts a fresh key with
// its whole Limit, and is integer arithmetic on nanoseconds. AllowN is all or
// nothing; n == 0 is a free probe; n < 0 or n > Limit is denied with
// RetryAfter [Never]; a denied request consumes nothing. Limiters read a
// [clock.Clock] once per call ([clock.System] unless [WithClock] says
// otherwise), and a stale reading is never treated more kindly than the
// newest one. docs/algorithms.md compares the algorithms; docs/design.md
// states the exact semantics.
//
// [Wait], [WaitN], [WaitKey] and [WaitKeyN] block until a request is admitted
// or a context is done, and refuse at once, consuming nothing, a request that
// could not pass before the context's deadline. Token buckets pace waiters by
// reservation, one slot each; windows are polled at their exact RetryAfter.
//
// Import a variant to build a limiter. Each algorithm is written once; the
// variants differ only in how a key's state is guarded, and give the same
// Decisions for the same calls:
//
//   - One key (a client, an outgoing API, a job queue): atomic.NewLimiter
//     (import as admitatomic): one compare-and-swap on a packed word.
//   - Many keys with a token bucket, fixed window or sliding counter:
//     atomic.New, a lock-free table: one compare-and-swap per decision.
//   - Many keys with a sliding log, or several limits per key: sharded.New
//     and sharded.NewLimits, striped per-shard mutexes, every algorithm.
//   - A sliding log on one key, or the plainest code to read: package locked.
//
// Every keyed store's constructor returns a [Store] (or, for several limits, a
// [CompositeStore]): Reset, reservations, Len, Sweep and Stats are methods of
// what it returns. A store drops idle keys (a key whose state equals a fresh
// key's), so eviction never changes a decision, and [WithMaxKeys] bounds its
// memory; see docs/keyed-stores.md.
//
//	rule, err := admit.ParseRule("token-bucket,5,10s")
//	if err != nil { ... }
//	lim, err := admitatomic.New(rule) // one budget per user
//	if err != nil { ... }
//	if d := lim.Allow(userID); !d.Allowed {
//		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.RetryAfter.Seconds()))))
//		http.Error(w, "slow down", http.StatusTooManyRequests)
//	}
package admit
