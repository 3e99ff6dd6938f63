package atomic

import (
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	satomic "sync/atomic"
	"time"
	"unsafe"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/evict"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
	"github.com/admit-go/admit/internal/migrate"
	"github.com/admit-go/admit/internal/plumb"
)

// This file is the keyed store: a concurrent map from key to cell, with
// lossless eviction of idle keys by tombstones.
//
// # The eviction protocol
//
// A cell is a state word (or snapshot pointer), the same cell a single-key
// limiter uses (tokenbucket.go, window.go), with one value reserved as its
// tombstone, which no state ever takes. A cell is evicted in three steps:
//
//  1. The sweeper loads the cell's value v and decides that v is fresh at
//     its reading at (kernel.Fresh: equivalent to a new key's state at at
//     and at every later reading).
//  2. It raises the store's floor to at, then swaps v for the tombstone by
//     CompareAndSwap(v, tombstone). The CAS succeeds only if the value is
//     still v, a state known to be fresh: no admission can be lost. (Even
//     an ABA, the value leaving v and coming back, is harmless, since the
//     check is on the value. Admissions only move a state word forward, but
//     a cancelled reservation of a token bucket moves it back: see
//     keyed_reserve.go.) A tombstone is final: no CAS ever replaces it.
//     (A Take, migrate.go, also swaps a cell's value for the tombstone, from
//     whatever state it holds, and removes the cell from the map itself.)
//  3. It unlinks the cell with xsync's Compute, deleting the key only if the
//     map still maps it to this very cell.
//
// A call that loads the tombstone, or whose CAS fails and then loads it, has
// published nothing: it helps unlink the cell (step 3) and starts over from
// the map lookup, where it finds the key missing or recreated. So no call
// ever admits on a cell that has left the map (an orphan), and each key has
// one budget at a time. A call that finds its key missing decides at
// max(its reading, floor): the key may have been evicted as fresh at floor,
// and a fresh state is equivalent to a new one only from floor on (see
// docs/keyed-stores.md for why calls on present keys need no such clamp).
// Step 2 raises the floor before the tombstone is visible, and sequentially
// consistent atomics order it before any call's observation of the
// tombstone or of the key's absence, after which the call reads the floor.
//
// # Finding idle keys
//
// xsync's Range always starts from its first bucket, so it cannot sweep a
// little at a time. Each new cell is instead appended to one of 2^k rings
// (k from admit.WithShards), chosen by a seeded hash of its key: FIFO queues
// of cells, each guarded by a mutex taken only by insertions and sweeps,
// never by calls on stored keys. A sweep pops cells from a ring's head,
// evicts the fresh ones and appends the others back (a second chance, as
// the CLOCK algorithm does), so every cell is examined once per pass. A
// sweep that meets a tombstone in a ring (a cell a Take froze and removed
// from the map, migrate.go) drops it from the ring.

// paddedInt64 is an atomic word on a 128-byte stretch of its own, so that
// writing it does not slow down the reads of its neighbours.
type paddedInt64 struct {
	_ [layout.CacheLinePad]byte
	n satomic.Int64
	_ [layout.CacheLinePad - 8]byte
}

// raise makes w at least v.
func (w *paddedInt64) raise(v int64) {
	for {
		old := w.n.Load()
		if old >= v || w.n.CompareAndSwap(old, v) {
			return
		}
	}
}

