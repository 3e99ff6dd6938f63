package kernel

import (
	"math"
	"time"

	"github.com/admit-go/admit"
)

// TokenBucket is the token-bucket kernel: a bucket of Limit tokens, refilled
// continuously at Limit tokens per Window, starting full.
//
// It is GCRA, the generic cell rate algorithm, in exact integers. A token is
// emitted every T = Window/Limit; the state is the theoretical arrival time
// (TAT): the instant at which the bucket will be full again. The bucket's debt
// at reading now is TAT − now; a request for n passes if the debt after it,
// (max(TAT, now) + n·T) − now, is at most Window (a full bucket's worth), and
// then TAT becomes max(TAT, now) + n·T.
//
// T is rarely a whole number of nanoseconds (3 per 10s is 3.333…s), so TAT is
// kept as whole nanoseconds plus a fraction in units of 1/Limit ns, and debt is
// counted in those units: a token costs Window units, a full bucket holds
// Limit×Window units (at most 2^62, see admit.MaxLimitTimesWindow). Nothing is
// rounded, so "3 per 10s" emptied at t is full again at exactly t+10s, and over
// any span of readings of length d at most Limit + floor(d×Limit/Window) pass.
//
// A stale reading (older than a reading already applied) needs no clamp: the
// debt it sees is larger, not smaller, so it can only be denied more, and TAT
// never moves backwards because it only ever grows by max(TAT, now) + n·T.
type TokenBucket struct {
	limit    int64   // L: tokens in a full bucket; units in a nanosecond
	window   int64   // W: nanoseconds to refill a full bucket; units in a token
	capacity int64   // L×W: units in a full bucket
	tokenNs  int64   // whole nanoseconds of T = W/L
	tokenRem int64   // T's fraction, in units: W mod L
	perToken divider // divides units by W
	pack     packing // the one-word form of the state (Pack, Unpack)
	one      oneToken
}

// TokenBucketState is one key's bucket. The zero value is a full bucket.
type TokenBucketState struct {
	// TAT is the theoretical arrival time's whole nanoseconds, biased by 2^63
	// (stored as uint64(tat) ^ 1<<63) so that the zero value means minus
	// infinity: a bucket that has always been full. Every admission sets it to
	// at least MinInt64 + 1ns, so a used bucket is never mistaken for a fresh one.
	TAT uint64
	// Frac is the fraction of a nanosecond past TAT, in units of 1/Limit ns.
	Frac int64
}

const bias = 1 << 63

// NewTokenBucket returns the kernel for rule, which must be valid.
func NewTokenBucket(rule admit.Rule) *TokenBucket {
	l, w := int64(rule.Limit), int64(rule.Window)
	k := &TokenBucket{limit: l, window: w, capacity: l * w, tokenNs: w / l, tokenRem: w % l, perToken: newDivider(w), pack: newPacking(l, w)}
	k.one = newOneToken(k)
	return k
}

// Limit returns the rule's Limit.
func (k *TokenBucket) Limit() int { return int(k.limit) }

// Capacity returns the units of a full bucket, Limit×Window: the most a
// bucket owes.
func (k *TokenBucket) Capacity() int64 { return k.capacity }

// State returns the state whose TAT is tat, frac units of 1/Limit ns past
// it (0 <= frac < Limit): for a store that keeps the TAT in an encoding of
// its own (redisstore decides on a state relative to the reading, at
// reading 0).
func (k *TokenBucket) State(tat time.Duration, frac int64) TokenBucketState {
	return TokenBucketState{TAT: uint64(tat) ^ bias, Frac: frac}
}

// Packable reports whether the TAT alone is the state: when T is a whole
// number of nanoseconds, Frac is always 0. Every rule's state also fits one
// word in scaled units ([TokenBucket.Pack]), within a horizon.
func (k *TokenBucket) Packable() bool { return k.tokenRem == 0 }

