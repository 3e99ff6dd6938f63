package table

import (
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// The general decide path: a key the table holds is decided lock-free by
// decide's CAS loop on its slot's state word, for every algorithm and every
// n; whatever it declines goes to slow (insert.go). A token bucket's Allow
// has its own path, written out in tokenbucket.go.

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1). It fills its named
// result from decide's Verdict (see kernel.Verdict), as AllowN does: a
// five-field Decision never stays in registers, so it is written once.
func (t *Table) Allow(key string) (d admit.Decision) {
	v, moved := t.decideKey(key, 1)
	if moved {
		return t.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, t.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN implements [admit.KeyedLimiter].
func (t *Table) AllowN(key string, n int) (d admit.Decision) {
	v, moved := t.decideKey(key, n)
	if moved {
		return t.redirect(key, n)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, t.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// decideKey decides a request for n on key: lock-free on a key the table
// holds (find, then decide's CAS loop), under the shard's mutex otherwise
// (slow). moved is true, with nothing decided, for a missing key the hooks'
// Keep refused: the caller redirects the call (migrate.go).
func (t *Table) decideKey(key string, n int) (v kernel.Verdict, moved bool) {
	h, k0, k1 := t.hash(key)
	return t.decideAt(key, h, k0, k1, t.now(), n)
}

// decideAt is decideKey for key, whose hash and key words are h, k0 and k1
// (hash), at reading now.
func (t *Table) decideAt(key string, h, k0, k1 uint64, now time.Duration, n int) (v kernel.Verdict, moved bool) {
	var pause func()
	if pauseEnabled {
		pause = t.pause.take()
	}
	sh := &t.shards[h>>t.shift]
	if tb := sh.tab.Load(); tb != nil {
		if i, ok := tb.find(tagOf(h), k0, k1, key, t.hashed, t.sbits); ok {
			hook.Between(hook.AfterLookup)
			if v, ok := t.decide(&tb.slot(i)[1], now, n, &pause); ok {
				return v, false
			}
		}
	}
	if pauseEnabled && pause != nil {
		pause()
	}
	return t.slow(sh, recKeyOf(h, k0, k1, key), key, now, n)
}

// decide is the CAS loop on a stored key's state word p. It returns ok false
// when the word is a sentinel (a tombstone: the key was evicted, or its
// table rebuilt; or held) or the new state does not fit the word (a token
// bucket past its horizon): nothing was published, and the caller takes
// the slow path, which decides under the shard's mutex.
//
// The tempting wrong version loads the word, decides, and Stores the
// result: two calls that load the same word both take the last token. The
// CAS publishes a decision only if the word is still the one it was
// computed from. Linearization point: the successful CompareAndSwap for an
// admission; the Load of the word it decided on for a denial or a probe. A
// stale reading needs no clamp on a stored key: the kernels never move a
// state backwards for one.
//
// *pause, when not nil (tests only, in builds with the tag admittest), is
// called after the first load of the word, and cleared.
func (t *Table) decide(p *atomic.Uint64, now time.Duration, n int, pause *func()) (v kernel.Verdict, ok bool) {
	// tried is whether the token bucket's AllowOne was asked already: the
	// general loop then goes straight to step, instead of asking it again
	// on a word it declined.
	tried := n == 1 && t.alg == algTB && (!pauseEnabled || *pause == nil)
	if tried {
		// The token bucket's one-token path, written out: the word is the
		// TAT in scaled units, and AllowOne is GCRA for one token on it.
		for {
			old := p.Load()
			if old-kernel.TokenBucketTomb <= kernel.TokenBucketHeld-kernel.TokenBucketTomb {
				break // a sentinel: the slow path decides
			}
			nw, owed, ok := t.tb.AllowOne(old, now)
			if !ok {
				break // a denial, or a reading AllowOne does not take
			}
			hook.Between(hook.BeforeCAS)
			if p.CompareAndSwap(old, nw) {
				v.Allowed = true
				v.Remaining, v.ResetAfter = t.tb.OneVerdict(owed)
				return v, true
			}
		}
	}
	for {
		old := p.Load()
		if pauseEnabled && *pause != nil {
			(*pause)()
			*pause = nil
		}
		if old == t.tomb || old == t.held {
			return v, false
		}
		var nw uint64
		if n == 1 && !tried {
			if nw, v, ok = t.one(old, now); ok {
				hook.Between(hook.BeforeCAS)
				if p.CompareAndSwap(old, nw) {
					return v, true
				}
				continue
			}
		}
		var change bool
		if v, nw, change, ok = t.step(old, now, n); !change {
			return v, true
		}
		if !ok {
			return v, false
		}
		hook.Between(hook.BeforeCAS)
		if p.CompareAndSwap(old, nw) {
			return v, true
		}
	}
}

// one is the fast path for an admission of one on the state word old:
// the kernels' AllowOne specialisations (one load, the arithmetic for n = 1,
// no clamp), proven equal to the general path by the kernels' tests. ok is
// false for a denial or a reading the fast path does not take: the caller
// takes step.
func (t *Table) one(old uint64, now time.Duration) (nw uint64, v kernel.Verdict, ok bool) {
	switch t.alg {
	case algTB:
		var owed uint64
		if nw, owed, ok = t.tb.AllowOne(old, now); ok {
			v.Allowed = true
			v.Remaining, v.ResetAfter = t.tb.OneVerdict(owed)
		}
		return nw, v, ok
	case algFW:
		s := t.fwp.Unpack(old)
		if v, ok = t.fw.AllowOne(&s, now); ok {
			nw = t.fwp.Pack(s)
		}
		return nw, v, ok
	default:
		s := t.scp.Unpack(old)
		if v, ok = t.sc.AllowOne(&s, now); ok {
			nw = t.scp.Pack(s)
		}
		return nw, v, ok
	}
}

// step is the kernel's Decide on the state word old: the Verdict, the new
// word, whether it differs from old (false for a denial or a probe, which
// publish nothing), and fits false when the new state does not pack (a
// token bucket past its word's horizon, kernel.TokenBucket.Pack): then nw
// is meaningless and the state must be held (spill).
func (t *Table) step(old uint64, now time.Duration, n int) (v kernel.Verdict, nw uint64, change, fits bool) {
	switch t.alg {
	case algTB:
		s := t.tb.Unpack(old)
		before := s
		v = t.tb.Decide(&s, now, n)
		if s == before {
			return v, old, false, true
		}
		nw, fits = t.tb.Pack(s)
		return v, nw, true, fits
	case algFW:
		s := t.fwp.Unpack(old)
		v = t.fw.Decide(&s, now, n)
		if !v.Allowed || n == 0 {
			return v, old, false, true
		}
		return v, t.fwp.Pack(s), true, true
	default:
		s := t.scp.Unpack(old)
		v = t.sc.Decide(&s, now, n)
		if !v.Allowed || n == 0 {
			return v, old, false, true
		}
		return v, t.scp.Pack(s), true, true
	}
}

// fresh reports whether the state word w is equivalent to a new key's state
// at reading at (kernel Fresh).
func (t *Table) fresh(w uint64, at time.Duration) bool {
	switch t.alg {
	case algTB:
		s := t.tb.Unpack(w)
		return t.tb.Fresh(&s, at)
	case algFW:
		s := t.fwp.Unpack(w)
		return t.fw.Fresh(&s, at)
	default:
		s := t.scp.Unpack(w)
		return t.sc.Fresh(&s, at)
	}
}

// tbNext returns the token bucket's state after deciding n at now on the
// word old: step's new state, for a state that does not pack.
func (t *Table) tbNext(old uint64, now time.Duration, n int) kernel.TokenBucketState {
	s := t.tb.Unpack(old)
	t.tb.Decide(&s, now, n)
	return s
}
