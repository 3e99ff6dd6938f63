package atomic

import (
	"hash/maphash"
	"strings"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/migrate"
	"github.com/admit-go/admit/internal/reservation"
)

// Every keyed store of New and NewLimits is a migrate.Store: a
// policy.Service Reload moves keys out of it one by one (Take), into it
// (Put), over its listed keys (Keys), and has its say over the keys it does
// not hold through the hooks (SetHooks). docs/design.md ("How a key moves")
// has the protocol.
//
// # Take
//
// Take freezes the key's cell by the eviction's move (keyed.go): a CAS of
// the cell's value to the tombstone, here from whatever state it holds,
// not only a fresh one; a held cell is frozen under its stripe's mutex,
// which every call on a held cell takes, so that its record is read and
// dropped (with any hold: a reservation made before Take cannot be
// cancelled after it) in the same critical section as the cell is buried.
// The freeze is Take's linearization point. A call that published on the
// cell before it is in the state taken; a call that loaded the cell before
// it and tries to publish after fails its CAS, or its stripe's check, and
// loads the tombstone; a call that loads the cell after it finds the
// tombstone. Either way it has published nothing: it helps unlink the
// cell and looks the key up again, as after an eviction, and finds it
// missing, which leads it to the hooks.
//
// The tempting wrong version removes the cell from the map, then reads its
// state: a call that loaded the cell before the removal still holds it, and
// its CAS, which nothing makes fail, admits on a cell that no longer
// belongs to the store, after the state was read. The admission is in
// neither store, and the key passes it twice.
//
// Take freezes and removes the cell inside the map's Compute, under the
// lock of the key's bucket, and uncounts it as an unlink does. The
// insertion of a missing key, and the hooks' Keep with it, runs under the
// same lock (keyed.obtain says why that matters). Take leaves the floor as
// it is, as Reset does: the key was not judged fresh. The frozen cell stays
// in its ring until a sweep meets it and drops it.
//
// # Put, Keys
//
// Put inserts the key with the given state, its own copy of the key, in a
// new cell that no call can reach before it is in the map: the state's
// value, or, for a state its value cannot hold (a token bucket past its
// word's horizon), the held value with the state in a record, as an
// admission spills it. It counts the key against WithMaxKeys even beyond
// the bound, rather than drop a carried state: new keys then find the
// store full until evictions bring the count down. A cell of the key that
// is a tombstone is a missing key: Put unlinks it and inserts.
//
// Keys lists the keys by the map's Range, which copies each bucket's
// entries under its lock and calls back with no lock held, so that the
// caller may Take each key; it skips tombstones. An atomic store keeps full
// keys (New and NewLimits refuse WithHashedKeys), so it always has keys to
// give.
//
// # The hooks
//
// The hooks are read on the path of a missing key only (keyed.missing),
// never on the path of a stored one: a store without hooks pays nothing
// for them there. On that path Adopt is called first, before the store
// takes any lock of its own (it may Take the key from another store and
// Put it here), and the key is looked up again; a cell found then is
// decided on, Keep unasked. Otherwise Keep is asked, under the key's bucket
// lock, right before the key would be inserted; every call on a missing
// key asks it, probes and denials included, which insert nothing, since a
// key that moved has its state elsewhere and a probe here would report a
// fresh one. A call Keep refuses stores nothing: decide returns redirected,
// and the caller (Allow, AllowN, AllowNWhich), with no lock held, returns
// Redirect's decision, and for AllowNWhich its index, unchanged. A Keep
// without a Redirect has nowhere to send a call, and keeps every key.
//
// A reservation Keep refuses is Redirect's decision, as in the map store
// and the table: an admission is a reservation due now that cannot be
// cancelled (the store that admitted it keeps no record of it); a denial
// refuses the reservation, taking nothing, with the denial's RetryAfter as
// its Delay, so that admit.WaitKeyN sleeps that long and asks again.
// Waiters on a moved key are polled rather than paced until their caller
// reaches the key's new store.