// packing is the one-word form of a bucket's state, in scaled units of
// 1/L' ns, where L' = L/gcd(L, W): the coarsest unit in which both a
// reading (whole nanoseconds) and the emission interval T = W/L = W'/L' ns
// are whole, so that the state (a TAT of whole nanoseconds plus a fraction
// in units of 1/L ns, always a multiple of gcd(L, W), see Pack) is one
// integer:
//
//	bits[0:64]  u = TAT·L' + Frac/g, biased by 2^63 (u ^ 1<<63), where
//	            g = gcd(L, W) = L/L'; the zero word is the zero state (a full
//	            bucket, TAT minus infinity)
//
// Horizon: u must fit an int64 and stay clear of the words 0, 1 and 2
// (the zero state, TokenBucketTomb and TokenBucketHeld), so a state packs
// when its TAT lies within ±(⌊(2^63−1)/L'⌋ − 1) ns of the clock's origin.
// With L' = 1 (T whole nanoseconds) that is every int64 TAT and the word is
// the kernel's TAT field itself; with L' = 3 (3 per second) ±97.4 years,
// L' = 7 (7 per minute) ±41.8 years, L' = 9999 (9,999 per second) ±10.7
// days. A state past the horizon does not pack (Pack reports it), and the
// variant keeps it some other way: the word does not wrap, and decisions stay
// the kernel's. TestPackHorizon pins the bounds.
type packing struct {
	units   int64   // L': units in a nanosecond
	step    int64   // g = L/L': the kernel's fraction units in one packed unit
	maxTAT  int64   // the largest |TAT| that packs: MaxInt64/L' - 1
	perUnit divider // divides by L'
}

func newPacking(l, w int64) packing {
	a, b := l, w
	for b != 0 {
		a, b = b, a%b
	}
	u := l / a
	return packing{units: u, step: a, maxTAT: math.MaxInt64/u - 1, perUnit: newDivider(u)}
}

// Units returns L', the scaled units of a nanosecond in which the state
// packs: 1 when T is whole nanoseconds.
func (k *TokenBucket) Units() int64 { return k.pack.units }

// Horizon returns the largest |TAT| (in nanoseconds of the clock) whose
// state packs in one word: MaxInt64/L' - 1, MaxInt64 when L' = 1.
func (k *TokenBucket) Horizon() time.Duration {
	if k.pack.units == 1 {
		return math.MaxInt64
	}
	return time.Duration(k.pack.maxTAT)
}

// The two words Pack never returns (see Pack), which the variants that keep
// a bucket in one word use as sentinels: TokenBucketTomb marks a slot or
// cell whose key was evicted or moved (a keyed store's tombstone), and
// TokenBucketHeld one whose state a record keeps instead (a reservation
// that waits, or a state past the horizon: internal/keyed's held protocol). Both variants
// test "either sentinel" as w-TokenBucketTomb <= TokenBucketHeld-TokenBucketTomb,
// one comparison.
const (
	TokenBucketTomb = 1
	TokenBucketHeld = 2
)

// Pack returns s as one word (see packing for the bit map), and whether it
// fits: false when its TAT lies past the horizon. Every word Pack returns
// differs from 1 and 2, and is 0 only for the zero state. A state the kernel
// wrote always has Frac a multiple of g = gcd(L, W): the fraction starts at 0
// whenever the TAT restarts from a reading, and moves by W mod L (a
// multiple of g), less L on a carry (a multiple of g).
func (k *TokenBucket) Pack(s TokenBucketState) (uint64, bool) {
	p := &k.pack
	if p.units == 1 || s.TAT == 0 {
		return s.TAT, true // the kernel writes neither word 1 nor 2 (tbCell's comment)
	}
	tat := int64(s.TAT ^ bias)
	if tat > p.maxTAT || tat < -p.maxTAT {
		return 0, false
	}
	return uint64(tat*p.units+s.Frac/p.step) ^ bias, true
}

