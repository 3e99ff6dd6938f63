package kernel

import "time"

// CompositePair is the packing of a Composite of two parts whose states
// each pack in one word, for a store that keeps the two words side by side
// and updates them together (package atomic's pair form, by a 16-byte
// compare-and-swap):
//
//	word 0  part 0's state, in its kernel's one-word packing
//	word 1  part 1's state, likewise
//
// The packings are the kernels' own: a token bucket's TokenBucket.Pack (in
// scaled units, with a horizon: a state past it does not pack, and Pack
// reports it), a fixed window's FixedWindowWord (exact over the clock
// range), a sliding counter's SlidingCounterWord (for the rules whose
// states pack: SlidingCounter.Word). A fresh part packs as the word 0, so
// the zero pair is a fresh key. It adds no arithmetic: AllowOne is each
// part's AllowOne, combined as Composite.Decide combines verdicts.
type CompositePair struct {
	parts [2]pairPart
}

// pairPart is one part's kernel and packing; exactly one kernel is set.
type pairPart struct {
	tb  *TokenBucket
	fw  *FixedWindow
	fww FixedWindowWord
	sc  *SlidingCounter
	scw SlidingCounterWord
}

// Pair returns the packing of c's states in two words, and whether they
// pack: c has exactly two parts, no sliding log, and each sliding counter's
// states pack (SlidingCounter.Word). Every token bucket and fixed window
// packs.
func (c *Composite) Pair() (CompositePair, bool) {
	var p CompositePair
	if len(c.parts) != 2 {
		return p, false
	}
	for i := range c.parts {
		q, to := &c.parts[i], &p.parts[i]
		switch {
		case q.tb != nil:
			to.tb = q.tb
		case q.fw != nil:
			to.fw, to.fww = q.fw, q.fw.Word()
		case q.sc != nil:
			w, ok := q.sc.Word()
			if !ok {
				return CompositePair{}, false
			}
			to.sc, to.scw = q.sc, w
		default:
			return CompositePair{}, false
		}
	}
	return p, true
}

// Pack returns the words of the composite state s (two parts), and whether
// they fit: false when a token bucket's state lies past its word's
// horizon. s must be a state the kernels wrote.
func (p *CompositePair) Pack(s []PartState) (w0, w1 uint64, ok bool) {
	w0, ok0 := p.parts[0].pack(&s[0])
	w1, ok1 := p.parts[1].pack(&s[1])
	return w0, w1, ok0 && ok1
}

func (q *pairPart) pack(s *PartState) (uint64, bool) {
	switch {
	case *s == (PartState{}):
		return 0, true // fresh: every packing reads 0 as a fresh part
	case q.tb != nil:
		return q.tb.Pack(s.TB())
	case q.fw != nil:
		return q.fww.Pack(s.FW()), true
	default:
		return q.scw.Pack(s.SC()), true
	}
}

// Unpack writes the composite state that the words w0 and w1 from Pack
// stand for into s (two parts).
func (p *CompositePair) Unpack(w0, w1 uint64, s []PartState) {
	p.parts[0].unpack(w0, &s[0])
	p.parts[1].unpack(w1, &s[1])
}

func (q *pairPart) unpack(w uint64, s *PartState) {
	*s = PartState{}
	switch {
	case q.tb != nil:
		s.SetTB(q.tb.Unpack(w))
	case q.fw != nil:
		s.SetFW(q.fww.Unpack(w))
	default:
		s.SetSC(q.scw.Unpack(w))
	}
}

// Spare returns a word that Pack never returns as word 0, for i = 1 and 2
// (two different words): a store's sentinels, told from every state by
// word 0 alone. For a token bucket they are the words 1 and 2, which
// TokenBucket.Pack never returns; for a window, its packing's Spare(i),
// a zero count with index bits that no state with a count takes (and a
// fresh window packs as 0, not as its zero count with index bits).
func (p *CompositePair) Spare(i uint64) uint64 {
	q := &p.parts[0]
	switch {
	case q.tb != nil:
		return i
	case q.fw != nil:
		return q.fww.Spare(i)
	default:
		return q.scw.Spare(i)
	}
}

// AllowOne is Composite.Decide(s, now, 1) on the words w0 and w1 of s, for
// the call most limiters make most often: each part's AllowOne on its own
// word (TokenBucket.AllowOne, FixedWindow.AllowOne, SlidingCounter.AllowOne
// on the unpacked word), and, if both admit, the words after the admission
// and the Verdict and binding part that Decide returns: the smallest
// Remaining, the first on a tie, and the largest ResetAfter. ok is false
// when either part declines (a denial, a reading outside the part's range,
// a stale window), and then nothing was decided: the caller takes the
// general path. Neither word may be a sentinel of the caller's.
// TestCompositePairAllowOneEqualsDecide compares the two.
func (p *CompositePair) AllowOne(w0, w1 uint64, now time.Duration) (n0, n1 uint64, v Verdict, which int, ok bool) {
	// Each part's AllowOne is written out here, twice, its Verdict's fields
	// kept in locals, rather than called through a method per part that
	// returns a Verdict: an admitted Allow of a pair spends much of its time
	// here, and the calls and the copies through memory cost more than the
	// arithmetic (see Verdict). The token bucket's AllowOne and the windows'
	// packings inline; OneVerdict and the windows' AllowOne are calls.
	var r0, r1 int
	var a0, a1 time.Duration
	var pv Verdict
	if q := &p.parts[0]; q.tb != nil {
		var owed uint64
		if n0, owed, ok = q.tb.AllowOne(w0, now); !ok {
			return 0, 0, v, 0, false
		}
		r0, a0 = q.tb.OneVerdict(owed)
	} else {
		if q.fw != nil {
			s := q.fww.Unpack(w0)
			pv, ok = q.fw.AllowOne(&s, now)
			n0 = q.fww.Pack(s)
		} else {
			s := q.scw.Unpack(w0)
			pv, ok = q.sc.AllowOne(&s, now)
			n0 = q.scw.Pack(s)
		}
		if !ok {
			return 0, 0, v, 0, false
		}
		r0, a0 = pv.Remaining, pv.ResetAfter
	}
	if q := &p.parts[1]; q.tb != nil {
		var owed uint64
		if n1, owed, ok = q.tb.AllowOne(w1, now); !ok {
			return 0, 0, v, 0, false
		}
		r1, a1 = q.tb.OneVerdict(owed)
	} else {
		if q.fw != nil {
			s := q.fww.Unpack(w1)
			pv, ok = q.fw.AllowOne(&s, now)
			n1 = q.fww.Pack(s)
		} else {
			s := q.scw.Unpack(w1)
			pv, ok = q.sc.AllowOne(&s, now)
			n1 = q.scw.Pack(s)
		}
		if !ok {
			return 0, 0, v, 0, false
		}
		r1, a1 = pv.Remaining, pv.ResetAfter
	}
	v.Allowed, v.Remaining, v.ResetAfter = true, r0, max(a0, a1)
	if r1 < r0 {
		v.Remaining, which = r1, 1
	}
	return n0, n1, v, which, true
}
