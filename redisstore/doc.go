// Package redisstore keeps admit's limiters in Redis, so that every process
// using the same server shares one budget per key.
//
// Each decision is one round trip: one Lua script per rule or composite
// (put together from one function per algorithm; EVALSHA, reloaded with
// EVAL when the server answers NOSCRIPT) reads the key's state,
// decides exactly as the local kernels do, and writes the new state with a
// time to live equal to its time until fresh (rounded up to the millisecond,
// plus 100 ms): Redis memory is bounded by the keys active within their
// window, and an expiry never forgets anything that could change a
// decision. Time is the server's TIME, read inside the script, unless
// [WithClock] passes one; keys are prefix{key}, a Redis Cluster hash tag.
//
// [NewLimits] enforces several rules on each key (an admit.Limits, such as
// 10 per second and 1,000 per hour), all or nothing, in one script that
// decides every rule on one Redis key, a hash: still one round trip, and
// one slot of a Redis Cluster. [Limiter.AllowNWhich] names the rule that
// bound a decision.
//
// A key written under other rules (a rule changed, an old process and a
// new one sharing the keys while it is deployed) is an error, unless
// [WithCarry] makes the script convert it, once, to the limiter's rules, as
// a policy.Service Reload converts the local stores' keys.
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
// under a key prefix of its own (the base prefix, then the API name,
// escaped), so that two APIs of equal rules never share a budget, while
// every process with the same book and server shares each (user, API)
// budget. A Reload, or a process started with a changed book, converts
// each pair's state in Redis on its first decision under the new limits,
// as [WithCarry] does. See docs/redis.md, "The Service on Redis".
//
// [WithObserver] reports a limiter's decisions to an observe.Observer (a
// tally, exported to Prometheus or OpenTelemetry), under one set of labels
// per limiter: Source "redis", Name the key prefix, and its Limits; never a
// key. Redis's admissions and denials are counted, and its errors as errored
// or timed out; a [Keyed] limiter also counts each decision its Policy takes
// instead of Redis as fell back. Observing adds no allocation and no lookup
// to a decision.
//
// Redis replicates asynchronously: a failover to a replica (Sentinel's,
// or a Cluster's) loses the writes the old primary acknowledged but had not
// yet passed on, and every admission lost that way is admitted again, above
// the rule. [WithWaitReplicas] acknowledges an admission only once that
// many replicas hold it (Redis's WAIT, a second round trip that only
// admissions make), and reports
// one they did not acknowledge in time as an error wrapping
// [ErrNotReplicated]; docs/redis.md ("Failover") says what that does and
// does not guarantee, and gives a Sentinel failover's measured figures.
//
// On a server out of memory under maxmemory-policy noeviction, an admission
// fails with Redis's OOM error having written nothing: every script reads and
// decides before it writes, and writes first with a command Redis refuses
// then. A denial, which writes nothing, is still answered.
//
// The scripts need Redis 5 or newer (they write after reading TIME, which
// Redis 5 allows by replicating effects; they call no deprecated command,
// such as redis.replicate_commands). See docs/redis.md for the costs.
package redisstore