// Unpack returns the state a word from Pack stands for.
func (k *TokenBucket) Unpack(w uint64) TokenBucketState {
	p := &k.pack
	if p.units == 1 || w == 0 {
		return TokenBucketState{TAT: w}
	}
	u := int64(w ^ bias)
	tat := p.perUnit.floorDiv(u)
	return TokenBucketState{TAT: uint64(tat) ^ bias, Frac: (u - tat*p.units) * p.step}
}

// debt returns the bucket's debt in units at reading now, saturated just above
// capacity when the TAT is further ahead than any bucket could be in debt (a
// very stale reading): that request is denied either way.
func (k *TokenBucket) debt(tat, frac, now int64) int64 {
	if tat < now || (tat == now && frac == 0) {
		return 0
	}
	ahead := tat - now // > 0, or 0 with a fraction
	if ahead < 0 || ahead > k.window {
		return k.capacity + 1 // ahead < 0: tat - now overflowed
	}
	return ahead*k.limit + frac // <= L×W + L - 1 < 2^63
}

// cost returns n tokens' duration, n×W/L, as whole nanoseconds and a fraction.
func (k *TokenBucket) cost(n int64) (ns, rem int64) {
	if n == 1 {
		return k.tokenNs, k.tokenRem
	}
	units := n * k.window // n <= L, so at most L×W
	return units / k.limit, units % k.limit
}

// Allow implements [Kernel].
func (k *TokenBucket) Allow(s *TokenBucketState, now time.Duration, n int) (d admit.Decision) {
	k.Decide(s, now, n).fill(&d, int(k.limit))
	return d
}

// Decide is Allow without the Limit, for hot paths (see [Verdict]).
func (k *TokenBucket) Decide(s *TokenBucketState, now time.Duration, n int) Verdict {
	now = clampTime(now)
	tat, frac := int64(s.TAT^bias), s.Frac
	debt := k.debt(tat, frac, int64(now))
	if n < 0 || int64(n) > k.limit {
		return Verdict{RetryAfter: admit.Never, ResetAfter: time.Duration(untilFull(tat, frac, debt, int64(now)))}
	}
	if n == 0 { // a probe; debt may exceed capacity for a stale reading
		return Verdict{
			Allowed:    true,
			Remaining:  int(k.perToken.div(max(0, k.capacity-debt))),
			ResetAfter: time.Duration(untilFull(tat, frac, debt, int64(now))),
		}
	}
	if int64(n)*k.window > k.capacity-debt {
		// Denied: the request fits once TAT + n·T − W <= reading, i.e. at the
		// ceiling of that instant.
		costNs, costRem := k.cost(int64(n))
		at := addSat(tat, costNs-k.window)
		if f := frac + costRem; f >= k.limit { // f < 2L: at most one carry
			at = addSat(at, 1)
			if f > k.limit {
				at = addSat(at, 1) // the ceiling of the fraction left
			}
		} else if f > 0 {
			at = addSat(at, 1)
		}
		return Verdict{
			RetryAfter: time.Duration(wait(at, int64(now))),
			ResetAfter: time.Duration(untilFull(tat, frac, debt, int64(now))),
		}
	}
	if debt == 0 { // the bucket was full: TAT restarts from now
		tat, frac = int64(now), 0
	}
	costNs, costRem := k.cost(int64(n))
	tat, frac = k.advance(tat, frac, costNs, costRem)
	debt += int64(n) * k.window
	*s = TokenBucketState{TAT: uint64(tat) ^ bias, Frac: frac}
	return Verdict{
		Allowed:    true,
		Remaining:  int(k.perToken.div(k.capacity - debt)),
		ResetAfter: time.Duration(untilFull(tat, frac, debt, int64(now))),
	}
}

// untilFull is the wait from now until a bucket with the given TAT is full.
func untilFull(tat, frac, debt, now int64) int64 {
	if debt == 0 {
		return 0
	}
	if frac != 0 {
		tat = addSat(tat, 1)
	}
	return wait(tat, now)
}

