// Package atomic is admit's lock-free variant, the fastest for one key and
// for many: [NewLimiter] keeps one key's state in one word (or an immutable
// snapshot) swapped by compare-and-swap, and [New] keeps many keys in an
// open-addressing table whose slots hold each key's state in one word,
// decided by one compare-and-swap with no lock and no allocation per call.
// The name collides with sync/atomic; import it under an alias:
//
//	import admitatomic "github.com/admit-go/admit/atomic"
//
//	lim, err := admitatomic.NewLimiter(rule) // one key: an admit.Limiter
//	users, err := admitatomic.New(rule)      // one budget per key
//
// # What it takes
//
// Every token bucket and fixed window, and every sliding counter for one
// key. [New] takes a sliding counter only when its state packs in one word
// (Limit < 2^16 and Window >= 2^(2b-1) ns, b the bit length of Limit: 1000
// per second packs, 60,000 per second does not). What no single
// compare-and-swap can hold is refused with an error wrapping
// [admit.ErrUnsupported] that names the constructor to use: the sliding log
// (sharded.New for many keys, locked.NewLimiter for one), a sliding counter
// that does not pack (sharded.New), and composite limits on many keys
// ([NewLimits] of two rules or more: sharded.NewLimits).
//
// [NewLimitsLimiter] enforces an [admit.Limits], several rules on one key,
// all or nothing: every rule's state in one cell published by one
// compare-and-swap (two packed rules: a 16-byte CAS on amd64, with no
// allocation; otherwise a snapshot, one allocation per admission). A
// composite of token buckets hands out reservations.
//
// The concrete types [TokenBucket], [TokenBucketSnapshot] and [FixedWindow]
// are the single-key forms, for callers who want the type itself.
//
// # Keyed stores
//
// [New] returns an [admit.Store]: every control of the store (Reset,
// ReserveN, Len, Sweep, Stats) without a type assertion. It honours every
// store option: [admit.WithShards], [admit.WithMaxKeys],
// [admit.WithHashedKeys] and [admit.WithClock]. A key
// is evicted only when its state is equivalent to a fresh key's, so
// eviction changes no decision; a new key in a full store is denied, never
// admitted beyond its rule. Stats' counts are written only where keys are
// inserted, evicted or refused, never by a call on a stored key.
// docs/keyed-stores.md has the table's layout, the eviction protocol and
// what each statistic counts; docs/algorithms.md has the packed forms.
//
// # Consistency
//
// Every decision is linearizable: it takes effect at the instant of its
// successful CAS (or, for a denial, of the load that saw the state it denied
// on), and equals the kernel's for the same sequence of calls, at every
// reading of the kernels' clock range. Each limiter reads its clock once per
// call; a goroutine that loses a CAS retries with the same reading, which the
// kernels treat conservatively (see package admit, "Time"). A token bucket
// whose state leaves its word's range, or that is held by a reservation, is
// decided under a mutex, with the same decisions.
//
// Under heavy contention on one key, CAS retries spin where a mutex would park:
// measure your own workload against package locked before assuming either wins.
package atomic
