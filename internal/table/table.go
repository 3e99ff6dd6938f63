// Package table is the keyed store behind atomic.New, for every rule whose
// state packs into one 64-bit word (every token bucket and fixed window, the
// sliding counters of Limit < 2^16 with long enough windows): a hash-sharded
// open-addressing table whose slots hold each key's tag, state word and
// short key inline, decided lock-free by a CAS on the slot's state word.
// Shard mutexes guard only insertions, rebuilds, eviction and the token
// bucket's held states. docs/keyed-stores.md ("The lock-free table") has the
// layout, the protocols and their linearization points.
package table

import (
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/evict"
	"github.com/admit-go/admit/internal/held"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/layout"
	"github.com/admit-go/admit/internal/migrate"
	"github.com/admit-go/admit/internal/plumb"
)

// The algorithms a table decides.
const (
	algTB = iota
	algFW
	algSC
)

// The token bucket's sentinels: words kernel.TokenBucket.Pack never returns.
const (
	tbTomb = 1
	tbHeld = 2
)

// Packs reports whether a table can hold rule's states: every token bucket
// and fixed window, and the sliding counters whose state packs
// (kernel.SlidingCounter.Word). Other rules need a store that keeps states
// of more than one word (package mapstore).
func Packs(rule admit.Rule) bool {
	switch rule.Algorithm {
	case admit.TokenBucket, admit.FixedWindow:
		return true
	case admit.SlidingCounter:
		_, ok := kernel.NewSlidingCounter(rule).Word()
		return ok
	}
	return false
}

// shardFields mirrors the fields of shard; TestShardSize pins the two.
type shardFields struct {
	mu     sync.Mutex
	tab    atomic.Pointer[tab]
	floor  time.Duration
	cursor uint64
	holds  evict.Map[recKey, held.Rec]
}

// shard is one part of the store: a table, and the mutex that guards its
// insertions, rebuilds, evictions and held states.
type shard struct {
	mu  sync.Mutex
	tab atomic.Pointer[tab] // nil until the first key; replaced only under mu

	// floor is guarded by mu. It is the newest reading at which a key of
	// this shard has been evicted (math.MinInt64 until the first eviction).
	// A call that finds its key missing (or a tombstone) decides at max(its
	// reading, floor): such a key may have been evicted because it was
	// fresh at floor, and a fresh state is equivalent to a new one only
	// from floor on. Calls on keys present use their own reading.
	floor time.Duration

	cursor uint64 // guarded by mu: the next slot an insertion's sweep examines

	// holds is guarded by mu: the records of the shard's held slots (token
	// bucket only), by key: held.Rec.
	holds evict.Map[recKey, held.Rec]

	_ [layout.CacheLinePad - unsafe.Sizeof(shardFields{})]byte
}

// recKey is a key as a table compares it: its tag and, with full keys, its
// slot's key words and, for a long key, the key. It is also the key of a
// held slot's record (records outlive a rebuild, which moves slots).
type recKey struct {
	tag, k0, k1 uint64
	long        string
}

// Store is the table store. It is immutable after New except for its
// shards and its counters (keys).
type Store struct {
	alg    uint8
	hashed bool
	stride uint // log2 of a slot's words: 1 with hashed keys, 2 with full keys
	shift  uint // a hash's shard is hash >> shift (64 for one shard: 0)
	sbits  uint // 64 - shift: the hash's bits that chose the shard
	tomb   uint64
	held   uint64 // the token bucket's held word; for the others a word no state takes

	tb  *kernel.TokenBucket
	fw  *kernel.FixedWindow
	fwp kernel.FixedWindowWord
	sc  *kernel.SlidingCounter
	scp kernel.SlidingCounterWord

	rule    admit.Rule
	limit   int
	clock   clockref.Ref
	seed    maphash.Seed
	mix     [3]uint64 // the seeds of mixKey, random per store
	maxKeys int64
	horizon time.Duration
	shards  []shard
	keys    evict.Counter // keys stored (when maxKeys > 0), Stats' counts, makeRoom's cursor

	// pause, when set (by tests only), is called once, by the first call to
	// reach it, after it has loaded its key's state word and before it
	// publishes (or, on the slow path, before it takes the shard's mutex).
	pause atomic.Pointer[func()]

	// hooks are the migrate.Hooks of the store's owner (nil: none), read
	// only on the paths of a key the table does not hold (see migrate.go).
	hooks atomic.Pointer[migrate.Hooks]
}