// kcell is one key's cell in a keyed store (tokenbucket.go, window.go); K is
// what it needs to decide. The single-key limiters use the same cells, by
// their decide method, without a name and never meeting a tombstone.
type kcell[K any] interface {
	// decideKeyed decides a request for n at reading now. live is false if
	// the cell is a tombstone: nothing was decided, and the caller must
	// unlink the cell and start over from the map. pause, when not nil
	// (tests only), is called once, after the first load of the cell's value.
	decideKeyed(k K, now time.Duration, n int, pause func()) (v kernel.Verdict, live bool)
	// allowOne is decideKeyed(k, now, 1, pause)'s fast path, the admission
	// the single-key limiter's Allow makes in its own frame: it loads the
	// cell's value (then calls pause, when not nil), admits one by the
	// kernel's AllowOne and one CAS, retrying on a failed CAS, and returns
	// the admission's Verdict with ok true. It declines with ok false,
	// having published nothing, on whatever AllowOne declines (a denial, a
	// reading outside its range), the tombstone and a held value; the
	// caller then decides by decideKeyed.
	allowOne(k K, now time.Duration, pause func()) (v kernel.Verdict, ok bool)
	// evict turns the cell into a tombstone if its value is fresh at reading
	// at, raising floor to at first; it reports whether it did.
	evict(k K, at time.Duration, floor *paddedInt64) bool
	// reset makes the cell's value a fresh state (the zero word, or the nil
	// snapshot), dropping a held cell's record; it leaves a tombstone as it
	// is. See keyed.Reset.
	reset(k K)
	// take freezes the cell for a Take (migrate.go): it swaps the cell's
	// value for the tombstone and writes the state it held to into, as parts
	// of the store's limits (a held cell's from its record, which it drops,
	// hold and all). It reports false, writing nothing, if the cell is a
	// tombstone already.
	take(k K, into []kernel.PartState) bool
	// set gives a new cell, which no call can reach yet, the state from
	// (parts of the store's limits) for a Put (migrate.go): the state's
	// value, or, for a state its value cannot hold, the held value with the
	// state in a record, as an admission spills it.
	set(k K, from []kernel.PartState)
	// buried reports whether the cell is a tombstone.
	buried(k K) bool
	// key returns the cell's key, the map's own copy.
	key() string
	setKey(string)
}

// ringFields mirrors the fields of ring, whose size cannot be taken in a
// constant expression because ring is generic. TestRingSize pins the two.
type ringFields struct {
	mu    sync.Mutex
	cells []unsafe.Pointer
	head  int
}

// ring is a FIFO of cells awaiting examination by the sweeper, oldest first.
// Every cell in the map is in exactly one ring, from just after its creation
// until a sweep evicts it (or, for a cell a Take froze, drops it).
type ring[C any] struct {
	mu    sync.Mutex
	cells []*C // guarded by mu: the queue is cells[head:]
	head  int  // guarded by mu
	_     [layout.CacheLinePad - unsafe.Sizeof(ringFields{})]byte
}

func (r *ring[C]) len() int { return len(r.cells) - r.head }

func (r *ring[C]) push(c *C) { r.cells = append(r.cells, c) }

func (r *ring[C]) pop() *C {
	c := r.cells[r.head]
	r.cells[r.head] = nil
	r.head++
	if r.head >= 64 && r.head*2 >= len(r.cells) {
		r.compact()
	}
	return c
}

// compact moves the queue to the front of its slice, or to a smaller slice
// once it uses a quarter of its capacity, so that memory follows the queue's
// length.
func (r *ring[C]) compact() {
	live := r.cells[r.head:]
	if cap(r.cells) > 64 && len(live) < cap(r.cells)/4 {
		r.cells = append(make([]*C, 0, 2*len(live)), live...)
	} else {
		n := copy(r.cells, live)
		clear(r.cells[n:])
		r.cells = r.cells[:n]
	}
	r.head = 0
}

// keyed is the keyed store: a concurrent map from key to cell, with rings of
// cells for the sweeper. PC is *C, the type whose methods are the cell's.
// New returns it wrapped in a type per cell that adds Allow (below).
type keyed[C any, PC interface {
	*C
	kcell[K]
}, K any] struct {
	m       *xsync.MapOf[string, *C]
	k       K
	rule    admit.Rule
	limits  admit.Limits // Limits: the rule's, or a composite's
	limit   int
	clock   clockref.Ref
	seed    maphash.Seed
	shift   uint          // a hash's ring is hash >> shift (64 for one ring: 0)
	maxKeys int64         // WithMaxKeys, or 0 for no bound
	horizon time.Duration // the longest a state can take to become fresh
	zero    C             // a fresh cell that is never stored: probes of missing keys decide on it
	rings   []ring[C]

	// floor is the newest reading at which a cell has been evicted
	// (math.MinInt64 before the first). See the eviction protocol above.
	floor paddedInt64
	keys  evict.Counter // keys stored (when maxKeys > 0), Stats' counts, makeRoom's cursor

	// pause, when set (by tests only), is called once, by the first call to
	// reach it, after it has loaded its key's cell and the cell's value.
	pause satomic.Pointer[func()]

	// hooks are a policy.Service's say over the keys the store does not
	// hold (nil: none), read only on a missing key's path (migrate.go).
	hooks satomic.Pointer[migrate.Hooks]
}

