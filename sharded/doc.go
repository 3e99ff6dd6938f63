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
// A key's state is kept by value in its shard's map: 8 bytes for a token
// bucket whose Window/Limit is whole nanoseconds (16 otherwise), 16 for a
// fixed window, 24 for a sliding counter, a ring of Limit timestamps for a
// sliding log, plus the store's copy of the key; [admit.WithHashedKeys]
// keeps a 64-bit seeded hash instead of the key. A call on an existing key
// allocates nothing. A key is stored only once it has admitted something.
// docs/keyed-stores.md has the measured bytes per key.
//
// # Concurrency
//
// Keys are spread over 2^k shards ([admit.WithShards], default
// [admit.DefaultShards]) by a hash seeded per store, so clients cannot aim
// their keys at one shard. Each call does its whole work under its shard's
// lock: keys in different shards never contend, and no lock is shared by all
// keys. A limiter is safe for concurrent use, and starts no goroutine.
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
package sharded
