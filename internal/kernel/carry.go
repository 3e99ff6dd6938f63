package kernel

import (
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/admit-go/admit"
)

// Conversion says what Convert keeps of a key's state when its limits change:
// the kernel's side of policy.Carry, whose strategies have the same values.
type Conversion uint8

const (
	// KeepConsumed: what was consumed stays consumed, all of it, even past
	// the new Limit.
	KeepConsumed Conversion = iota + 1
	// KeepProportional: the same fraction of the budget stays consumed.
	KeepProportional
	// KeepNothing: the key starts fresh under the new limits.
	KeepNothing
)

// Convert writes to ts (len(ts) == to.Len()) the state under the limits of to
// that the state fs under the limits of from carries at reading now:
//
//   - Each new part takes its consumption from one old part: the first with
//     the same window and algorithm, else the first with the same window,
//     else the one whose window is nearest (by ratio). A one-rule change
//     always carries from the old rule to the new.
//   - An old part's consumption at now is how many requests' worth of its
//     budget is in use: a token bucket's debt in tokens (its TAT ahead of now
//     times Limit/Window, past Limit for a bucket in debt beyond a full
//     bucket, counted up to 2^52/Window tokens), a fixed window's count in the window holding now, a sliding
//     counter's estimate (the previous window's count weighted as the
//     kernel weighs it, plus the current one's), a sliding log's live
//     entries.
//   - KeepConsumed carries c = consumption; KeepProportional c = new
//     Limit × consumption / old Limit; KeepNothing c = 0. Neither is
//     clamped to the new Limit: a consumption past it is kept, not
//     forgotten. It is clamped only to 2^31 requests, past every Limit (so
//     that the state still denies every request), which only a
//     reservation's debt reaches.
//   - The new part's state holds c consumed at now, rounded up to whole
//     requests or nanoseconds (never kinder): a token bucket in debt by
//     c × Window/Limit from now (more than a window ahead when c > Limit;
//     at most 2^52 ns, 52 days, or one window if longer, as Redis's
//     conversion can hold it); a
//     fixed window with count ⌈c⌉ in now's window; a sliding counter with
//     ⌈c⌉ in now's window and nothing before; a sliding log with the newest
//     ⌈c⌉ timestamps of an old sliding log (padded with now when it has
//     fewer), or ⌈c⌉ entries at now (past Limit, the ring keeps the newest
//     Limit and counts the rest as copies of the newest: see Log; at most
//     2^16 entries, or Limit if more, as Redis's conversion writes them). A count
//     past Limit denies every request until it rolls out.
//
// Every carried state is at least as strict as a fresh one, so no strategy
// lets a key pass more than the new limits allow a fresh key from the moment
// of the change. On a frozen clock every part of a key's state under
// KeepConsumed holds at least what the key was admitted since it was
// fresh (an admission charges every part, and a carry keeps the whole
// consumption), so across any chain of changes the key is admitted at most
// the largest Limit (a composite's smallest rule's) of the limits it was
// under. Under KeepProportional every part holds at least the fraction
// admitted/M of its Limit, M the largest Limit of any rule the key was
// under (an admission of n adds n/l >= n/M to a part's fraction, a carry
// keeps it), so the key is admitted at most M: the same bound for one-rule
// limits, a weaker one for composites (10/10 spent under "fixed-window,10,1m
// + fixed-window,1000,1h" is 1% of the hour, which "fixed-window,10,1h"
// carries as 1 of 10). KeepNothing keeps no such promise: each change
// starts the key fresh.
func Convert(from *Composite, fs []PartState, to *Composite, ts []PartState, now time.Duration, carry Conversion) {
	now = clampTime(now)
	for j := range ts {
		ts[j] = PartState{}
		if carry == KeepNothing {
			continue
		}
		i := from.source(to.limits.At(j))
		used := from.consumed(i, &fs[i], now)
		oldLimit := big.NewRat(int64(from.PartLimit(i)), 1)
		newLimit := big.NewRat(int64(to.PartLimit(j)), 1)
		c := new(big.Rat)
		switch carry {
		case KeepProportional:
			c.Quo(c.Mul(used, newLimit), oldLimit)
		default:
			c.Set(used)
		}
		if c.Cmp(maxCarried) > 0 {
			c.Set(maxCarried)
		}
		if clampCarried() && c.Cmp(newLimit) > 0 {
			c.Set(newLimit) // the planted bug (admitstress builds only)
		}
		if c.Sign() == 0 {
			continue
		}
		to.parts[j].hold(&ts[j], c, now, from.parts[i].sl, &fs[i])
	}
}