// makeKeyed returns the keyed store for cells C.
func makeKeyed[C any, PC interface {
	*C
	kcell[K]
}, K any](k K, rule admit.Rule, set plumb.Settings) *keyed[C, PC, K] {
	n := set.ShardCount()
	limits, _ := admit.NewLimits(rule) // the caller validated rule
	l := &keyed[C, PC, K]{
		m:       xsync.NewMapOf[string, *C](),
		k:       k,
		rule:    rule,
		limits:  limits,
		limit:   rule.Limit,
		clock:   clockref.New(set.Clock),
		seed:    maphash.MakeSeed(),
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		maxKeys: int64(set.MaxKeys),
		horizon: evict.Horizon(rule),
		rings:   make([]ring[C], n),
	}
	l.floor.n.Store(math.MinInt64)
	return l
}

// The stores New returns are keyed for each cell type, each wrapped in a
// type of its own (keyedTokenBucket, in keyed_reserve.go, also adds
// reservations) whose Allow is not generic. A generic type's method is
// reached from an interface through a wrapper that Go generates for the
// instantiation, which calls the method's shared body and copies the
// five-field Decision it returns once more (see kernel.Verdict): 32 of the
// 388 instructions of a keyed token bucket's admitted Allow on one key
// (callgrind, a step clock, the clock's read included). Each Allow below
// fills its own Decision from decide's Verdict, the one copy. AllowN,
// called less often, is keyed's.
type (
	keyedFixedWindow struct {
		*keyed[fwCell, *fwCell, *fwCodec]
	}
	keyedSlidingCounter struct {
		*keyed[scCell, *scCell, *scCodec]
	}
	keyedSlidingCounterSnapshot struct {
		*keyed[scSnapCell, *scSnapCell, *kernel.SlidingCounter]
	}
)

