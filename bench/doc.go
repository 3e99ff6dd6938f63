// Package bench is admit's benchmark suite: every variant of admit (locked,
// atomic in both token-bucket forms, and every algorithm each supports) against
// the Go rate limiters users already know, on the same workloads, in one run,
// beside the physical floors (a clock read, one CAS, one mutex, a sync.Map
// load) that bound what any limiter can do.
//
// It is its own Go module, so that the peer libraries and benchstat never
// enter admit's go.mod. From the repository root:
//
//	make bench-quick   # under 2 minutes: results/quick.txt, docs/benchmarks.md
//	make bench         # the full run, under 20 minutes on 2 cores
//	make bench-instr   # instructions per Allow under valgrind's callgrind
//	make bench-cache   # cache misses per keyed decision, callgrind's simulation
//
// or by hand, from this directory:
//
//	go test -run '^$' -bench . -benchtime 200ms -count 6 . | tee new.txt
//	go tool benchstat -col /impl -filter '.name:Serial' new.txt
//
// # The tables
//
// The limiters under test are rows of two tables, [Singles] (one key) and
// [Keyeds] (one budget per key). A row names its implementation (the impl=
// label benchstat pivots on), the algorithm it runs, and how to build it in
// each configuration the workloads need ([Env]): every call admitted, every
// call denied, with or without idle-key eviction. Adding a limiter is adding
// one row; every workload then measures it.
//
// Every row is driven through the same small interface ([Limiter], [Keyed]),
// so each measured call pays exactly one dynamic call on top of the limiter's
// own work, the floor rows included.
//
// Composite limits (admit.Limits, several rules on one key) have a workload
// of their own, BenchmarkComposite, over a small table of admit's variants
// in composite_test.go: a token bucket under a fixed window beside the token
// bucket alone, on a frozen clock, so that -col /limits reads what the
// second rule costs.
//
// # Names
//
// Sub-benchmarks are named key=value (path=allow/algo=token-bucket/impl=atomic-packed)
// so that benchstat can pivot on any key: -col /impl compares implementations,
// -col /gomaxprocs shows scaling (from -cpu).
package bench
