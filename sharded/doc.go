// Package sharded will hold admit's keyed store for millions of keys: keys
// spread over hash shards (a per-store seeded hash, since keys are chosen by
// clients), each shard a mutex and a map holding the states inline, with
// lossless eviction of idle keys and a bound on memory. It is not released yet
// and exports nothing; use package locked meanwhile.
package sharded