var (
	_ admit.StatsReporter = keyedTokenBucket{}
	_ admit.StatsReporter = keyedFixedWindow{}
	_ admit.StatsReporter = keyedSlidingCounter{}
	_ admit.StatsReporter = keyedSlidingCounterSnapshot{}
)

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1).
func (l keyedFixedWindow) Allow(key string) (d admit.Decision) {
	v := l.decide(key, 1)
	if v.Remaining < 0 {
		return l.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1).
func (l keyedSlidingCounter) Allow(key string) (d admit.Decision) {
	v := l.decide(key, 1)
	if v.Remaining < 0 {
		return l.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1).
func (l keyedSlidingCounterSnapshot) Allow(key string) (d admit.Decision) {
	v := l.decide(key, 1)
	if v.Remaining < 0 {
		return l.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// Rule implements [admit.Store].
func (l *keyed[C, PC, K]) Rule() admit.Rule { return l.rule }

// AllowN implements [admit.KeyedLimiter]. It fills its named result from
// decide's Verdict (see kernel.Verdict), as each store's Allow does, unless
// the Verdict is redirected: the hooks' Keep refused the missing key, and
// Redirect decides the call (migrate.go).
func (l *keyed[C, PC, K]) AllowN(key string, n int) (d admit.Decision) {
	v := l.decide(key, n)
	if v.Remaining < 0 {
		return l.redirect(key, n)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// decide is AllowN's loop: it looks key up, creating it if it is missing
// and the call would store something, and decides on its cell, starting
// over from the lookup when the cell is a tombstone. A missing key is where
// the hooks have their say (migrate.go): decide returns redirected for a
// key their Keep refused, deciding nothing.
//
// A request for one, the call most stores see most often, first takes the
// cell's fast path (kcell.allowOne): the kernel's AllowOne on the packed
// word and one CAS, as the single-key limiters' Allow does. The general
// kernel (decideKeyed: unpack, Decide, pack, CAS) still decides every other
// n, every denial, a held or spilled bucket, readings outside AllowOne's
// range and the snapshot cells, on the value it loads again. The fast path
// publishes nothing on the tombstone, so the eviction protocol is the same
// on both paths. The clock read and the test pause's check are written out
// here, as TokenBucket.Allow does, so that they cost no call.
func (l *keyed[C, PC, K]) decide(key string, n int) kernel.Verdict {
	var now time.Duration
	if l.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else if l.clock.Coarse == nil {
		now = l.clock.C.Now()
	} else {
		now = l.clock.CoarseNow()
	}
	var pause func()
	if l.pause.Load() != nil {
		pause = l.takePause()
	}
	for {
		c, ok := l.m.Load(key)
		hook.Between(hook.AfterLookup)
		if !ok {
			var v kernel.Verdict
			if c, v, ok = l.create(key, &now, n); !ok {
				return v
			}
		}
		if n == 1 {
			if v, ok := PC(c).allowOne(l.k, now, pause); ok {
				return v
			}
			pause = nil // called after the fast path's load
		}
		if v, live := PC(c).decideKeyed(l.k, now, n, pause); live {
			return v
		}
		// A tombstone: help unlink it, then look the key up again.
		pause = nil
		l.unlink(c)
	}
}

// takePause returns the test pause (see the pause field) if this call is
// the first to reach it, and nil otherwise.
func (l *keyed[C, PC, K]) takePause() func() {
	if p := l.pause.Load(); p != nil && l.pause.CompareAndSwap(p, nil) {
		return *p
	}
	return nil
}

// create is the path of a call that found key missing. It clamps *now to the
// floor, then returns the key's cell, creating it (a goroutine racing on the
// same key gets the same cell), or, with ok false, the call's Verdict when
// it needs no cell: a probe or a request that can never pass (which leave no
// state behind), a new key in a full store, or redirected, for a key the
// hooks' Keep refused.
func (l *keyed[C, PC, K]) create(key string, now *time.Duration, n int) (c *C, v kernel.Verdict, ok bool) {
	*now = max(*now, time.Duration(l.floor.n.Load())) // the key may have been evicted as fresh at floor
	c, wait, m := l.missing(key, *now, n > 0 && n <= l.limit)
	switch m {
	case missCell:
		return c, v, true
	case missFull:
		return nil, kernel.Verdict{RetryAfter: wait}, false
	case missMoved:
		return nil, redirected, false
	}
	v, _ = PC(&l.zero).decideKeyed(l.k, *now, n, nil) // publishes nothing for these n
	return nil, v, false
}

// missed is what the path of a missing key found.
type missed uint8

const (
	missCell  missed = iota // the key's cell: created, put by Adopt, or stored meanwhile by another call
	missFresh               // no cell, none to create (the call stores nothing): decide on a fresh state
	missFull                // a full store with no room to make: deny, with the wait
	missMoved               // the hooks' Keep refused the key: Redirect decides the call
)

// missing is the path of a call that found key missing and read now
// (already clamped to the floor); store says whether its decision would
// store something (an admission, or a reservation that takes tokens). With
// hooks, it calls Adopt first, before any lock, and decides on the cell
// Adopt put here; then (hooks or not) obtain creates the cell, Keep
// permitting, if store, and otherwise only asks Keep.
func (l *keyed[C, PC, K]) missing(key string, now time.Duration, store bool) (c *C, wait time.Duration, m missed) {
	hk := l.hooks.Load()
	if hk == nil {
		if !store {
			return nil, 0, missFresh
		}
		return l.obtain(key, now, true, keeper{})
	}
	var keep keeper
	if hk.Adopt != nil {
		keep.adopted = hk.Adopt(key)
		if c, ok := l.m.Load(key); ok {
			return c, 0, missCell
		}
	}
	if hk.Redirect != nil { // a Keep without a Redirect has nowhere to send the call
		keep.keep = hk.Keep
	}
	if !store && keep.keep == nil {
		return nil, 0, missFresh
	}
	return l.obtain(key, now, store, keep)
}

// keeper is the hooks' Keep as obtain asks it: with the Epoch the call's
// Adopt returned (0 if it ran none). The zero keeper keeps every key.
type keeper struct {
	keep    func(string, migrate.Epoch) bool
	adopted migrate.Epoch
}

// refuses reports whether the hooks' Keep refuses key.
func (k keeper) refuses(key string) bool { return k.keep != nil && !k.keep(key, k.adopted) }

// obtain returns key's cell for a call that found key missing and read now
// (already clamped to the floor): if store, it creates the cell (a
// goroutine racing on the same key gets the same cell) or, in a full store
// with no room to make, returns missFull and the RetryAfter of the denial,
// which it counts (Stats: every caller denies on missFull); otherwise it
// creates nothing, and returns a cell only if another call has
// stored one meanwhile. With keep (the hooks' Keep; the zero keeper for
// none), it asks keep right before it would insert the key, and returns
// missMoved, creating nothing, if keep refuses it.
//
// The insertion, and keep with it, runs in the map's LoadOrTryCompute,
// under the lock of the key's bucket, which Take (migrate.go) holds too
// while it freezes and removes the key's cell: a Take and an insertion of
// one key are therefore ordered. An insertion that keep let in before a
// Take is in the map when the Take looks, and is taken; one after it asks
// keep after the Take, which a Reload makes only once its new snapshot is
// published, so keep refuses it. Were keep asked before the lock, a call
// could be let in by the old snapshot, lose the processor while a Reload
// published the new one and took (or adopted) the key, and then insert it
// with an admission that no Take would ever carry. The map's Range, which
// Keys lists with, copies each bucket under the same lock, so an insertion
// that keep let in before the snapshot changed is also in every Keys that
// starts after.
func (l *keyed[C, PC, K]) obtain(key string, now time.Duration, store bool, keep keeper) (c *C, wait time.Duration, m missed) {
	h := maphash.String(l.seed, key)
	r := &l.rings[h>>l.shift]
	room, counted := store, false
	if store && l.maxKeys > 0 {
		if room = l.reserve(); !room {
			wait, room = l.makeRoom(r, now)
		}
		counted = room
		if !room && keep.keep == nil {
			if c, ok := l.m.Load(key); ok {
				return c, 0, missCell // created meanwhile by another call: no room needed
			}
			l.keys.Denied()
			return nil, wait, missFull
		}
	}
	name := key
	if room {
		name = strings.Clone(key) // the map's own copy: the caller may reuse key's memory
	}
	var created *C
	m = missFresh
	c, loaded := l.m.LoadOrTryCompute(name, func() (*C, bool) {
		switch {
		case keep.refuses(key):
			m = missMoved
		case !store:
		case !room:
			m = missFull
		default:
			created = new(C)
			PC(created).setKey(name)
			return created, false
		}
		return nil, true // store nothing
	})
	if counted && created == nil {
		l.keys.Release(1) // another call created it, or none was: give back our room
	}
	switch {
	case loaded:
		return c, 0, missCell
	case created == nil:
		if m == missFull {
			l.keys.Denied()
		}
		return nil, wait, m
	}
	l.track(r, created, now)
	return c, 0, missCell
}

// reserve counts one more key if the store has room for it.
func (l *keyed[C, PC, K]) reserve() bool {
	return l.keys.Reserve(l.maxKeys)
}

// unlink removes the tombstone c from the map, if the map still maps c's key
// to c, and then uncounts the key: exactly once, by the Compute that deletes.
func (l *keyed[C, PC, K]) unlink(c *C) {
	deleted := false
	l.m.Compute(PC(c).key(), func(old *C, loaded bool) (*C, bool) {
		if loaded && old == c {
			deleted = true
			return nil, true
		}
		return old, !loaded // keep what is there; store nothing if nothing is
	})
	if deleted && l.maxKeys > 0 {
		l.keys.Release(1)
	}
}

// track appends a new cell to its ring and, once the ring is long enough,
// sweeps a few cells from the ring's head.
func (l *keyed[C, PC, K]) track(r *ring[C], c *C, now time.Duration) {
	var dead [evict.SweepBatch]*C
	r.mu.Lock()
	r.push(c)
	ndead := 0
	if r.len() >= evict.SweepMinLen {
		at := evict.Reading(now)
		for range evict.SweepBatch {
			c := r.pop()
			if PC(c).evict(l.k, at, &l.floor) {
				dead[ndead] = c
				ndead++
			} else if !PC(c).buried(l.k) { // a tombstone here was taken: dropped
				r.push(c) // a second chance: back of the queue
			}
		}
	}
	r.mu.Unlock()
	l.keys.Evicted(ndead)
	for _, c := range dead[:ndead] {
		l.unlink(c)
	}
}

// makeRoom applies the full-store policy (evict.MakeRoom) for a new key of
// ring own. Rings are scanned under their own mutexes, never held here.
func (l *keyed[C, PC, K]) makeRoom(own *ring[C], now time.Duration) (time.Duration, bool) {
	return evict.MakeRoom(&l.keys, l.maxKeys, l.rings, own, now, l.horizon,
		func(r *ring[C], _ bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
			return l.scan(r, now, at, limit, soonest)
		})
}

// scan examines up to limit cells from the head of ring r, evicts those fresh
// at reading at and puts the others back at the tail; for those, if soonest
// is not nil, it lowers *soonest to the time from now until they become
// fresh. It unlinks the evicted cells after releasing r's lock, and returns
// how many cells it examined and evicted. A tombstone it pops (a cell a
// Take froze) is no key of the store's: it drops it, and counts it as
// neither.
func (l *keyed[C, PC, K]) scan(r *ring[C], now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int) {
	var dead [evict.FullScan]*C
	r.mu.Lock()
	for range min(limit, evict.FullScan, r.len()) {
		c := r.pop()
		if PC(c).evict(l.k, at, &l.floor) {
			examined++
			dead[evicted] = c
			evicted++
			continue
		}
		if PC(c).buried(l.k) {
			continue
		}
		examined++
		// A probe (n == 0) publishes nothing and reports how long the state
		// takes to become fresh if nothing else arrives.
		if soonest != nil {
			if v, live := PC(c).decideKeyed(l.k, now, 0, nil); live {
				*soonest = min(*soonest, v.ResetAfter)
			}
		}
		r.push(c)
	}
	r.mu.Unlock()
	l.keys.Evicted(evicted)
	for _, c := range dead[:evicted] {
		l.unlink(c)
	}
	return examined, evicted
}

// Reset implements [admit.Resetter]. It makes key's cell fresh where it is
// (kcell.reset): the cell stays in the map, and eviction collects it as it
// collects any fresh cell. A key not in the map is fresh already.
//
// Linearization point: the cell's successful CompareAndSwap to the fresh
// value (for a held cell, the critical section of its stripe's mutex), or
// the Load that found the value fresh already. A cell found a tombstone was
// evicted as fresh (or taken, migrate.go: its state went elsewhere), and its
// key was absent from the map (so fresh here) at a moment within the call:
// when the map returned the cell, if it was a tombstone then, or else when
// the eviction's (or the Take's) CAS buried it; the call linearizes there,
// and a call that has created the key again since is ordered after it.
func (l *keyed[C, PC, K]) Reset(key string) {
	if c, ok := l.m.Load(key); ok {
		PC(c).reset(l.k)
	}
}

// Len implements [admit.Store]. It is xsync's count of the map's entries, which
// may not include all of the latest operations in presence of concurrent
// modifications.
func (l *keyed[C, PC, K]) Len() int { return l.m.Size() }

// Stats implements [admit.StatsReporter]: Len, the WithMaxKeys bound, and
// the evictions (a cell buried by track, scan or sweepAt) and full-store
// denials (obtain) counted since the store was built; a Take's cell is
// neither. It costs what Len costs, and takes no lock; the calls on stored
// keys count nothing.
func (l *keyed[C, PC, K]) Stats() admit.StoreStats {
	return l.keys.Stats(l.Len(), l.maxKeys)
}

// Sweep implements [admit.Store].
func (l *keyed[C, PC, K]) Sweep() int {
	return l.sweepAt(evict.Reading(l.clock.Now()))
}

// sweepAt evicts every cell that is fresh at reading at, ring by ring, and
// returns how many it evicted. It holds a ring's lock while it examines the
// ring, and unlinks the evicted cells after releasing it.
func (l *keyed[C, PC, K]) sweepAt(at time.Duration) int {
	total := 0
	var dead []*C
	for i := range l.rings {
		r := &l.rings[i]
		dead = dead[:0]
		r.mu.Lock()
		kept := r.cells[:0]
		for _, c := range r.cells[r.head:] {
			if PC(c).evict(l.k, at, &l.floor) {
				dead = append(dead, c)
			} else if !PC(c).buried(l.k) { // a tombstone here was taken: dropped
				kept = append(kept, c)
			}
		}
		clear(r.cells[len(kept):])
		r.cells, r.head = kept, 0
		r.compact()
		r.mu.Unlock()
		l.keys.Evicted(len(dead))
		for _, c := range dead {
			l.unlink(c)
		}
		total += len(dead)
	}
	return total
}
