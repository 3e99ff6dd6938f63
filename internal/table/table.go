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
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// The algorithms a table decides.
const (
	algTB = iota
	algFW
	algSC
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
	holds  keyed.Holds[uint64, recKey, cell]
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

	// holds is guarded by mu: the held protocol on the shard's slots (token
	// bucket only), with their records by key.
	holds keyed.Holds[uint64, recKey, cell]

	_ [keyed.CacheLinePad - unsafe.Sizeof(shardFields{})]byte
}

// recKey is a key as a table compares it: its tag and, with full keys, its
// slot's key words and, for a long key, the key. It is also the key of a
// held slot's record (records outlive a rebuild, which moves slots).
type recKey struct {
	tag, k0, k1 uint64
	long        string
}

// Table is the table store. It is immutable after New except for its
// shards and its counters (keys).
type Table struct {
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
	horizon time.Duration
	shards  []shard
	keys    keyed.Bound // WithMaxKeys: keys stored (when bounded), Stats' counts, MakeRoom's cursor

	// pause is the tests' pause point (pause_on.go), in builds with the tag
	// admittest only; in a normal build it is empty and never read.
	pause pausePoint

	// hooks are the keyed.Hooks of the store's owner (nil: none), read
	// only on the paths of a key the table does not hold (see migrate.go).
	hooks keyed.HookPoint
}

// New returns the table store for rule, which must pack (Packs), with the
// settings' clock, shards, key bound and key mode. A token bucket's store
// (a reserver) hands out reservations ahead.
func New(rule admit.Rule, set plumb.Settings) admit.Store {
	n := set.ShardCount()
	t := &Table{
		hashed:  set.HashedKeys,
		stride:  2,
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		rule:    rule,
		limit:   rule.Limit,
		clock:   clockref.New(set.Clock),
		seed:    maphash.MakeSeed(),
		mix:     [3]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64() | 1},
		horizon: keyed.Horizon(rule),
		shards:  make([]shard, n),
	}
	t.sbits = 64 - t.shift
	t.keys.Init(set.MaxKeys)
	if t.hashed {
		t.stride = 1
	}
	for i := range t.shards {
		t.shards[i].floor = math.MinInt64
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		t.alg, t.tb, t.tomb, t.held = algTB, kernel.NewTokenBucket(rule), kernel.TokenBucketTomb, kernel.TokenBucketHeld
		for i := range t.shards {
			t.shards[i].holds.Init(t.tb)
		}
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

// Rule implements [admit.Store].
func (t *Table) Rule() admit.Rule { return t.rule }

// now reads the clock, the system clock without a dynamic call (see
// clockref.Ref).
func (t *Table) now() time.Duration {
	if t.clock.Sys {
		return clock.System().Now()
	}
	if t.clock.Coarse == nil {
		return t.clock.C.Now()
	}
	return t.clock.CoarseNow()
}

// Stats implements [admit.Store] (keyed.Stats): Len, the WithMaxKeys
// bound, and the evictions (sweep) and full-store denials (slow, and a
// reservation's path) counted since the store was built. It takes each
// shard's mutex in turn, as Len does, and is meant for a metrics scrape;
// the lock-free path of a stored key counts nothing.
func (t *Table) Stats() admit.StoreStats { return keyed.Stats(t.layout(), &t.keys) }

// Len implements [admit.Store] (keyed.Len).
func (t *Table) Len() int { return keyed.Len(t.layout()) }
