// Package sharded is the keyed store for every algorithm and every
// composite: one independent limit per key (users, client addresses, API
// tokens), the sliding log and composite limits ([NewLimits]) included, no
// allocation per call on a stored key, idle keys evicted without changing
// any decision, and memory bounded under a flood of new keys with
// [admit.WithMaxKeys]. For the token bucket, the fixed window and the
// sliding counters that pack, package atomic's New is lock-free and faster;
// for one key, pick atomic's NewLimiter (locked's for the sliding log).
//
//	lim, err := sharded.New(rule, admit.WithMaxKeys(1_000_000))
//	if err != nil { ... }
//	if d := lim.Allow(clientIP); !d.Allowed { ... }
//
// # Cost
//
// Each shard is a Go map from key to a pointer to the key's state (a ring
// of Limit timestamps for the sliding log; for composites, every rule's
// state of a key in one state of 32 bytes per rule), with a copy of each
// key, or a 64-bit seeded hash of it with [admit.WithHashedKeys]. A key is
// stored only once it has admitted something. docs/keyed-stores.md has the
// layout and the measured bytes per key.
//
// # Concurrency
//
// Keys are spread over 2^k shards ([admit.WithShards], default
// [admit.DefaultShards]) by a hash seeded per store, so clients cannot aim
// their keys at one shard. A call does its whole work under its shard's
// mutex (striped: keys in different shards never contend). A limiter is
// safe for concurrent use, and starts no goroutine.
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
// new keys a full store denied, since the store was built. The counts are
// written only where keys are inserted, evicted or refused, never by a call
// on a stored key; Stats takes each shard's mutex in turn, as Len does, and
// is meant for a metrics scrape. docs/keyed-stores.md ("Statistics") says
// what each field counts.
package sharded
