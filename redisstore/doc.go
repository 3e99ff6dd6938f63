// Package redisstore keeps admit's limiters in Redis, so that every process
// using the same server shares one budget per key.
//
// Each decision is one round trip: one Lua script per rule or composite
// reads the key's state, decides exactly as the local kernels do, and
// writes the new state with a time to live equal to its time until fresh:
// Redis memory is bounded by the keys active within their window, and an
// expiry never forgets anything that could change a decision. Time is the
// server's TIME, read inside the script, unless [WithClock] passes one;
// keys are prefix{key}, a Redis Cluster hash tag. The scripts need Redis 5
// or newer.
//
// [NewLimits] enforces several rules on each key (an admit.Limits, such as
// 10 per second and 1,000 per hour), all or nothing, in one script on one
// Redis key: still one round trip, and one slot of a Redis Cluster.
// [Limiter.AllowNWhich] names the rule that bound a decision. A key written
// under other rules (a rule changed, an old process and a new one sharing
// the keys while it is deployed) is an error, unless [WithCarry] makes the
// script convert it, once, to the limiter's rules.
//
// [Limiter.AllowN] tells the truth about the network: it returns an error
// when Redis does not answer. [Keyed] adapts it to admit.KeyedLimiter with an
// explicit [Policy]: fail closed, fail open or fall back to a local limiter,
// with a per-call timeout and a circuit breaker, so that while Redis is down
// calls are decided at once and only one call per Policy.Backoff waits on it.
// [Limiter.Reset] forgets a key's state in one round trip, and returns an
// error when Redis does not answer; Keyed has no Reset, which could only fail
// silently.
//
// [NewService] runs a whole policy.Service on Redis, from a go-redis
// client and a policy.Book: one Keyed limiter per (limits, API), each API
// under a key prefix of its own, so that two APIs of equal rules never
// share a budget, while every process with the same book and server shares
// each (user, API) budget. A Reload, or a process started with a changed
// book, converts each pair's state on its first decision under the new
// limits, as [WithCarry] does.
//
// [WithObserver] counts a limiter's decisions, under Source "redis", Name
// the key prefix and its Limits, never a key: admissions and denials,
// errors as errored or timed out, and, for a [Keyed] limiter, each decision
// its Policy takes instead of Redis as fell back. It adds no allocation and
// no lookup to a decision.
//
// Redis replicates asynchronously: a failover to a replica loses the writes
// the old primary acknowledged but had not yet passed on, and every
// admission lost that way is admitted again, above the rule.
// [WithWaitReplicas] acknowledges an admission only once that many replicas
// hold it, and reports one they did not acknowledge in time as an error
// wrapping [ErrNotReplicated]. On a server out of memory under
// maxmemory-policy noeviction, an admission fails with Redis's OOM error
// having written nothing; a denial is still answered.
//
// docs/redis.md has the whole story: the scripts and their arithmetic, expiry,
// composites, changing a rule, the failure policy and the circuit breaker,
// failover with measured figures, the Service on Redis, observing, and the
// costs.
package redisstore
