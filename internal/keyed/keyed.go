// Package keyed is what every keyed container shares: eviction of idle keys
// and its floor, the admit.WithMaxKeys full-store rule, the Stats counters,
// the held reservations of lock-free token buckets, the Reload moves
// protocol, and the cache-line pad. The containers (internal/table, the
// lock-free table behind atomic.New; internal/mapstore, the map store of
// sharded and locked) implement their layout as a Container (shards and
// their locks, locating a key, and per shard: its floor, counting and
// naming its keys, evicting the fresh ones a scan finds, finding,
// retiring, exporting and importing a key's state), and keep their own
// decision on a stored key and insertion path of a missing one, which call
// this package's steps (Hooks.Keeps, Add, Bound).
//
//   - container.go: Container, and the sequences run over it once for
//     every container: Len, Stats, Sweep, Reset, Keys, Take, Put, and Add
//     (a new key's room: the insertion's sweep, the bound, MakeRoom).
//   - evict.go: eviction's tuning, the reading a sweep judges idleness at,
//     the padded Counter behind WithMaxKeys and admit.StoreStats, the
//     full-store policy (MakeRoom), and the Map that gives its memory back.
//   - held.go: the held protocol by which a cell swapped by CompareAndSwap
//     keeps a reservation's hold, or a state past its word's horizon.
//   - migrate.go: the protocol by which a policy.Service Reload moves keys
//     from one store to another (Take, Put, Keys and the hooks).
//
// docs/keyed-stores.md documents the values and the arguments.
package keyed

// CacheLinePad is the size that words written by different goroutines (a
// shard's lock, a stripe, a ring, a shared counter) are padded to, so that
// writing one does not slow down the reads of its neighbours. 128, not 64:
// Intel's adjacent-line prefetcher fetches 64-byte lines in pairs, so two
// words that share a 128-byte pair still slow each other down; 128 is also
// the line size of Apple's arm64 cores. Each padded type pins its size with
// a test.
const CacheLinePad = 128