// source returns the index of the old part a new part with rule r carries
// from: the first with r's window and algorithm, else the first with r's
// window, else the one whose window is nearest r's by ratio (the larger
// window over the smaller, compared exactly), the first on a tie. A
// one-part composite is its own source.
func (c *Composite) source(r admit.Rule) int {
	for i := range c.parts {
		if o := c.limits.At(i); o.Window == r.Window && o.Algorithm == r.Algorithm {
			return i
		}
	}
	for i := range c.parts {
		if c.limits.At(i).Window == r.Window {
			return i
		}
	}
	best := 0
	for i := 1; i < len(c.parts); i++ {
		if nearer(c.limits.At(i).Window, c.limits.At(best).Window, r.Window) {
			best = i
		}
	}
	return best
}

// nearer reports whether window a is strictly nearer w than window b is, by
// ratio: max(a,w)/min(a,w) < max(b,w)/min(b,w), compared by
// cross-multiplying in 128 bits (windows are positive).
func nearer(a, b, w time.Duration) bool {
	ahi, alo := max(a, w), min(a, w)
	bhi, blo := max(b, w), min(b, w)
	// ahi/alo < bhi/blo  <=>  ahi·blo < bhi·alo
	x1, x0 := bits.Mul64(uint64(ahi), uint64(blo))
	y1, y0 := bits.Mul64(uint64(bhi), uint64(alo))
	return x1 < y1 || (x1 == y1 && x0 < y0)
}

// consumed returns how many requests' worth of part i's budget the state s
// has in use at reading now (see Convert).
func (c *Composite) consumed(i int, s *PartState, now time.Duration) *big.Rat {
	p := &c.parts[i]
	switch {
	case p.tb != nil:
		st := s.TB()
		tat := int64(st.TAT ^ bias)
		if st.TAT == 0 || p.tb.debt(tat, st.Frac, int64(now)) == 0 {
			return new(big.Rat)
		}
		// (TAT − now)×L + Frac units of 1/W tokens: a bucket may owe more
		// than a full bucket (a reservation, a carried debt), where debt
		// saturates. Counted exactly up to 2^52 units, as redisstore's
		// conversion counts them (2^52/W tokens: 4,194,304 for a second's
		// window), saturated there.
		units := new(big.Int).Mul(new(big.Int).Sub(big.NewInt(tat), big.NewInt(int64(now))), big.NewInt(p.tb.limit))
		units.Add(units, big.NewInt(st.Frac))
		if units.Cmp(maxDebtUnits) > 0 {
			units.Set(maxDebtUnits)
		}
		return new(big.Rat).SetFrac(units, big.NewInt(p.tb.window))
	case p.fw != nil:
		st := s.FW()
		_, count := p.fw.current(&st, int64(now))
		return big.NewRat(count, 1)
	case p.sc != nil:
		st := s.SC()
		_, elapsed, prev, curr := p.sc.current(&st, int64(now))
		w := p.sc.window
		// prev × (W − elapsed)/W + curr
		r := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(prev), big.NewInt(w-elapsed)), big.NewInt(w))
		return r.Add(r, big.NewRat(curr, 1))
	default:
		if s.Log == nil {
			return new(big.Rat)
		}
		return big.NewRat(p.sl.live(s.Log, int64(now)), 1)
	}
}

// hold writes to *s the state of a part that has c (> 0) requests' worth
// in use at reading now (see Convert). old and os are the source part's
// sliding-log kernel (nil if it is not one) and state.
func (p *part) hold(s *PartState, c *big.Rat, now time.Duration, old *SlidingLog, os *PartState) {
	whole := ceilRat(c) // >= 1, past Limit when c is
	switch {
	case p.tb != nil:
		// debt c × W/L ns from now, rounded up to a whole nanosecond.
		d := new(big.Rat).Mul(c, big.NewRat(p.tb.window, p.tb.limit))
		tat := addSat(int64(now), min(ceilRat(d), max(maxCarriedDebt, p.tb.window)))
		s.SetTB(TokenBucketState{TAT: uint64(tat) ^ bias})
	case p.fw != nil:
		s.SetFW(FixedWindowState{Window: p.fw.Index(now), Count: whole})
	case p.sc != nil:
		s.SetSC(SlidingCounterState{Window: p.sc.Index(now), Curr: whole})
	default:
		s.Log = p.sl.carried(old, os.Log, now, min(whole, max(p.sl.limit, maxCarriedEntries)))
	}
}

// maxCarried is the most Convert carries, in requests: more than any
// Limit (admit.MaxLimit), and what redisstore's conversion carries at most.
var maxCarried = big.NewRat(1<<31, 1)

// maxCarriedDebt is the longest debt Convert gives a token bucket, in
// nanoseconds, when the bucket's window is shorter: redisstore's
// conversion keeps a TAT exact in a Lua number (below 2^53) with it.
const maxCarriedDebt = 1 << 52

// maxDebtUnits is the most units of debt Convert counts in a token bucket.
var maxDebtUnits = big.NewInt(1 << 52)

// maxCarriedEntries is the most entries Convert gives a sliding log whose
// Limit is smaller: redisstore's conversion writes each entry.
const maxCarriedEntries = 1 << 16

// ceilRat returns ⌈r⌉ for r >= 0, saturating at MaxInt64.
func ceilRat(r *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}