// Fresh implements [Kernel]: the bucket is full.
func (k *TokenBucket) Fresh(s *TokenBucketState, now time.Duration) bool {
	now = clampTime(now)
	return k.debt(int64(s.TAT^bias), s.Frac, int64(now)) == 0
}

// Reserve admits n now for a later time: it takes the n tokens at once, going
// into debt beyond a full bucket's worth if it must, and returns the wait after
// which they are really due, if that wait is at most maxWait. A waiter that
// sleeps for the returned wait and then proceeds is paced at the rule's rate
// even when many wait at once: each reservation moves the TAT on by its own
// n·T, so waiters are handed successive slots instead of waking together to
// fight for one token.
//
// With maxWait 0, Reserve decides exactly as Allow (wait 0 and ok, or a wait
// equal to Allow's RetryAfter and not ok). When not ok, or for n <= 0 or
// n > Limit (wait admit.Never), *s is left as it was.
func (k *TokenBucket) Reserve(s *TokenBucketState, now time.Duration, n int, maxWait time.Duration) (time.Duration, bool) {
	now = clampTime(now)
	if n < 0 || int64(n) > k.limit {
		return admit.Never, false
	}
	if n == 0 {
		return 0, true
	}
	tat, frac := int64(s.TAT^bias), s.Frac
	if k.debt(tat, frac, int64(now)) == 0 {
		tat, frac = int64(now), 0
	}
	costNs, costRem := k.cost(int64(n))
	ntat, nfrac := k.advance(tat, frac, costNs, costRem)
	due := addSat(ntat, -k.window) // the tokens are due once TAT − W has passed
	if nfrac > 0 {
		due = addSat(due, 1)
	}
	d := time.Duration(wait(due, int64(now)))
	if d > maxWait {
		return d, false
	}
	if d > 0 && due > tat {
		// The waiter proceeds at the whole nanosecond due, which lies past
		// the bucket's TAT (a TAT with a fraction, and n = Limit): an
		// admission at that reading would restart the TAT from it, and so
		// must the reservation. Charging from the exact, earlier instant
		// instead would let two due times lie closer together than their
		// tokens allow (3 per 10ms, frozen at 0: ReserveN(1), ReserveN(3),
		// then ReserveN(1) ×4 would be due at 3.333334ms and, four tokens
		// later, at 16.666667ms: 13.333333ms apart, one nanosecond short of
		// four tokens' worth).
		ntat, nfrac = k.advance(due, 0, costNs, costRem)
	}
	*s = TokenBucketState{TAT: uint64(ntat) ^ bias, Frac: nfrac}
	return d, true
}

// Due returns the reading at which the tokens of the reservation that left
// the state after are due: its TAT − W, rounded up to whole nanoseconds.
func (k *TokenBucket) Due(after TokenBucketState) time.Duration {
	due := addSat(int64(after.TAT^bias), -k.window)
	if after.Frac > 0 {
		due = addSat(due, 1)
	}
	return time.Duration(due)
}

// Cancel gives back the tokens of a reservation that found the state before
// and left the state after, if nothing has been admitted or reserved since
// (*s still equals after) and the reservation is not yet due at reading now;
// it reports whether it did. The bucket is then exactly as if the
// reservation had never been made, so a cancellation never lets more
// through than the rule allows. A reservation followed by others is not
// given back: its tokens are already promised to the later ones' slots.
//
// Cancel trusts its caller that before and after are one reservation's:
// comparing states cannot tell two reservations apart (after a
// cancellation, a new reservation can leave the same state again). A
// limiter keeps a [Hold] per key for that, and cancels through
// [TokenBucket.CancelHold].
func (k *TokenBucket) Cancel(s *TokenBucketState, now time.Duration, before, after TokenBucketState) bool {
	if *s != after || k.Due(after) <= clampTime(now) {
		return false // something came since, or the tokens are due: spent
	}
	*s = before
	return true
}