var (
	_ migrate.Store = keyedTokenBucket{}
	_ migrate.Store = keyedFixedWindow{}
	_ migrate.Store = keyedSlidingCounter{}
	_ migrate.Store = keyedSlidingCounterSnapshot{}
	_ migrate.Store = keyedLimits[snapCell, *snapCell]{}
	_ migrate.Store = keyedLimitsReserver[pairCell, *pairCell]{}
)

// redirected is the Verdict decide returns for a call on a missing key
// that the hooks' Keep refused: no Verdict has a negative Remaining.
var redirected = kernel.Verdict{Remaining: -1}

// Limits implements [migrate.Store]: the store's rule, as one-rule Limits.
func (l *keyed[C, PC, K]) Limits() admit.Limits { return l.limits }

// SetHooks implements [migrate.Store].
func (l *keyed[C, PC, K]) SetHooks(h *migrate.Hooks) { l.hooks.Store(h) }

// Take implements [migrate.Store]. Under the lock of key's bucket of the
// map it freezes the key's cell (kcell.take), writing its state to into,
// removes the cell and uncounts it. A cell that was a tombstone already (an
// eviction's, not yet unlinked) is removed too, and Take reports false: the
// key was missing.
func (l *keyed[C, PC, K]) Take(key string, into []kernel.PartState) bool {
	taken, deleted := false, false
	l.m.Compute(key, func(c *C, loaded bool) (*C, bool) {
		if loaded {
			taken, deleted = PC(c).take(l.k, into), true
		}
		return nil, true // delete the key, if the map holds it
	})
	if deleted && l.maxKeys > 0 {
		l.keys.Release(1)
	}
	return taken
}

// Put implements [migrate.Store]. from must hold states of the store's
// limits, as kernel.Convert or Take writes them. The key is counted against
// WithMaxKeys even beyond the bound: a carried state is never dropped.
func (l *keyed[C, PC, K]) Put(key string, from []kernel.PartState) bool {
	if l.maxKeys > 0 {
		l.keys.Release(-1) // counted unconditionally, beyond the bound if need be
	}
	name := strings.Clone(key) // the map's own copy: the caller may reuse key's memory
	for {
		var created *C
		c, loaded := l.m.LoadOrCompute(name, func() *C {
			created = new(C)
			PC(created).setKey(name)
			PC(created).set(l.k, from) // before any call can reach it
			return created
		})
		if !loaded {
			h := maphash.String(l.seed, name)
			l.track(&l.rings[h>>l.shift], created, l.clock.Now())
			return true
		}
		if !PC(c).buried(l.k) {
			if l.maxKeys > 0 {
				l.keys.Release(1)
			}
			return false
		}
		l.unlink(c) // a tombstone: the key is missing; unlink it and insert
	}
}

// Keys implements [migrate.Store]: the keys of the map's Range that are
// not tombstones, yielded with no lock held.
func (l *keyed[C, PC, K]) Keys(yield func(key string) bool) bool {
	l.m.Range(func(key string, c *C) bool {
		return PC(c).buried(l.k) || yield(key)
	})
	return true
}

// redirect is the Decision of a call for n on key that the hooks' Keep
// refused: Redirect's, unchanged. Should the hooks have gone since, the
// store decides the call as any call without hooks.
func (l *keyed[C, PC, K]) redirect(key string, n int) admit.Decision {
	if hk := l.hooks.Load(); hk != nil && hk.Redirect != nil {
		d, _ := hk.Redirect(key, n)
		return d
	}
	return l.AllowN(key, n)
}

// reserveElsewhere is ReserveN for a key the hooks' Keep refused: the
// reservation is Redirect's decision, which reserves nothing ahead (see
// the file comment). moved is false if the hooks have gone since: the
// caller reserves as without hooks.
func (l *keyed[C, PC, K]) reserveElsewhere(key string, n int) (r admit.Reservation, ok, moved bool) {
	hk := l.hooks.Load()
	if hk == nil || hk.Redirect == nil {
		return r, false, false
	}
	d, _ := hk.Redirect(key, n)
	if d.Allowed {
		return reservation.New(0, n, 0), true, true
	}
	return reservation.New(d.RetryAfter, n, 0), false, true
}

