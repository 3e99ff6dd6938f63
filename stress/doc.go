// Package stress is admit's stress harness: it hunts over-admission in every
// variant, algorithm and keyed store, and proves it can catch what it hunts.
// It has no API; it is its tests.
//
// # Running it
//
//	go test -race ./stress                      # full mode, GOMAXPROCS as is
//	go test -race -short ./stress               # short mode (make test)
//	go test -race -tags admitstress -cpu 1,2,4,8 -timeout 20m ./stress  # make stress
//
// The tag admitstress compiles internal/hook's yield points into the
// variants, so that race windows (between a load and its CAS, between a
// lookup and its use) open on a 2-core machine within seconds; without it the
// tests still run, with less widening. -cpu sweeps GOMAXPROCS from
// oversubscribed (1) to parallel (8); every burst has several goroutines per
// processor. Flags: -stress.seed=N replays a run's operation sequences (the
// seed is printed at start-up and in every failure), -stress.yield=N sets
// the per-mille chance of a yield at a hook site, -stress.selftrials=N the
// trials a self-test gets.
//
// # What it checks
//
// One table (variants_test.go) lists the variants: locked, atomic and
// sharded, each with its keyed New and, where it has one, its single-key
// NewLimiter. Every test runs over every row, every algorithm (in a packed
// and an unpacked form where the variants have both; the churn workloads
// over the rules atomic keeps in its lock-free table) and both shapes, and
// skips a combination only when the constructor says admit.ErrUnsupported.
// The workloads are a hot key; many keys colliding in one shard, with new
// keys created during the race; eviction with the clock moved to the exact
// moment keys become evictable, a concurrent sweeper and a WithMaxKeys bound
// below the number of keys; the churn workloads (churn_test.go), with
// WithShards(1), full and hashed keys (WithHashedKeys): hot keys hammered
// while hundreds of new keys per burst are created among their requests in
// the same shard, so that the store grows under them (atomic's table is
// rebuilt a dozen times as it grows from empty, each rebuild moving the hot
// keys while calls on them are between their load and their CAS), and the
// same with a sweeper and the clock moved to where the previous burst's
// keys are idle, so that the store shrinks and grows again in every burst,
// with and without a WithMaxKeys flood; a policy.Service reloaded
// concurrently; and stale or moving clock readings. Requests have mixed
// weights (AllowN 1 to Limit, probes, and requests that can never pass;
// every other request for 1 is Allow, which some variants write out apart),
// and each burst starts all its goroutines together from a closed channel.
//
// The oracles are exact. In the phased workloads the fake clock is frozen
// during each burst and moved only between bursts, and every recorded call
// is checked against the sequential kernel (internal/kernel): replayed per
// key and phase, the admitted requests must all fit (under a frozen clock
// the admitted weight never exceeds the budget, and equals it once demand
// exceeds it), the denied ones must not, and the last admission's Remaining
// must be the kernel's; the per-key histories must be linearizable
// (github.com/anishathalye/porcupine, with the kernel as the model and a
// timeout that counts as a failure); and every history, including those with
// stale readings, must keep the interval bounds of the algorithms (at most
// Limit + floor(d·Limit/Window) in any span d for the token bucket, and so
// on). goleak fails the package if a goroutine outlives the tests.
//
// TestComposite runs composite limits (admit.Limits: two or three rules on
// one key, all or nothing) in every variant that builds them, single-key
// and keyed, with AllowN(0..3) on a frozen clock moved between bursts and
// on a clock ticking during them with stale readings (composite_test.go).
// The key's spec is composed from its rules' own specs, so the same oracles
// apply: replay and porcupine against the composite, and each rule's
// interval bound, on its own, over every admission of the key.
//
// TestReservations drives the token buckets through ReserveN and
// CancelReservation, with a goroutine that misuses reservations (cancelling
// them twice, with copies, on other keys, at stale readings): every
// reservation that was not cancelled counts as admitted at the reading its
// waiter proceeds at, the interval bound must hold over those and the
// admissions, and every successful cancellation must be the first of its
// reservation, on its key, before any call saw its tokens due.
//
// TestLostUpdate finds a lost update without the tag: in atomic's
// single-key limiters and, for each rule, the keyed store that holds it
// (atomic's table, or sharded's map store), for every form of state and
// every path (Allow, AllowN,
// ReserveN, reservations mixed with Allow), it hammers one fresh state per
// round on a frozen clock from goroutines (GOMAXPROCS at least 2) that
// start from a spin barrier, each on a CPU of its own (on Linux), and keep
// within a few calls of each other, and requires exact conservation: what
// they were admitted, plus what one goroutine is admitted after them,
// equals what one goroutine alone gets. Its rounds go on, within a bound,
// until enough calls overlapped another; its first-call rounds walk many
// small fresh states in step, so that the goroutines' first calls meet.
// TestLostUpdateHeld races a reservation that must wait, and so holds the
// bucket, with Allow calls taking its last tokens, in many small rounds,
// and requires that a final reservation waits exactly as long as after as
// many tokens taken by one goroutine. TestLostUpdateRetire races the
// compare-and-swaps that retire a state (an eviction, a Reload's Take, a
// table rebuild's freeze, all in atomic's table) with admissions on it.
// tools/mutants plants a Store in place of each compare-and-swap of atomic
// and internal/table and counts how often the package catches it
// (docs/stress.md).
//
// TestSelfTest runs the same harness on deliberately broken limiters kept in
// the test code (a token bucket publishing with Store instead of CAS, a fixed
// window that a stale reading resets backwards, a store whose sweeper deletes
// without checking again, a composite that keeps each rule in its own atomic
// word and charges the rules one CAS at a time) and, in builds with -tags
// admitstress, on atomic.New with a bug planted in its table
// (table.PlantUnfrozenRebuild: rebuilds that copy each state word without
// the CAS that freezes it), under the churn workloads, and fails unless the
// harness catches each;
// TestReservationSelfTest does the same for a reserver whose cancellation
// ignores which reservation it is given.
//
// TestFlipFlopReload reloads a policy.Service between limits of 10 and 5
// per hour, again and again, while checkers Check a few pairs on a frozen
// clock (flipflop_test.go): with CarryConsumed and CarryProportional no
// pair may pass more than 10 (with CarryConsumed, exactly 10 once spent).
// TestSelfTestFlipFlopClamp plants the old carry, clamped to the new Limit
// (kernel.PlantClampedCarry, admitstress builds only), and requires the
// bound to catch it.
//
// TestResetMidRace resets a hot key each time its budget is spent, on a
// frozen clock, while new keys grow its shard (reset_test.go): exactly
// (resets + 1) × Limit admissions must pass. TestSelfTestLostReset plants a
// Reset without the shard's mutex (table.PlantLockFreeReset, admitstress
// builds only), which a rebuild's freeze defeats, and requires the count to
// catch it.
//
// TestMoveBack runs a policy.Service whose two books swap two limits (10
// and 20 per hour, on the default and on one API), so that every Reload
// moves each pair to the other limiter and the next moves it back,
// carrying its state (CarryProportional), while goroutines Check four
// pairs on a frozen clock (moveback_test.go), over every keyed variant's
// stores, each algorithm and a composite. Its stores are wrapped so that a
// Check entering a limiter sometimes waits for the Reload in progress to
// finish, and one in the hooks' Keep for the next Reload to publish: no
// pair may get a fraction of its budget above 1 (2 points per admission
// under 10, 1 under 20, at most 20), and no Reload's Put may find its key
// held. TestSelfTestMoveBack plants the old Keep (the current book alone
// decides) and requires the workload to catch it.
//
// # Reading a failure
//
// A failing subtest prints the workload, the seed, the command that replays
// it, and one block per failed check, each naming the check:
//
//   - "decisions": a malformed Decision (Remaining out of range, a denial
//     with RetryAfter 0, ...);
//   - "replay": "over-admission" (admitted beyond the kernel's budget at
//     that reading), "lost update" (the last admission's Remaining is higher
//     than the kernel's after all admissions: an update was lost),
//     "budget lost" (denied what the kernel admits), "conservation";
//   - "interval bounds": too many admissions in some span of readings;
//   - "linearizability": porcupine found no order of one phase of the key's
//     calls that the kernel would have produced (Illegal) or ran out of time
//     (Unknown); the message names the first failing phase and the HTML
//     visualization it wrote to a temporary directory: open it in a browser
//     to see the longest linearizable prefix and the calls it cannot place.
//
// Each violation names the key (or policy pair and Limit), the phase, the
// clock reading and the Decision. docs/stress.md has the oracles' formulas,
// the budget and how to reproduce a failing seed.
package stress