// advance returns the TAT advanced by a cost of costNs and costRem/L ns.
func (k *TokenBucket) advance(tat, frac, costNs, costRem int64) (int64, int64) {
	frac += costRem
	if frac >= k.limit {
		frac -= k.limit
		costNs++
	}
	return addSat(tat, costNs), frac
}

// oneToken is what AllowOne needs, precomputed in scaled units (packing).
type oneToken struct {
	lo       int64   // the earliest reading AllowOne takes: the clock range's start, or the horizon's
	span     uint64  // the readings it takes are lo..lo+span: the clock range, with TAT + W packing
	units    int64   // L' (packing.units)
	token    int64   // T = W/L in units: W' = W/gcd(L, W)
	room     uint64  // W - T in units: the most a bucket may owe before an admission
	window   uint64  // W in units
	perToken divider // divides units by T
}

func newOneToken(k *TokenBucket) oneToken {
	u, w := k.pack.units, k.window
	lo, hi := max(minTime, -k.pack.maxTAT), int64(maxTime) // with u = 1 every TAT packs, and maxTime + W <= 2^63 - 1
	if u > 1 {
		hi = min(hi, k.pack.maxTAT-w) // >= lo: W·L' <= L·W <= 2^62, so W <= maxTAT
	}
	token := w / k.pack.step
	return oneToken{lo: lo, span: uint64(hi - lo), units: u, token: token, room: uint64(w*u - token), window: uint64(w * u), perToken: newDivider(token)}
}

// AllowOne is Decide(s, now, 1) on the packed word w of s (Pack), for the
// call most limiters make most often: an admission of one token. It returns
// the packed word of the state after the admission and what the bucket then
// owes, in units (for OneVerdict), with ok true; or ok false when the
// request is denied or now lies outside the readings it is specialised for,
// and then nothing was decided: the caller takes the general path (Unpack,
// Decide, Pack). w must be a word Pack returned, not a sentinel of the
// caller's. It is small enough to inline into the caller's CAS loop.
//
// It is a specialisation, not a second definition: in units of 1/L' ns the
// packed word is the TAT itself, so GCRA for one token is max(TAT, now) +
// T, admitted when what the bucket owes before it is at most W − T. The
// range of now (the kernels' clock range, and TAT + W within the horizon)
// rules out every clamp, saturation and overflow the general path guards
// against (an owed amount is a difference below 2^64, taken unsigned), and
// the zero word is a TAT of minus infinity as it stands (0 ^ 2^63 =
// MinInt64). TestAllowOneEqualsDecide compares the two over random rules,
// states and readings.
func (k *TokenBucket) AllowOne(w uint64, now time.Duration) (nw, owed uint64, ok bool) {
	o := &k.one
	if uint64(int64(now)-o.lo) > o.span {
		return 0, 0, false
	}
	nowU := int64(now) * o.units
	base := max(int64(w^bias), nowU)
	if uint64(base-nowU) > o.room { // owes more than W − T: denied (the general path says by how much)
		return 0, 0, false
	}
	return uint64(base+o.token) ^ bias, uint64(base-nowU) + uint64(o.token), true
}

// OneVerdict returns the Remaining and ResetAfter of AllowOne's admission
// after which the bucket owes owed units (RetryAfter is 0): whole tokens
// left, by multiply-and-shift, and the wait until full, rounded up to whole
// nanoseconds.
func (k *TokenBucket) OneVerdict(owed uint64) (remaining int, resetAfter time.Duration) {
	o := &k.one
	remaining = int(o.perToken.div(int64(o.window - owed)))
	if o.units == 1 {
		return remaining, time.Duration(owed)
	}
	return remaining, time.Duration(k.pack.perUnit.ceilDiv(int64(owed)))
}