// Take implements [migrate.Store]; see keyed.Take.
func (l keyedLimits[C, PC]) Take(key string, into []kernel.PartState) bool {
	return l.st.Take(key, into)
}

// Put implements [migrate.Store]; see keyed.Put.
func (l keyedLimits[C, PC]) Put(key string, from []kernel.PartState) bool {
	return l.st.Put(key, from)
}

// Keys implements [migrate.Store]; see keyed.Keys.
func (l keyedLimits[C, PC]) Keys(yield func(key string) bool) bool { return l.st.Keys(yield) }

// SetHooks implements [migrate.Store].
func (l keyedLimits[C, PC]) SetHooks(h *migrate.Hooks) { l.st.SetHooks(h) }

// redirect is keyed.redirect for a composite, with Redirect's index.
func (l keyedLimits[C, PC]) redirect(key string, n int) (admit.Decision, int) {
	if hk := l.st.hooks.Load(); hk != nil && hk.Redirect != nil {
		return hk.Redirect(key, n)
	}
	return l.AllowNWhich(key, n)
}

// The cells' part of Take and Put (kcell.take, set and buried). Each take
// is a CAS loop from the value it loads to the tombstone, and each set
// writes a cell no other call can reach yet, so a plain store would do;
// set still goes through the cell's own publication (a CAS, a spill) where
// it has one, so that a held state gets its record as an admission's does.

func (c *tbCell) take(k *tbKernel, into []kernel.PartState) bool {
	for {
		old := c.w.Load()
		switch old {
		case tbTombstone:
			return false
		case tbHeld:
			if s, ok := takeHeld(k, c, unsafe.Pointer(c)); ok {
				into[0] = kernel.PartState{}
				into[0].SetTB(s)
				return true
			}
			continue // released or buried before the mutex: load again
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, tbTombstone) {
			into[0] = kernel.PartState{}
			into[0].SetTB(k.Unpack(old))
			return true
		}
	}
}

func (c *tbCell) set(k *tbKernel, from []kernel.PartState) {
	s := from[0].TB()
	if w, ok := k.Pack(s); ok {
		c.w.Store(w)
		return
	}
	spill(k, c, unsafe.Pointer(c), 0, s) // past the word's horizon; the new cell's value is 0
}

func (c *tbCell) buried(*tbKernel) bool { return c.w.Load() == tbTombstone }

// takeHeld freezes the held cell c for a Take, under its stripe's mutex:
// it returns the state of c's record, deletes the record (and with it any
// hold) and buries c. It reports false, doing nothing, if c is no longer
// held (the caller loads it again).
func takeHeld[V comparable, C holdCell[V]](k *tbKernel, c C, ptr unsafe.Pointer) (s kernel.TokenBucketState, ok bool) {
	st := k.holds.of(ptr)
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, held, _ := c.State(k, c.Load()); !held {
		return s, false
	}
	s = st.m.M[ptr].State
	st.m.Delete(ptr)
	c.Bury()
	return s, true
}

func (c *fwCell) take(k *fwCodec, into []kernel.PartState) bool {
	for {
		old := c.w.Load()
		if old == k.tomb {
			return false
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, k.tomb) {
			into[0] = kernel.PartState{}
			into[0].SetFW(k.unpack(old))
			return true
		}
	}
}

// set leaves a window with nothing counted as the zero word, a fresh key's:
// its packing with index bits could be the tombstone.
func (c *fwCell) set(k *fwCodec, from []kernel.PartState) {
	if s := from[0].FW(); s.Count != 0 {
		c.w.Store(k.pack(s))
	}
}

func (c *fwCell) buried(k *fwCodec) bool { return c.w.Load() == k.tomb }

