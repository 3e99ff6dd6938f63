// Package atomic is admit's lock-free variant, and the one to pick for one
// key: [NewLimiter] keeps the key's state in one word swapped by
// compare-and-swap, with no lock and, for every token bucket and fixed
// window, no allocation. For many keys pick package sharded; for the sliding
// log, package locked ([NewLimiter] and [New] refuse it and say so).
//
// The name collides with sync/atomic; import it under an alias:
//
//	import admitatomic "github.com/admit-go/admit/atomic"
//
//	lim, err := admitatomic.NewLimiter(rule) // an admit.Limiter
//
// # Forms
//
// A state that fits one 64-bit word is packed into an atomic.Uint64 and updated
// with a CAS on that word: no allocation on any path. A state that does not fit
// (a sliding counter's, for some rules) is an immutable snapshot behind an
// atomic.Pointer, replaced by a CAS on the pointer: one 24-byte allocation
// per admission, none on a denial.
//
//   - Token bucket, packed ([TokenBucket]): the state is GCRA's theoretical
//     arrival time, one int64 in units of 1/L' ns, where L' is Limit divided
//     by gcd(Limit, Window): the coarsest unit in which the emission interval
//     Window/Limit is whole. Every rule packs (3 per 10s, 7 per minute and
//     9,999 per second as well as 100 per second), exactly. When
//     Window/Limit is whole nanoseconds (L' = 1) the word has no horizon;
//     otherwise it holds TATs up to MaxInt64/L' ns either side of the
//     clock's origin (97 years for 3 per second, 42 years for 7 per minute,
//     10.7 days for 9,999 per second), and a state past that is kept under a
//     mutex instead, with the same decisions and no allocation.
//   - Token bucket, snapshot ([TokenBucketSnapshot]): any token-bucket rule,
//     exact to a fraction of a nanosecond, with no horizon, at one 16-byte
//     allocation per admission; [New] and [NewLimiter] no longer choose it.
//   - Fixed window, packed ([FixedWindow]): the count and the window index share
//     the word, the index as an offset from the clock range's first window.
//     Every rule fits.
//   - Sliding counter: packed when its two counts and every window index of
//     the clock range fit the word, which holds when Limit < 2^16 and Window
//     >= 2^(2b-1) ns, b being the bit length of Limit (1000 per second packs,
//     60,000 per second does not); a snapshot otherwise.
//   - Sliding log: not offered. Its state is a ring of Limit timestamps, which no
//     single CAS can update; use package locked (or sharded) for it. The
//     constructors return an error wrapping [admit.ErrUnsupported].
//
// [New] and [NewLimiter] choose the packed form whenever the rule allows it.
// Every form decides exactly as the kernel does for every reading of the
// kernels' clock range, ±(2^62-1) ns (146 years either side of the clock's
// origin), however far apart its readings lie, and readings past the range's
// ends are taken as its ends. Only the token bucket's word in scaled units
// has a horizon, and past it the state leaves the word, not the kernel's
// decisions.
//
// A request for one on a packed word, the call limiters see most often,
// takes a fast path in the single-key limiters and the keyed stores alike:
// the kernel's one-token specialisation (GCRA on the TAT in the word's own
// units, or the windows' counts), between one load and one CAS, with the
// same decisions. The general kernel still decides every other request,
// every denial, a token bucket held by a reservation or spilled past its
// word's horizon, and readings the specialisation does not take (outside
// its range, or, for a window, stale).
//
// # Composites
//
// [NewLimits] and [NewLimitsLimiter] enforce an [admit.Limits], several
// rules on one key, all or nothing: every rule's state of a key is in one
// cell, decided together by the composite kernel and published by one
// compare-and-swap. Two forms, chosen at construction:
//
//   - Pair: two rules whose states each pack in one word (every token
//     bucket and fixed window, the sliding counters that pack), the two
//     words side by side and swapped together by a 16-byte CAS
//     (CMPXCHG16B), with no allocation on any path. amd64 only; a token
//     bucket past its word's horizon is kept under a mutex, as above.
//   - Snapshot: any other composite, and every composite on other
//     architectures: the states in an immutable array behind a pointer,
//     one allocation of 32 bytes per rule per admission, none per denial.
//
// The sliding log is refused in a composite as it is alone. A composite of
// token buckets hands out reservations, which reserve in every rule and are
// cancelled in every rule or none.
//
// # Keyed stores
//
// [New] returns an [admit.Store], the lock-free table of package sharded's
// one-word states, and [NewLimits] the same store for one rule (keyed
// composites it refuses, naming sharded.NewLimits): every control of the
// store without a type assertion (Reset, ReserveN, Len, Sweep, Stats).
// Stats reports the keys stored (Len), the [admit.WithMaxKeys] bound, the
// keys evicted as idle and the requests for new keys a full store denied,
// since the store was built; it is meant for a metrics scrape.
// docs/keyed-stores.md ("Statistics") says what each field counts.
//
// # Consistency
//
// Every decision is linearizable: it takes effect at the instant of its
// successful CAS (or, for a denial, of the load that saw the state it denied
// on), and the decisions equal those of the mutex variant for the same sequence
// of calls. Each limiter reads its clock once per call, before its first load;
// a goroutine that loses a CAS retries with the same reading, which the kernels
// treat conservatively when the state has meanwhile moved past it (see package
// admit, "Time").
//
// Under heavy contention on one key, CAS retries spin where a mutex would park:
// measure your own workload against package locked before assuming either wins.
package atomic
