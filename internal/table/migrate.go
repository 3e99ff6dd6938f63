package table

import (
	"encoding/binary"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/reservation"
)

// The table is a keyed.Mover: a policy.Service Reload moves keys out of it
// one by one (Take), into it (Put), over its listed keys (Keys), and has its
// say over the keys it does not hold through the hooks (SetHooks).
//
// The hooks are read on the paths of a missing key only (absent, or a
// tombstone), never on the lock-free path of a stored key: slow and
// ReserveN call adopt before taking the shard's mutex and keep under it,
// right where a missing key would be decided and stored. A store without
// hooks pays one nil check there. A call Keep refuses publishes nothing:
// slow reports it moved, and the caller, the mutex released, returns that
// (Decide) or decides the call with Redirect (Allow, AllowN).
//
// Take, Put and Keys are internal/keyed's (keyed.Take, ...) over the
// table's layout (layout.go). Take's linearization point is its freezing
// CompareAndSwap to the tombstone, under the shard's mutex, as a
// rebuild's freeze: a lock-free call that loaded the word before fails its
// CAS, finds the tombstone and takes the slow path, where the key is
// missing; a call that published first is in the state taken.

var _ keyed.Mover = (*Table)(nil)

// Limits implements [keyed.Mover]: the store's rule, as one-rule Limits.
func (t *Table) Limits() admit.Limits {
	l, _ := admit.NewLimits(t.rule) // the store's rule is valid
	return l
}

// SetHooks implements [keyed.Mover].
func (t *Table) SetHooks(h *keyed.Hooks) { t.hooks.SetHooks(h) }

// adopt calls the hooks' Adopt for key if the store has an Adopt hook and
// does not hold key, before any lock of the store's own (Adopt may Put key
// here, under the shard's mutex), and returns what Adopt returned, for the
// call's keep (0 if it called none). Whether the store holds key is read
// without the lock, as a lock-free call reads it: a key that goes missing
// just after is adopted by no one here, and is met by Keep under the mutex
// with 0, which a move still to bring the key here refuses.
func (t *Table) adopt(h *keyed.Hooks, sh *shard, rk recKey, key string) keyed.Epoch {
	if h == nil || h.Adopt == nil {
		return 0
	}
	if tb := sh.tab.Load(); tb != nil {
		if i, ok := tb.find(rk.tag, rk.k0, rk.k1, key, t.hashed, t.sbits); ok && tb.slot(i)[1].Load() != t.tomb {
			return 0
		}
	}
	return h.Adopt(key)
}

// Decide implements [keyed.Mover]: AllowN, with the index 0 of the one
// rule, or moved true, with nothing decided, for a call the hooks' Keep
// refused.
func (t *Table) Decide(key string, n int) (d admit.Decision, which int, moved bool) {
	v, moved := t.decideKey(key, n)
	if moved {
		return d, 0, true
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, t.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d, 0, false
}

// redirect decides n requests for key, which the hooks' Keep refused
// (keyed.HookPoint.Redirect).
func (t *Table) redirect(key string, n int) admit.Decision {
	d, _ := t.hooks.Redirect(key, n, func() (admit.Decision, int, bool) { return t.Decide(key, n) })
	return d
}

// reserveElsewhere is ReserveN for a key the hooks' Keep refused: the
// reservation is Redirect's decision, which reserves nothing ahead. An
// admission is a reservation due now that cannot be cancelled (the store
// that admitted it holds no record of it); a denial refuses the
// reservation with the denial's RetryAfter as its Delay, so that
// admit.WaitKeyN sleeps that long and asks again, as it polls a window.
func (t *Table) reserveElsewhere(key string, n int) (admit.Reservation, bool) {
	d := t.redirect(key, n)
	return reservation.Now(d.Allowed, d.RetryAfter, n)
}

// Take implements [keyed.Mover] (keyed.Take): under the key's shard's
// mutex it freezes the slot's word to the tombstone (layout.Export),
// uncounts the key as an eviction does (but counts no eviction: Stats
// leaves moved keys out), and writes the state to into[0].
func (t *Table) Take(key string, into []kernel.PartState) bool {
	return keyed.Take(t.layout(), &t.keys, key, into)
}

// Put implements [keyed.Mover] (keyed.Put). from[0] must be a state of the
// store's rule, as kernel.Convert writes. The key is counted against
// WithMaxKeys after a sweep and the full-store policy, and beyond the
// bound if they make no room: a carried state is never dropped.
func (t *Table) Put(key string, from []kernel.PartState) bool {
	return keyed.Put(t.layout(), &t.keys, t.horizon, key, from)
}

// pack returns the state word of s, a state of the store's rule, and fits
// false for a token bucket's state past the word's horizon. A window with
// nothing counted is the zero word, a fresh key's (its packing with index
// bits could be a sentinel).
func (t *Table) pack(s *kernel.PartState) (w uint64, fits bool) {
	switch t.alg {
	case algTB:
		return t.tb.Pack(s.TB())
	case algFW:
		st := s.FW()
		if st.Count == 0 {
			return 0, true
		}
		return t.fwp.Pack(st), true
	default:
		st := s.SC()
		if st.Prev == 0 && st.Curr == 0 {
			return 0, true
		}
		return t.scp.Pack(st), true
	}
}

// Keys implements [keyed.Mover] (keyed.Keys): each shard's keys, copied
// under its mutex, yielded without it. A store of hashed keys returns
// false at once.
func (t *Table) Keys(yield func(key string) bool) bool { return keyed.Keys(t.layout(), yield) }

// appendKeys appends the keys of sh's table to keys. It requires sh.mu.
func (t *Table) appendKeys(sh *shard, keys []string) []string {
	if tb := sh.tab.Load(); tb != nil {
		for i := range tb.n {
			tag := tb.slot(i)[0].Load()
			if tag == 0 || tb.slot(i)[1].Load() == t.tomb {
				continue
			}
			keys = append(keys, tb.name(i))
		}
	}
	return keys
}

// name returns the key of slot i of a table of full keys: its bytes from
// the slot's key words (shortKey's layout, whose byte j of the words is the
// key's byte j), or the long key.
func (t *tab) name(i uint64) string {
	kw := t.key(i)
	k0, k1 := kw[0].Load(), kw[1].Load()
	if k1 == longMark {
		return t.long(i)
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], k0)
	binary.LittleEndian.PutUint64(b[8:], k1)
	return string(b[:k1>>56])
}