func (c *scCell) take(k *scCodec, into []kernel.PartState) bool {
	for {
		old := c.w.Load()
		if old == k.tomb {
			return false
		}
		hook.Between(hook.BeforeCAS)
		if c.w.CompareAndSwap(old, k.tomb) {
			into[0] = kernel.PartState{}
			into[0].SetSC(k.unpack(old))
			return true
		}
	}
}

// set leaves a counter with nothing counted as the zero word, as
// fwCell.set does.
func (c *scCell) set(k *scCodec, from []kernel.PartState) {
	if s := from[0].SC(); s.Prev != 0 || s.Curr != 0 {
		c.w.Store(k.pack(s))
	}
}

func (c *scCell) buried(k *scCodec) bool { return c.w.Load() == k.tomb }

func (c *scSnapCell) take(_ *kernel.SlidingCounter, into []kernel.PartState) bool {
	for {
		cur := c.p.Load()
		if cur == scSnapTombstone {
			return false
		}
		hook.Between(hook.BeforeCAS)
		if c.p.CompareAndSwap(cur, scSnapTombstone) {
			into[0] = kernel.PartState{}
			if cur != nil {
				into[0].SetSC(*cur)
			}
			return true
		}
	}
}

func (c *scSnapCell) set(_ *kernel.SlidingCounter, from []kernel.PartState) {
	if s := from[0].SC(); s.Prev != 0 || s.Curr != 0 {
		c.p.Store(&s)
	}
}

func (c *scSnapCell) buried(*kernel.SlidingCounter) bool { return c.p.Load() == scSnapTombstone }

func (c *snapCell) take(k *compKernel, into []kernel.PartState) bool {
	return compTake(k, c, unsafe.Pointer(c), into)
}

func (c *snapCell) set(k *compKernel, from []kernel.PartState) {
	compSet(k, c, unsafe.Pointer(c), from)
}

func (c *snapCell) buried(k *compKernel) bool { return c.load() == k.tombVal }

func (c *pairCell) take(k *compKernel, into []kernel.PartState) bool {
	return compTake(k, c, unsafe.Pointer(c), into)
}

func (c *pairCell) set(k *compKernel, from []kernel.PartState) {
	compSet(k, c, unsafe.Pointer(c), from)
}

func (c *pairCell) buried(k *compKernel) bool { return c.load() == k.tombVal }

// compTake is kcell.take on a composite cell: a CAS loop from the value it
// loads (read at one instant, as compDecide reads it) to the tombstone; a
// held cell is frozen under its stripe's mutex (compTakeHeld).
func compTake(k *compKernel, c compCell, ptr unsafe.Pointer, into []kernel.PartState) bool {
	for {
		old := c.load()
		switch old {
		case k.tombVal:
			return false
		case k.heldVal:
			if compTakeHeld(k, c, ptr, into) {
				return true
			}
			continue // released or buried before the mutex: load again
		}
		k.decode(old, into[:k.n])
		hook.Between(hook.BeforeCAS)
		if c.cas(old, k.tombVal) {
			return true
		}
	}
}

// compTakeHeld is takeHeld for a composite cell: it writes the parts'
// states of c's record to into, deletes the record and buries c, under its
// stripe's mutex, or reports false if c is no longer held.
func compTakeHeld(k *compKernel, c compCell, ptr unsafe.Pointer, into []kernel.PartState) bool {
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	if c.load() != k.heldVal {
		return false
	}
	copy(into[:k.n], st.m.M[ptr].parts[:k.n])
	st.m.Delete(ptr)
	c.cas(k.heldVal, k.tombVal)
	return true
}

// compSet is kcell.set on a composite cell, whose value is fresh: the
// parts' states encoded, or, for a pair whose token bucket is past its
// word's horizon, held with a record of them (compSpill).
func compSet(k *compKernel, c compCell, ptr unsafe.Pointer, from []kernel.PartState) {
	s := from[:k.n]
	if !k.fits(s) {
		compSpill(k, c, ptr, compVal{}, s)
		return
	}
	var spare []kernel.PartState
	c.cas(compVal{}, k.encode(s, &spare))
}
