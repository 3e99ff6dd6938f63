// Package admit is the vocabulary of the admit rate limiters: the [Decision] a
// limiter returns, the [Limiter] and [KeyedLimiter] interfaces, the [Rule] that
// configures them and the [Option]s every variant accepts. It has no
// dependencies beyond the standard library and admit's own clock package.
//
// A limiter answers one question, "may this request pass now?", and answers it
// with a Decision: whether it was admitted, how many more would be, and, when
// it was denied, how long to wait before the same request would pass
// (RetryAfter, exact: retrying at now+RetryAfter is admitted and, for every
// algorithm but the sliding counter, 1ns earlier is not).
//
// # Algorithms
//
// A [Rule] names an algorithm, a Limit and a Window. "token-bucket,5,10s" reads
// "five per ten seconds, as a token bucket". All four algorithms start a fresh
// key with its whole Limit available, so a fresh key's first request for n <=
// Limit always passes; all four are exact integer arithmetic on nanoseconds,
// with no floating point to drift:
//
//   - [TokenBucket]: a bucket of Limit tokens refilled continuously, one token
//     every Window/Limit. Allows a burst of Limit, then a steady rate; over any
//     span of length d at most Limit + floor(d×Limit/Window) pass. Two integers
//     per key. The right default for most APIs.
//   - [FixedWindow]: at most Limit per window [kW, (k+1)W) of the clock. One
//     counter per key, the cheapest, but up to 2×Limit can pass across a window
//     boundary (Limit at its end, Limit at the next one's start).
//   - [SlidingLog]: at most Limit admissions in any span of length Window,
//     exactly: each admission is remembered for one Window. Limit timestamps per
//     key (8 bytes each), so for small limits where exactness matters.
//   - [SlidingCounter]: the previous and current fixed windows' counts, the
//     previous one weighted by how much of it the sliding span still covers.
//     Three integers per key; removes most of the boundary burst, but is an
//     estimate: each aligned window admits at most Limit, any span of length
//     Window at most 2×Limit.
//
// [Limiter.AllowN] and [KeyedLimiter.AllowN] are all or nothing. n == 0 is a
// free probe (allowed, consumes nothing, reports Remaining); n < 0 or n > Limit
// can never pass and is denied with RetryAfter [Never]. A denied request
// consumes nothing and is never recorded, so a client hammering a closed limit
// does not push its own reopening further away.
//
// # Time
//
// Limiters read time from a [clock.Clock], once per call: [clock.System] (the
// runtime's monotonic clock, immune to wall-clock steps) unless [WithClock]
// passes another, such as a [clock.Fake] in tests. A reading older than one a
// limiter has already seen (a clock set backwards, or a concurrent caller whose
// reading went stale before it got the state) is never treated more kindly
// than the newest reading: it never refills a bucket, never reopens a window
// and never makes a value negative. The windows count it against the newest
// window seen. The token bucket judges it at its own time, when the bucket owes
// at least as much as it does now, so such a request may be denied where a
// fresh reading would pass, and is never admitted where a fresh one would be
// denied; what it takes is charged at its own time too, so those tokens refill
// from then (over any span of readings, the bound of the rule holds). A
// reservation's cancellation is judged at the newest reading its key has seen
// since the reservation ([Reserver.CancelReservation]).
//
// # Waiting
//
// [Wait] and [WaitN] block until a limiter admits a request or a context is
// done, and [WaitKey] and [WaitKeyN] do the same for one key of a keyed
// limiter. They refuse at once, consuming nothing, when the context is done,
// when the request can never pass, or when it could not pass before the
// context's deadline. Token buckets, single-key ([Reserver]) or keyed
// ([KeyedReserver], in every store), pace waiters by reservation: each waiter
// is handed its own slot, so waiters proceed at the rule's rate instead of
// waking together; a waiter cancelled before its slot gives it back if no
// later waiter relies on it. The windows are polled at their exact
// RetryAfter.
//
// # Variants
//
// Each algorithm is written once, as pure arithmetic; the variant packages only
// decide how a key's state is guarded when many goroutines call at once. All
// are safe for concurrent use, none takes a lock shared by all keys, and all
// give the same Decisions for the same sequence of calls, but for one: with
// [WithMaxKeys], whether a new key in a full store finds an idle key to make
// room depends on the shards the keys landed in, which each store's random
// hash seed decides, so in a store of more than 8 shards or 32 keys such a
// request may be admitted by one store and denied by another (never beyond
// its rule; docs/keyed-stores.md, "The full-store policy"). Which to import:
//
//   - One key (a client, an outgoing API, a job queue): atomic.NewLimiter
//     (import as admitatomic). Lock-free, one compare-and-swap on a packed
//     word; no allocation for any token bucket or fixed window.
//   - Many keys (users, client addresses, API keys) with a token bucket, a
//     fixed window or a sliding counter: atomic.New. Lock-free, one
//     compare-and-swap per decision in the slots of a table, no allocation
//     per call, the fewest bytes per key, optional hashed keys.
//   - Many keys with a sliding log, or several limits per key: sharded.New
//     and sharded.NewLimits, every algorithm and composite under striped
//     per-shard mutexes.
//   - A sliding log on one key: locked.NewLimiter (atomic has no sliding log).
//     Package locked is also the plainest code, the kernel under a mutex.
//
// Every keyed store is an [Store]: it drops idle keys (a key whose state equals
// a fresh key's) as it goes, so eviction never changes a decision, and
// [WithMaxKeys] bounds its memory; see docs/keyed-stores.md.
//
// Import the variant, not only this package, to build a limiter:
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