// New returns the table store for rule, which must pack (Packs), with the
// settings' clock, shards, key bound and key mode. A token bucket's store
// is also an admit.KeyedReserver.
func New(rule admit.Rule, set plumb.Settings) admit.Store {
	n := set.ShardCount()
	t := &Store{
		hashed:  set.HashedKeys,
		stride:  2,
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		rule:    rule,
		limit:   rule.Limit,
		clock:   clockref.New(set.Clock),
		seed:    maphash.MakeSeed(),
		mix:     [3]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64() | 1},
		maxKeys: int64(set.MaxKeys),
		horizon: evict.Horizon(rule),
		shards:  make([]shard, n),
	}
	t.sbits = 64 - t.shift
	if t.hashed {
		t.stride = 1
	}
	for i := range t.shards {
		t.shards[i].floor = math.MinInt64
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		t.alg, t.tb, t.tomb, t.held = algTB, kernel.NewTokenBucket(rule), tbTomb, tbHeld
		return reserver{t}
	case admit.FixedWindow:
		t.alg, t.fw = algFW, kernel.NewFixedWindow(rule)
		t.fwp = t.fw.Word()
		t.tomb, t.held = t.fwp.Spare(1), t.fwp.Spare(2)
	default:
		t.alg, t.sc = algSC, kernel.NewSlidingCounter(rule)
		t.scp, _ = t.sc.Word()
		t.tomb, t.held = t.scp.Spare(1), t.scp.Spare(2)
	}
	return t
}

// takePause returns the test pause (see the pause field) if this call is
// the first to reach it, and nil otherwise.
func (t *Store) takePause() func() {
	if p := t.pause.Load(); p != nil && t.pause.CompareAndSwap(p, nil) {
		return *p
	}
	return nil
}

