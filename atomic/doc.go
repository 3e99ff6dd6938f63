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
// is an immutable snapshot behind an atomic.Pointer, replaced by a CAS on the
// pointer: one 16- or 24-byte allocation per admission, none on a denial.
//
//   - Token bucket, packed ([TokenBucket]): the state is GCRA's theoretical
//     arrival time, one int64 of nanoseconds. It needs the emission interval
//     Window/Limit to be a whole number of nanoseconds (5 per 10s, 100 per
//     second, 1000 per hour; not 3 per 10s). It never wraps: the word is a
//     time in the clock's own nanoseconds, and the kernels clamp readings to
//     146 years either side of the clock's origin, leaving room for any TAT.
//   - Token bucket, snapshot ([TokenBucketSnapshot]): any token-bucket rule,
//     exact to a fraction of a nanosecond.
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
// No packed form has a horizon: each decides exactly as the kernel does for
// every reading of the kernels' clock range, ±(2^62-1) ns (146 years either
// side of the clock's origin), however far apart its readings lie, and
// readings past the range's ends are taken as its ends.
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
