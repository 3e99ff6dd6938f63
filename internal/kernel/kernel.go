// Package kernel holds admit's four algorithms as pure arithmetic on small state
// values. A kernel never locks, never reads a clock and never allocates (the
// sliding log allocates its ring once per key, on the key's first admission):
// it is given the state, the time and the request, and it advances the state.
// The variants (atomic, locked, sharded) only decide how that state is guarded.
//
// Every kernel follows the same conventions:
//
//   - Time is a monotonic reading, in nanoseconds, from the variant's clock. A
//     reading older than one the state has already seen (a clock set back, or
//     a goroutine whose reading went stale before it reached the state) is
//     never treated more kindly than the newest: it can neither refill a
//     bucket nor reopen a window. The fixed window and the sliding log clamp
//     it to the newest time seen. The sliding counter weighs the previous
//     window at the stale reading's own position, or fully if the reading
//     falls in an older window: stricter than clamping. The token bucket
//     (GCRA) judges the request at its own time, when the bucket owes at
//     least as much as at the newest reading, so it is never admitted where
//     the newest reading would deny it; it is also charged at its own time,
//     so its tokens refill from then, and a later request may find the
//     bucket fuller than clamping would have left it (never beyond the
//     interval bound over the readings). Neither needs a timestamp in the
//     state, which is what lets their atomic variants fit one word. A
//     reservation's cancellation is judged at the newest reading its key has
//     seen since the reservation (see Hold).
//   - A denied request leaves the state exactly as it was, and so does a probe
//     (n == 0) and a request that can never pass (n < 0 or n > Limit).
//   - The zero value of every state is a fresh key: a full bucket, an empty window.
//   - RetryAfter and ResetAfter are measured from the caller's reading now, so
//     that now+RetryAfter is the earliest clock reading at which the same request
//     would pass. Arithmetic saturates rather than wraps.
package kernel

import (
	"time"

	"github.com/admit-go/admit"
)

// Kernel is what every algorithm offers a variant. S is the per-key state.
type Kernel[S any] interface {
	// Allow decides a request for n at reading now and advances *s to the state
	// after the decision. It writes *s only when it admits n > 0.
	Allow(s *S, now time.Duration, n int) admit.Decision

	// Decide is Allow without the Limit: hot paths carry its Verdict and fill
	// the Decision in their own return (see [Verdict]).
	Decide(s *S, now time.Duration, n int) Verdict

	// Limit returns the rule's Limit.
	Limit() int

	// Fresh reports whether *s, at reading now, is equivalent to the zero state:
	// every future decision would be the same for both, so a store may drop it.
	Fresh(s *S, now time.Duration) bool
}

// Verdict is a Decision without its Limit, which the caller knows. It has four
// fields because the compiler keeps structs of at most four fields in
// registers, while a Decision, with five, lives in memory: every function
// that returns one it got from another copies it, and the copy (16-byte loads
// of a struct just written with 8-byte stores) stalls the processor's store
// forwarding. On this project's benchmark machine those stalls cost more than
// the arithmetic. Hot paths therefore carry a Verdict and fill their own
// named Decision result field by field:
//
//	func (l *X) Allow() (d admit.Decision) {
//		v := l.decide(1)
//		d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.limit, v.Remaining, v.RetryAfter, v.ResetAfter
//		return d
//	}
type Verdict struct {
	Allowed    bool
	Remaining  int
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// Decision returns v as the Decision of a rule with the given Limit, for
// paths where a copy does not matter.
func (v Verdict) Decision(limit int) (d admit.Decision) {
	d.Allowed = v.Allowed
	d.Limit = limit
	d.Remaining = v.Remaining
	d.RetryAfter = v.RetryAfter
	d.ResetAfter = v.ResetAfter
	return d
}

// fill writes v into *d as the Decision of a rule with the given Limit,
// field by field, the one copy (see Verdict): each kernel's Allow is its
// Decide and a fill.
func (v Verdict) fill(d *admit.Decision, limit int) {
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, limit, v.Remaining, v.RetryAfter, v.ResetAfter
}
