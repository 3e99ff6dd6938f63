// Package sharded is the keyed store to pick for many keys (users, client
// addresses, API tokens): one independent limit per key, every algorithm, no
// allocation per call, the fewest bytes per key of admit's stores, idle keys
// evicted without changing any decision, and memory bounded under a flood of
// new keys with [admit.WithMaxKeys]. For one key, pick package atomic's
// NewLimiter; for the sliding log on one key, package locked.
//
//	lim, err := sharded.New(rule, admit.WithMaxKeys(1_000_000))
//	if err != nil { ... }
//	if d := lim.Allow(clientIP); !d.Allowed { ... }
//
// # Cost
//
// Every rule whose state packs into one 64-bit word (every token bucket and
// fixed window, and the sliding counters of Limit < 2^16 with long enough
// windows) lives in a lock-free open-addressing table: each key is one slot
// of 32 bytes holding its hash tag, its state word and, for keys of up to
// 15 bytes, the key itself, so a call on a stored key reads one cache line
// of the table. The table is kept between 70% and 87.5% full, so a key
// costs 37 to 46 bytes (longer keys add their own copy); with
// [admit.WithHashedKeys] a slot is 16 bytes and a key 18 to 23. The sliding
// log, and sliding counters whose state does not pack, keep each key's state
// behind a pointer in a Go map per shard (a ring of Limit timestamps for the
// log), with a copy of each key; so do composite limits ([NewLimits]), all
// the rules of a key in one state of 32 bytes per rule. A call on an
// existing key allocates nothing. A key is stored only once it has admitted something.
// docs/keyed-stores.md has the layout and the measured bytes per key.
//
// # Concurrency
//
// Keys are spread over 2^k shards ([admit.WithShards], default
// [admit.DefaultShards]) by a hash seeded per store, so clients cannot aim
// their keys at one shard. A call on a key the table holds takes no lock: it
// finds the key's slot and publishes its decision with one CompareAndSwap
// on the slot's state word. A shard's mutex is taken only to store a new
// key, to grow or shrink the shard's table, to evict, and for token-bucket
// reservations that must wait; keys in different shards never contend. The
// map-backed rules do each call's whole work under its shard's mutex. A
// limiter is safe for concurrent use, and starts no goroutine.
//
// # Eviction and the full store
//
// A key is evicted only when its state is equivalent to a fresh key's (a full
// bucket, an expired window), so eviction changes no decision; each new key
// examines a few others, and [admit.Store.Sweep] evicts every idle key at
// once. With [admit.WithMaxKeys](n) the store holds at most n keys; a request
// for a new key in a full store with nothing idle is denied (never admitted
// beyond its rule), with a RetryAfter that is the same in every store (see
// [admit.WithMaxKeys]); keys already stored are served as usual.
// docs/keyed-stores.md has the protocol and its proof.
//
// # Statistics
//
// [New] returns an [admit.Store] and [NewLimits] an [admit.CompositeStore],
// with every control of the store (Reset, ReserveN, Len, Sweep, Stats):
// Stats reports the keys stored (Len), the
// [admit.WithMaxKeys] bound, the keys evicted as idle and the requests for
// new keys a full store denied, since the store was built. The counts are written
// only where keys are inserted, evicted or refused, never by a call on a
// stored key; Stats takes each shard's mutex in turn, as Len
// does, and is meant for a metrics scrape. docs/keyed-stores.md
// ("Statistics") says what each field counts.
package sharded
