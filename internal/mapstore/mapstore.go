// Package mapstore is the keyed store of packages locked and sharded (their
// New): 2^k shards, each a mutex padded to its own cache lines and a Go map
// from a key to a pointer to its state. The map key is the key itself (a
// copy the store owns), or with admit.WithHashedKeys its 64-bit hash, seeded
// per store; the top bits of the hash choose the shard. Every call does its
// whole work (lookup, decision, insertion, the sweep it triggers) under its
// shard's lock.
//
// A state lives behind a pointer so that a call can change it in place: the
// map is written only to insert a key, under the store's own copy, and never
// with a caller's key. A Go map assignment to a key it holds replaces the
// stored key with the one assigned (for strings, whose equal values may
// differ in memory), so writing a state back with m[key] = s would swap the
// store's copy for the caller's string, whose memory the caller may reuse:
// rewriting it would then rename the stored state.
//
// Idle keys are evicted only when their state is fresh (kernel.Fresh), so
// eviction changes no decision: each shard keeps a floor, and a call that
// finds its key missing decides at max(its reading, floor) (see shard.floor).
// Insertions sweep a few keys, a shrunken map is rebuilt (evicted), and
// with admit.WithMaxKeys a new key in a full store makes room or is denied
// (internal/keyed.Add, over the store's layout); the evictions and those
// denials are counted in the store's keyed.Bound, on those paths only, and
// reported by Stats. Token-bucket stores also hand out reservations ahead,
// with a hold per waiting key (reserve.go). Composite
// limits (NewLimits) keep all the rules of a key in one state, decided
// together through kernel.Composite (composite.go, composite_reserve.go).
// Every store is a keyed.Mover, whose keys a policy.Service moves one by
// one to another store when their limits change (migrate.go): a call on a
// key its shard does not hold consults the Service's hooks, releasing the
// lock to adopt the key or to have the call decided elsewhere.
// docs/keyed-stores.md has the protocol and its proof.
package mapstore

