// Package sharded is admit's keyed store for millions of keys: a keyed
// limiter whose keys are spread over hash shards, each a mutex and a Go map
// holding the keys' states inline, that evicts idle keys without changing any
// decision and can bound its memory under a flood of new keys.
//
//	lim, err := sharded.New(rule, admit.WithMaxKeys(1_000_000))
//	if err != nil { ... }
//	if d := lim.Allow(clientIP); !d.Allowed { ... }
//
// # What it stores
//
// A key's state lives in its shard's map by value: 8 bytes for a token bucket
// whose Window/Limit is a whole number of nanoseconds (16 otherwise), 16 for
// a fixed window, 24 for a sliding counter, and a ring of Limit timestamps
// for a sliding log. There is no pointer and no allocation per key beyond
// the map's own slot, the limiter's copy of the key and a sliding log's
// ring, and a call on an existing key allocates nothing. With [admit.WithHashedKeys] the store
// keeps a 64-bit seeded hash instead of the key (see that option for the
// chance of two keys sharing a budget). docs/keyed-stores.md has the
// measured bytes per key.
//
// A key is stored only once it has admitted something: a denied request, a
// probe (n == 0) or a request that can never pass leaves no state behind.
//
// # Concurrency
//
// A store has 2^k shards ([admit.WithShards], default [admit.DefaultShards]),
// chosen by a hash/maphash hash of the key seeded per store, so clients who
// choose their keys cannot aim them all at one shard. Each call reads the
// clock, then does its whole work (lookup, decision, insertion, the eviction
// it triggers) under its shard's lock, and nothing else: keys in different
// shards never contend, and no lock is shared by all keys. Shards are padded
// to 128 bytes so that neighbouring shards' locks do not share cache lines.
// A limiter is safe for concurrent use.
//
// # Eviction
//
// A key is evicted only when its state is equivalent to a fresh key's (a
// full bucket, an expired window: kernel.Fresh), so eviction changes no
// decision. Eviction is incremental: a call that stores a new key examines a
// few keys of the same shard (from a random place, once the shard holds 64
// keys) and evicts the idle ones, so a store under churn stays near the
// number of keys in use; no call ever scans the whole store, and no goroutine
// is started. [Store.Sweep] evicts every idle key at once, for owners who
// want memory back during quiet periods, and a shard's map is rebuilt when it
// shrinks to a quarter of its peak, because a Go map keeps its buckets after
// deletions.
//
// Eviction uses a reading 100ms older than the clock (the slack), and a
// shard remembers the newest reading it has evicted at (its floor). A request
// whose clock reading is staler than the floor (it read the clock, then
// waited more than the slack for the lock) and finds its key gone is judged
// at the floor instead: a moment its own call spanned. docs/keyed-stores.md
// proves that the store thus never returns a Decision that the same store
// without eviction could not have returned.
//
// # Full store
//
// With [admit.WithMaxKeys](n) the store holds at most n keys. When it is full,
// a request for a new key that would pass first evicts the idle keys among
// up to 32 keys: of its own shard, then of up to 8 other shards (a cursor
// moves on at each such request, so requests in turn visit every shard). If
// none is idle, the request is denied, with a RetryAfter that is the same in
// every store: when the denial examined every key (at most 8 shards and 32
// keys), the time until the soonest of them becomes evictable, else the
// rule's longest reset time (Window, twice that for the sliding counter);
// plus the slack. Keys already stored are served as usual; the store never
// admits more than the rule allows for any key. That RetryAfter is a hint:
// another new key may take the space first.
//
// # When to pick it
//
// Pick sharded for many keys (client addresses, API tokens, users) with
// churn: it keeps states by value (for token buckets, the least memory per
// key of any store; docs/keyed-stores.md has the numbers for all), bounds
// its memory and gives it back. Pick
// package locked for a small, stable set of keys or for the plainest code,
// and package atomic for a few very hot keys, where lock-free
// compare-and-swap beats any lock. All three give the same decisions for the
// same calls.
package sharded
