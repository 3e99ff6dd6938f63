// Package stress is admit's stress harness: it hunts over-admission in every
// variant, algorithm and keyed store, and proves it can catch what it hunts.
// It has no API; it is its tests.
//
//	go test -race ./stress                      # full mode, GOMAXPROCS as is
//	go test -race -short ./stress               # short mode (make test)
//	go test -race -tags admitstress -cpu 1,2,4,8 -timeout 20m ./stress  # make stress
//
// The tag admitstress compiles internal/hook's yield points into the
// variants, so that race windows (between a load and its CAS, between a
// lookup and its use) open on a 2-core machine within seconds; without it
// the tests still run, with less widening. Flags: -stress.seed=N replays a
// run's operation sequences (the seed is printed at start-up and in every
// failure), -stress.yield=N sets the per-mille chance of a yield at a hook
// site, -stress.selftrials=N the trials a self-test gets.
//
// One table (variants_test.go) lists the variants: locked, atomic and
// sharded, each with its keyed New and, where it has one, its single-key
// NewLimiter. Every test runs over every row, every algorithm and both
// shapes, skipping a combination only when the constructor says
// admit.ErrUnsupported. The workloads: a hot key; many keys colliding in
// one shard; eviction at the exact moment keys become evictable, with a
// concurrent sweeper and a WithMaxKeys bound; churn that grows and shrinks
// the store under hot keys; composite limits (TestComposite); reservations
// and their misuse (TestReservations); a policy.Service reloaded
// concurrently (TestFlipFlopReload, TestMoveBack); Reset in mid-race
// (TestResetMidRace); stale or moving clock readings. TestLostUpdate,
// TestLostUpdateHeld and TestLostUpdateRetire find a lost update without
// the tag, by exact conservation on pinned goroutines; tools/mutants
// counts how often they catch a Store planted in place of each
// compare-and-swap.
//
// The oracles are exact: every recorded call is replayed against the
// sequential kernel (internal/kernel) per key and phase, on a clock frozen
// during each burst; the per-key histories must be linearizable
// (github.com/anishathalye/porcupine, with the kernel as the model); and
// every history must keep the interval bounds of its algorithm. goleak
// fails the package if a goroutine outlives the tests.
//
// TestSelfTest and the other self-tests run the same harness on
// deliberately broken limiters kept in the test code, and, with the tag
// admitstress, on bugs planted in the production code (a rebuild that
// copies without freezing, a Reset without the shard's mutex, a carry
// clamped to the new Limit, the old Keep), and fail unless the harness
// catches each.
//
// A failing subtest prints the workload, the seed, the command that
// replays it, and one block per failed check ("decisions", "replay",
// "interval bounds", "linearizability"), each violation naming the key, the
// phase, the clock reading and the Decision. docs/stress.md has every
// workload, the oracles' formulas, the self-tests and how to reproduce a
// failing seed.
package stress