import (
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// New returns a keyed store enforcing rule, which must be valid
// (rule.Validate), independently for every key, with the settings set: its
// shards (set.ShardCount), its bound (set.MaxKeys), its clock, and hashed
// keys if set.HashedKeys. It supports all four algorithms. A token bucket's
// store, whose states are bare TAT words when kernel.TokenBucket.Packable,
// hands out reservations ahead (reserve.go); the others reserve nothing
// ahead (capabilities.go).
func New(rule admit.Rule, set plumb.Settings) admit.Store {
	switch rule.Algorithm {
	case admit.TokenBucket:
		if k := kernel.NewTokenBucket(rule); k.Packable() {
			return buildTB[uint64](&packedTB{k}, rule, set)
		} else {
			return buildTB[kernel.TokenBucketState](k, rule, set)
		}
	case admit.FixedWindow:
		return build[kernel.FixedWindowState](kernel.NewFixedWindow(rule), rule, set)
	case admit.SlidingLog:
		return build[kernel.Log](kernel.NewSlidingLog(rule), rule, set)
	default: // admit.SlidingCounter; the caller's Validate rejected anything else
		return build[kernel.SlidingCounterState](kernel.NewSlidingCounter(rule), rule, set)
	}
}

func build[S any](kern any, rule admit.Rule, set plumb.Settings) admit.Store {
	if set.HashedKeys {
		l := new(hashedKeys[S])
		l.init(kern, rule, set, nil)
		return l
	}
	l := new(fullKeys[S])
	l.init(kern, rule, set, strings.Clone)
	return l
}

// shardFields mirrors the fields of shard, whose size cannot be taken in a
// constant expression because shard is generic (a map is one pointer
// whatever its types). TestShardSize pins the two together.
type shardFields struct {
	mu    sync.Mutex
	m     map[string]*struct{}
	floor time.Duration
	peak  int
	holds keyed.Map[*struct{}, kernel.Hold]
	cheld keyed.Map[*struct{}, kernel.CompositeHold]
}

// shard is a mutex and the states of the keys that hash to it.
type shard[KT comparable, S any] struct {
	mu sync.Mutex
	m  map[KT]*S // guarded by mu; written only to insert or delete a key

	// floor is guarded by mu. It is the newest reading at which a key of
	// this shard has been evicted (math.MinInt64 until the first eviction).
	// A call that finds its key missing decides at max(its reading, floor),
	// never at an older reading: a missing key may be one that was evicted
	// because it was fresh at floor, and a fresh state is equivalent to a
	// new one only at readings from floor on. Calls on keys present use
	// their own reading, exactly like the store without eviction.
	// docs/keyed-stores.md has the proof.
	floor time.Duration

	peak int // guarded by mu: the most keys m has held since it was made

	// holds is guarded by mu: the holds (kernel.Hold) of the token-bucket
	// reservations of this shard's keys that may still be cancelled (and
	// dead ones, Ticket 0, until a new entry prunes them), by the address of
	// the key's state: a key evicted and stored again has a new one, and an
	// eviction deletes the hold of the state it deletes, so every entry is a
	// stored key's. Calls of a shard that never had a hold pay one comparison.
	holds keyed.Map[*S, kernel.Hold]

	// cheld is holds for a composite of token buckets (composite.go), whose
	// holds are kernel.CompositeHold; it is nil in every other store.
	cheld keyed.Map[*S, kernel.CompositeHold]

	_ [keyed.CacheLinePad - unsafe.Sizeof(shardFields{})]byte
}

// store is a sharded keyed store of states S under map keys KT (a string, or
// a 64-bit hash with WithHashedKeys). It is immutable after init except for
// its shards, its counters (keys) and the test hook.
type store[KT comparable, S any] struct {
	// kern is the kernel for S: *packedTB for uint64, *kernel.TokenBucket,
	// *kernel.FixedWindow, *kernel.SlidingLog or *kernel.SlidingCounter for
	// their own states, *kernel.Composite for an array of kernel.PartState
	// (composite.go). See decide for why it is not a type parameter.
	kern    any
	rule    admit.Rule // the zero Rule in a composite store
	clock   clock.Clock
	seed    maphash.Seed
	shift   uint          // a hash's shard is hash >> shift (64 for one shard: 0)
	limit   int           // the rule's Limit; a composite's smallest
	least   int           // the index of the first rule whose Limit is limit
	horizon time.Duration // the longest a state can take to become fresh
	clone   func(KT) KT   // our own copy of a caller's map key; nil for hashes
	shards  []shard[KT, S]
	keys    keyed.Bound // WithMaxKeys: keys stored (when bounded), Stats' counts, MakeRoom's cursor

	// hooks are a keyed.Mover's hooks (SetHooks, migrate.go), nil until
	// set. Only the path of a key a shard does not hold reads them.
	hooks keyed.HookPoint

	// pause, when set (by tests only), is called once, by the first call to
	// reach it after it has read the clock and before it takes its shard's
	// lock. It lets tests stop a call there while others run (Pause).
	pause atomic.Pointer[func()]
}

func (l *store[KT, S]) init(kern any, rule admit.Rule, set plumb.Settings, clone func(KT) KT) {
	n := set.ShardCount()
	l.kern = kern
	l.rule = rule
	l.clock = set.Clock
	l.seed = maphash.MakeSeed()
	l.shift = uint(64 - bits.TrailingZeros(uint(n)))
	l.limit = rule.Limit
	l.keys.Init(set.MaxKeys)
	l.horizon = keyed.Horizon(rule)
	l.clone = clone
	l.shards = make([]shard[KT, S], n)
	for i := range l.shards {
		l.shards[i].m = make(map[KT]*S)
		l.shards[i].floor = math.MinInt64
	}
}

// fullKeys is a store that keeps each key as a string.
type fullKeys[S any] struct{ store[string, S] }

func (l *fullKeys[S]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

// Rule implements [admit.Store]. It is fullKeys's and hashedKeys's, not
// store's, so that a composite store (composite.go) has none.
func (l *fullKeys[S]) Rule() admit.Rule { return l.rule }

func (l *fullKeys[S]) AllowN(key string, n int) admit.Decision {
	d, _ := l.allow(key, key, maphash.String(l.seed, key), n, nil)
	return d
}

// Decide implements [keyed.Mover].
func (l *fullKeys[S]) Decide(key string, n int) (admit.Decision, int, bool) {
	var moved bool
	d, which := l.allow(key, key, maphash.String(l.seed, key), n, &moved)
	return d, which, moved
}

// hashedKeys is a store that keeps each key's seeded 64-bit hash instead of
// the key (WithHashedKeys). The top bits choose the shard and the whole hash
// is the map key, so two keys share a state only if all 64 bits collide.
type hashedKeys[S any] struct{ store[uint64, S] }

func (l *hashedKeys[S]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

// Rule implements [admit.Store].
func (l *hashedKeys[S]) Rule() admit.Rule { return l.rule }

func (l *hashedKeys[S]) AllowN(key string, n int) admit.Decision {
	h := maphash.String(l.seed, key)
	d, _ := l.allow(key, h, h, n, nil)
	return d
}

// Decide implements [keyed.Mover].
func (l *hashedKeys[S]) Decide(key string, n int) (admit.Decision, int, bool) {
	h := maphash.String(l.seed, key)
	var moved bool
	d, which := l.allow(key, h, h, n, &moved)
	return d, which, moved
}

// allow decides a request for n on key, whose map key is mk and whose hash
// is h, and returns the decision and the index of the rule that bound it
// (decideWhich). The whole of it, from lookup to eviction, runs under the
// shard's lock, so no other call can see or evict the state in between; a
// key the shard does not hold takes the path of missing, which may release
// the lock to consult the hooks (migrate.go). A call the hooks' Keep refused
// is decided by their Redirect when moved is nil (the store's own methods),
// or reported in *moved, with nothing decided (Decide, the hooks' owner's
// way in). One body for both: a wrapper around it would be one more call on
// every decision, since a generic method's shape instance does not inline
// it.
func (l *store[KT, S]) allow(key string, mk KT, h uint64, n int, moved *bool) (admit.Decision, int) {
	now := l.clock.Now() // read outside the lock; see shard.floor for stale readings
	l.paused()
	sh := &l.shards[h>>l.shift]
	sh.mu.Lock()
	s := sh.m[mk]
	if s == nil {
		return l.missing(sh, key, mk, h, now, n, moved) // releases sh.mu
	}
	d, which := l.decideWhich(s, now, n) // in place: the map is not written
	if len(sh.holds.M) != 0 {
		l.showHold(sh, s, now)
	}
	if len(sh.cheld.M) != 0 {
		l.showCompositeHold(sh, s, now)
	}
	sh.mu.Unlock()
	return d, which
}

// paused calls the stress harness's hook (a no-op in a normal build), then
// runs the test hook pause, if it is set, and clears it.
func (l *store[KT, S]) paused() {
	hook.Between(hook.BeforeLock)
	if p := l.pause.Load(); p != nil && l.pause.CompareAndSwap(p, nil) {
		(*p)()
	}
}

// insert decides a request for a key that sh does not hold, and stores the
// key if it admitted something; it returns the decision and the index of
// the rule that bound it. It requires that sh.mu is held.
func (l *store[KT, S]) insert(sh *shard[KT, S], mk KT, now time.Duration, n int) (admit.Decision, int) {
	now = max(now, sh.floor) // the key may have been evicted as fresh at floor
	var s S
	d, which := l.decideWhich(&s, now, n)
	if !d.Allowed || n == 0 {
		// A probe, or a request that can never pass: nothing to store. (A
		// fresh state admits every other request.)
		return d, which
	}
	if stored, wait := l.add(sh, mk, s, now); stored == nil {
		return admit.Decision{Limit: l.limit, RetryAfter: wait}, l.least
	}
	return d, which
}

// add stores s, the state of a key that sh does not hold, decided at now
// (already clamped to the floor), and returns the stored state: it makes
// room for the key first (keyed.Add: a sweep of a few keys of sh, and in a
// full store the full-store policy), or returns nil and the RetryAfter of
// the denial, storing nothing and counting the denial (Stats): every
// caller denies the request then. It requires that sh.mu is held.
func (l *store[KT, S]) add(sh *shard[KT, S], mk KT, s S, now time.Duration) (stored *S, wait time.Duration) {
	if wait, ok := keyed.Add(l.layout(), &l.keys, sh, now, l.horizon); !ok {
		l.keys.Denied()
		return nil, wait
	}
	if l.clone != nil {
		mk = l.clone(mk) // our own copy: the caller may reuse the key's memory
	}
	stored = new(S)
	*stored = s
	sh.m[mk] = stored // the only write of a key, and with our copy
	sh.peak = max(sh.peak, len(sh.m))
	return stored, 0
}

// Len implements [admit.Store] (keyed.Len).
func (l *store[KT, S]) Len() int { return keyed.Len(l.layout()) }

// Stats implements [admit.Store] (keyed.Stats): Len, the WithMaxKeys bound,
// and the evictions (evicted) and full-store denials (add) counted since
// the store was built. It takes each shard's lock in turn, as Len does,
// and is meant for a metrics scrape; the calls on stored keys count
// nothing.
func (l *store[KT, S]) Stats() admit.StoreStats { return keyed.Stats(l.layout(), &l.keys) }

// Reset implements [admit.Store] (keyed.Reset, layout.Retire): it forgets
// key's state and the hold of its reservation, if it has one, so that its
// next call decides as on a new key and no reservation made before can be
// cancelled after. The deletion is under the shard's lock, with every call
// on the key, which is its linearization point.
func (l *store[KT, S]) Reset(key string) { keyed.Reset(l.layout(), &l.keys, key) }