// Rule implements [admit.Store].
func (t *Store) Rule() admit.Rule { return t.rule }

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1). It fills its named
// result from decide's Verdict (see kernel.Verdict), as AllowN does: a
// five-field Decision never stays in registers, so it is written once.
func (t *Store) Allow(key string) (d admit.Decision) {
	v := t.decideKey(key, 1)
	if v.Remaining < 0 {
		return t.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, t.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowN implements [admit.KeyedLimiter].
func (t *Store) AllowN(key string, n int) (d admit.Decision) {
	v := t.decideKey(key, n)
	if v.Remaining < 0 {
		return t.redirect(key, n)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, t.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// decideKey decides a request for n on key: lock-free on a key the table
// holds (find, then decide's CAS loop), under the shard's mutex otherwise
// (slow).
func (t *Store) decideKey(key string, n int) kernel.Verdict {
	h, k0, k1 := t.hash(key)
	return t.decideAt(key, h, k0, k1, t.now(), n)
}

// hash returns key's seeded 64-bit hash, whose top bits choose its shard
// and whose whole is its tag, and its slot's key words (shortKey; 0 with
// hashed keys). A key of up to 15 bytes in a store of full keys is hashed
// from those words by mixKey; every other key by hash/maphash. Both are
// seeded per store, so clients cannot aim keys at one shard or one probe
// sequence.
func (t *Store) hash(key string) (h, k0, k1 uint64) {
	if !t.hashed {
		var short bool
		if k0, k1, short = shortKey(key); short {
			return t.mixKey(k0, k1), k0, k1
		}
	}
	return maphash.String(t.seed, key), k0, k1
}

// mixKey hashes a short key's two words: the multiply-mix (the high and low
// halves of a 128-bit product, folded) of the words xored with seeds, mixed
// again with a third seed: the construction of Go's runtime map hash for 9
// to 16 bytes on machines without AES (wyhash), on words shortKey has
// already read: under callgrind it saved 35 of the 67 instructions
// maphash.String took per keyed Allow. Its tags
// only need to spread keys: a table compares the key's words whenever two
// tags match. (With hashed keys, where the hash is the key's identity, the
// store uses maphash.)
func (t *Store) mixKey(k0, k1 uint64) uint64 {
	return mix(mix(k0^t.mix[0], k1^t.mix[1]), t.mix[2])
}

// mix folds the 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// now reads the clock, the system clock without a dynamic call (see
// clockref.Ref).
func (t *Store) now() time.Duration {
	if t.clock.Sys {
		return clock.System().Now()
	}
	if t.clock.Coarse == nil {
		return t.clock.C.Now()
	}
	return t.clock.CoarseNow()
}

// decideAt is decideKey for key, whose hash and key words are h, k0 and k1
// (hash), at reading now.
func (t *Store) decideAt(key string, h, k0, k1 uint64, now time.Duration, n int) kernel.Verdict {
	var pause func()
	if t.pause.Load() != nil {
		pause = t.takePause()
	}
	sh := &t.shards[h>>t.shift]
	if tb := sh.tab.Load(); tb != nil {
		if i, ok := tb.find(tagOf(h), k0, k1, key, t.hashed, t.sbits); ok {
			hook.Between(hook.AfterLookup)
			if v, ok := t.decide(&tb.slot(i)[1], now, n, &pause); ok {
				return v
			}
		}
	}
	if pause != nil {
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
// *pause, when not nil (tests only), is called after the first load of the
// word, and cleared.
func (t *Store) decide(p *atomic.Uint64, now time.Duration, n int, pause *func()) (v kernel.Verdict, ok bool) {
	if n == 1 && t.alg == algTB && *pause == nil {
		// The token bucket's one-token path, written out: the word is the
		// TAT in scaled units, and AllowOne is GCRA for one token on it.
		for {
			old := p.Load()
			if old-tbTomb <= tbHeld-tbTomb {
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
		if *pause != nil {
			(*pause)()
			*pause = nil
		}
		if old == t.tomb || old == t.held {
			return v, false
		}
		var nw uint64
		if n == 1 {
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
func (t *Store) one(old uint64, now time.Duration) (nw uint64, v kernel.Verdict, ok bool) {
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
func (t *Store) step(old uint64, now time.Duration, n int) (v kernel.Verdict, nw uint64, change, fits bool) {
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
func (t *Store) fresh(w uint64, at time.Duration) bool {
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

// recKeyOf returns what the store compares a key by, from its hash and key
// words (hash): its tag and key words (and the key itself for a long one);
// with hashed keys, whose words are 0, the tag alone.
func recKeyOf(h, k0, k1 uint64, key string) recKey {
	rk := recKey{tag: tagOf(h), k0: k0, k1: k1}
	if k1 == longMark {
		rk.long = key
	}
	return rk
}

// locate returns key's shard and recKey, for the calls that work under the
// shard's mutex (reservations, cancellations, Reset).
func (t *Store) locate(key string) (*shard, recKey) {
	h, k0, k1 := t.hash(key)
	return &t.shards[h>>t.shift], recKeyOf(h, k0, k1, key)
}

// lookup finds the key's slot in the shard's current table under its
// mutex: the table, and the slot's index with ok true, or with ok false,
// if the table does not hold the key (nor a tombstone of it), the empty
// slot where a new slot for it would go.
func (t *Store) lookup(sh *shard, rk recKey, key string) (tb *tab, i uint64, ok bool) {
	tb = sh.tab.Load()
	if tb == nil {
		return nil, 0, false
	}
	i, ok = tb.find(rk.tag, rk.k0, rk.k1, key, t.hashed, t.sbits)
	return tb, i, ok
}

// slow decides a request for n on key under its shard's mutex: on a held
// slot (the record's state), on a stored key whose fast path declined, or on
// a missing key (absent, or a tombstone), which it stores if the decision
// admitted something. A missing key is where the hooks have their say
// (migrate.go): Adopt before the mutex, Keep under it; a key Keep refuses
// is neither decided nor stored, and slow returns redirected, on which the
// caller decides the call with Redirect, the mutex released.
func (t *Store) slow(sh *shard, rk recKey, key string, now time.Duration, n int) kernel.Verdict {
	adopted := t.adopt(sh, rk, key)
	hook.Between(hook.BeforeLock)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tb, i, ok := t.lookup(sh, rk, key)
	if ok {
		p := &tb.slot(i)[1]
		for {
			old := p.Load()
			if old == t.tomb {
				break // evicted: a missing key
			}
			if old == t.held {
				v, _ := held.Decide(t.tb, t.tb, cell{p}, &sh.holds, rk, now, n)
				return v
			}
			v, nw, change, fits := t.step(old, now, n)
			if !change {
				return v
			}
			if !fits {
				// Past the word's horizon: hold the slot with the state
				// in its record (held.Spill), if the word is still old.
				if held.Spill(cell{p}, &sh.holds, rk, old, t.tbNext(old, now, n)) {
					return v
				}
				continue
			}
			hook.Between(hook.BeforeCAS)
			if p.CompareAndSwap(old, nw) {
				return v
			}
		}
	}
	if !t.keep(key, adopted) {
		return redirected
	}
	at := spot{tb, i, ok}
	now = max(now, sh.floor) // the key may have been evicted as fresh at floor
	v, nw, change, fits := t.step(0, now, n)
	if !change {
		return v // a denial or a probe: nothing to store
	}
	if wait, ok := t.add(sh, now); !ok {
		t.keys.Denied()
		return kernel.Verdict{RetryAfter: wait}
	}
	if !fits {
		// A new state past the word's horizon: store the key held, with
		// the state in its record.
		t.putHeld(sh, at, rk, key, held.Rec{State: t.tbNext(0, now, n)})
		return v
	}
	t.put(sh, at, rk, key, nw)
	return v
}

// tbNext returns the token bucket's state after deciding n at now on the
// word old: step's new state, for a state that does not pack.
func (t *Store) tbNext(old uint64, now time.Duration, n int) kernel.TokenBucketState {
	s := t.tb.Unpack(old)
	t.tb.Decide(&s, now, n)
	return s
}

// putHeld stores a key the shard does not hold, held, with record rec. It
// requires sh.mu.
func (t *Store) putHeld(sh *shard, at spot, rk recKey, key string, rec held.Rec) {
	sh.holds.Put(rk, rec)
	t.put(sh, at, rk, key, tbHeld)
}

// add makes room for a new key of sh decided at now (already clamped to the
// floor): it sweeps a few slots of the shard first, and in a full store
// makes room or returns, with ok false, the RetryAfter of the denial. The
// callers that then deny count the denial (Stats); Put, which stores its
// key beyond the bound instead, does not. It requires sh.mu.
func (t *Store) add(sh *shard, now time.Duration) (wait time.Duration, ok bool) {
	if tb := sh.tab.Load(); tb != nil && tb.live >= evict.SweepMinLen {
		t.sweep(sh, now, evict.Reading(now), evict.SweepBatch, nil)
	}
	if t.maxKeys > 0 && !t.keys.Reserve(t.maxKeys) {
		if wait, ok := t.makeRoom(sh, now); !ok {
			return wait, false
		}
	}
	return 0, true
}

// spot is where a lookup under the shard's mutex left a key: its table
// (nil for none), and the key's slot (found, a tombstone) or the empty slot
// where its probe ended.
type spot struct {
	tb    *tab
	i     uint64
	found bool
}

// put stores a key the shard does not hold, with state word w: in its
// tombstone's slot if the table has one (the same key's: a stale call that
// loaded the key's former word can then only CAS the key's own state), or
// in a new slot, rebuilding the table first when it is full. at is where the
// caller's lookup left the key; it is used unless the table was rebuilt
// since (by add's sweep) or is full. It requires sh.mu.
func (t *Store) put(sh *shard, at spot, rk recKey, key string, w uint64) {
	tb := sh.tab.Load()
	if tb == nil || tb != at.tb {
		at = spot{tb: tb}
		if tb != nil {
			at.i, at.found = tb.find(rk.tag, rk.k0, rk.k1, key, t.hashed, t.sbits)
		}
	}
	if at.found {
		tb.slot(at.i)[1].Store(w) // a tombstone: only the mutex's holder writes one
		tb.live++
		return
	}
	if tb != nil && tb.used < tb.max {
		tb.claimAt(at.i, rk.tag, rk.k0, rk.k1, key, false, w, t.hashed)
		return
	}
	live := 0
	if tb != nil {
		live = tb.live
	}
	tb = t.rebuild(sh, tb, size(live+1))
	tb.claim(rk.tag, rk.k0, rk.k1, key, false, w, t.hashed, t.sbits)
}

// rebuild moves the keys of old (nil for none) into a new table of slots
// slots and publishes it; tombstones are left behind. Each key's word is
// frozen first, by a CompareAndSwap from the value it copies to the
// tombstone, so that no call can publish into the old table after the copy:
// a call that loses the race to the freeze finds the tombstone and takes
// the slow path, where it waits for the mutex and finds the key in the new
// table. It requires sh.mu.
func (t *Store) rebuild(sh *shard, old *tab, slots uint64) *tab {
	nt := newTab(slots, t.stride)
	if old != nil {
		for i := range old.n {
			s := old.slot(i)
			tag := s[0].Load()
			if tag == 0 {
				continue
			}
			w := t.freeze(&s[1])
			if w == t.tomb {
				continue
			}
			var k0, k1 uint64
			var key string
			if !t.hashed {
				kw := old.key(i)
				k0, k1 = kw[0].Load(), kw[1].Load()
				if k1 == longMark {
					key = old.long(i)
				}
			}
			nt.claim(tag, k0, k1, key, true, w, t.hashed, t.sbits)
		}
	}
	sh.tab.Store(nt)
	return nt
}

// freeze swaps the word p for the tombstone and returns what it held. It
// requires the shard's mutex (so a held word does not change meanwhile).
func (t *Store) freeze(p *atomic.Uint64) uint64 {
	if unfrozen() {
		hook.Between(hook.BeforeCAS)
		return p.Load() // BUG, planted for the stress self-test: no freeze
	}
	for {
		w := p.Load()
		if w == t.tomb {
			return w
		}
		hook.Between(hook.BeforeCAS)
		if p.CompareAndSwap(w, t.tomb) {
			return w
		}
	}
}

// Stats implements [admit.StatsReporter]: Len, the WithMaxKeys bound, and
// the evictions (sweep) and full-store denials (slow, and a reservation's
// path) counted since the store was built. It takes each shard's mutex in
// turn, as Len does, and is meant for a metrics scrape; the lock-free path
// of a stored key counts nothing.
func (t *Store) Stats() admit.StoreStats {
	return t.keys.Stats(t.Len(), t.maxKeys)
}

// Len implements [admit.Store].
func (t *Store) Len() int {
	total := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if tb := sh.tab.Load(); tb != nil {
			total += tb.live
		}
		sh.mu.Unlock()
	}
	return total
}
