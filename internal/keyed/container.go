package keyed

import (
	"math"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// Container is what a keyed store's layout gives the policy of this
// package: its shards, each with a lock, and the operations on one shard's
// keys that depend on how the container lays them out. Sh is its shard,
// Loc where it finds a key within a shard (the key as it compares keys).
// Every method but Shards, Locate, Lock, TryLock, Now and Named requires
// the lock of the shard it is given.
//
// The functions of this file (Len, Stats, Sweep, Reset, Keys, Take, Put,
// Add) are the policy's decision sequences over a Container, written once:
// which lock is held when, what is counted against the Bound, when a new
// key sweeps or makes room. None is on the path of a decision on a stored
// key, which each container keeps for itself: a decision there costs no
// call through this interface.
type Container[Sh, Loc any] interface {
	// Shards returns the shards, fixed when the store was built; their
	// count is a power of two (MakeRoom).
	Shards() []Sh
	// Locate returns key's shard and where the shard finds key.
	Locate(key string) (*Sh, Loc)
	Lock(sh *Sh)
	// TryLock takes the shard's lock if it is free.
	TryLock(sh *Sh) bool
	Unlock(sh *Sh)
	// Now reads the store's clock.
	Now() time.Duration
	// Named reports whether the store keeps its keys (Keys has them to
	// give): false for a store of hashed keys.
	Named() bool

	// Floor is the shard's floor: the newest reading at which one of its
	// keys was evicted; a missing key decides at max(its reading, floor).
	Floor(sh *Sh) time.Duration
	// Count returns how many keys the shard holds.
	Count(sh *Sh) int
	// AppendKeys appends the shard's keys to keys (Named stores only).
	AppendKeys(sh *Sh, keys []string) []string
	// Scan examines up to limit keys of the shard and evicts those fresh
	// at reading at, raising the shard's floor to at (the caller counts
	// the evictions in the store's Bound: scan); for the others, if soonest is not nil, it lowers *soonest to the time
	// from now until they become fresh. It returns how many keys it
	// examined and evicted. A limit of math.MaxInt examines every key.
	Scan(sh *Sh, now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int)
	// Holds reports whether the shard holds key.
	Holds(sh *Sh, at Loc, key string) bool
	// Retire forgets key's state and its hold, if any: a call after it
	// decides as on a new key, and no reservation made before can be
	// cancelled. It reports whether the key left the shard (a container
	// may keep it, with a fresh key's state).
	Retire(sh *Sh, at Loc, key string) (left bool)
	// Export removes key, with its hold, and writes its state to into as
	// parts of the store's limits; it reports whether the shard held key.
	// A container whose calls decide without the lock first freezes the
	// key's state, so that no call decides on it after Export.
	Export(sh *Sh, at Loc, key string, into []kernel.PartState) bool
	// Import stores key, which the shard does not hold, with the state
	// from, as parts of the store's limits.
	Import(sh *Sh, at Loc, key string, from []kernel.PartState)
}

// Len returns how many keys the store c holds, counting each shard under
// its lock in turn.
func Len[Sh, Loc any](c Container[Sh, Loc]) int {
	shards := c.Shards()
	total := 0
	for i := range shards {
		sh := &shards[i]
		c.Lock(sh)
		total += c.Count(sh)
		c.Unlock(sh)
	}
	return total
}

// Stats is admit.Store's Stats for the store c, whose Bound is b: its Len,
// the bound, and the evictions and full-store denials counted since it was
// built. It is meant for a metrics scrape; a decision on a stored key
// counts nothing.
func Stats[Sh, Loc any](c Container[Sh, Loc], b *Bound) admit.StoreStats {
	return b.Stats(Len(c))
}

// Sweep is admit.Store's Sweep: it evicts every key of c that is fresh at
// the eviction reading (Reading), counts them in b, and returns how many
// it evicted.
func Sweep[Sh, Loc any](c Container[Sh, Loc], b *Bound) int { return SweepAt(c, b, Reading(c.Now())) }

// SweepAt evicts every key of c fresh at reading at, shard by shard under
// each shard's lock, and returns how many it evicted. Reading the clock
// once for all shards is conservative: a state fresh at an older reading
// is fresh at every later one.
func SweepAt[Sh, Loc any](c Container[Sh, Loc], b *Bound, at time.Duration) int {
	shards := c.Shards()
	total := 0
	for i := range shards {
		sh := &shards[i]
		c.Lock(sh)
		_, n := scan(c, b, sh, at, at, math.MaxInt, nil)
		c.Unlock(sh)
		total += n
	}
	return total
}

// Reset is admit.Store's Reset: under key's shard's lock, which every
// change of the key's state holds or is ordered by (its linearization
// point), it retires the key's state and hold, and uncounts the key if it
// left the shard. The floor is not raised: the key was not judged fresh.
func Reset[Sh, Loc any](c Container[Sh, Loc], b *Bound, key string) {
	sh, at := c.Locate(key)
	c.Lock(sh)
	if c.Retire(sh, at, key) {
		b.Left(1)
	}
	c.Unlock(sh)
}

// Keys is [Mover]'s: it copies each shard's keys under the shard's lock and
// calls yield with them after releasing it, so that yield may call the
// store (Take the key, say). A store of hashed keys has no keys to give and
// returns false at once.
func Keys[Sh, Loc any](c Container[Sh, Loc], yield func(key string) bool) bool {
	if !c.Named() {
		return false
	}
	shards := c.Shards()
	var keys []string
	for i := range shards {
		sh := &shards[i]
		c.Lock(sh)
		keys = c.AppendKeys(sh, keys[:0])
		c.Unlock(sh)
		for _, k := range keys {
			if !yield(k) {
				return true
			}
		}
	}
	return true
}

// Take is [Mover]'s: under key's shard's lock it exports the key's state
// and removes the key with its hold (Container.Export), and uncounts it
// against the bound; it counts no eviction (Stats leaves moved keys out)
// and does not raise the floor.
func Take[Sh, Loc any](c Container[Sh, Loc], b *Bound, key string, into []kernel.PartState) bool {
	sh, at := c.Locate(key)
	c.Lock(sh)
	defer c.Unlock(sh)
	if !c.Export(sh, at, key, into) {
		return false
	}
	b.Left(1)
	return true
}

// Put is [Mover]'s: under key's shard's lock, if the shard does not hold
// key, it makes room for it as a new key would (Add, at the clock clamped
// to the floor), counts it beyond the bound if no room could be made (a
// carried state is never dropped: later insertions find the store full
// until evictions bring the count down), and imports the state. horizon is
// the longest the store's states take to become fresh (MakeRoom).
func Put[Sh, Loc any](c Container[Sh, Loc], b *Bound, horizon time.Duration, key string, from []kernel.PartState) bool {
	sh, at := c.Locate(key)
	c.Lock(sh)
	defer c.Unlock(sh)
	if c.Holds(sh, at, key) {
		return false
	}
	if _, ok := Add(c, b, sh, max(c.Now(), c.Floor(sh)), horizon); !ok {
		b.Beyond()
	}
	c.Import(sh, at, key, from)
	return true
}

// Add makes room for a new key of sh decided at now (already clamped to
// the floor), sh's lock held: it sweeps SweepBatch keys of the shard first
// if it holds SweepMinLen or more, counts the key against the bound, and
// in a full store applies the full-store policy (MakeRoom, taking the
// other shards' locks only if they are free) or returns, with ok false,
// the RetryAfter of the denial. A caller that then denies the request
// counts the denial (Counter.Denied); Put, which stores its key beyond the
// bound instead, does not.
func Add[Sh, Loc any](c Container[Sh, Loc], b *Bound, sh *Sh, now, horizon time.Duration) (wait time.Duration, ok bool) {
	if c.Count(sh) >= SweepMinLen {
		scan(c, b, sh, now, Reading(now), SweepBatch, nil)
	}
	if b.Room() {
		return 0, true
	}
	return MakeRoom(&b.Counter, b.max, c.Shards(), sh, now, horizon,
		func(o *Sh, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
			if !own {
				if !c.TryLock(o) {
					return 0, 0
				}
				defer c.Unlock(o)
			}
			return scan(c, b, o, now, at, limit, soonest)
		})
}

// scan is c.Scan, and counts the keys it evicted as evictions (Stats) that
// left the store (Bound.Left), under sh's lock, before any other call can
// reserve the room they made.
func scan[Sh, Loc any](c Container[Sh, Loc], b *Bound, sh *Sh, now, at time.Duration, limit int, soonest *time.Duration) (examined, evicted int) {
	examined, evicted = c.Scan(sh, now, at, limit, soonest)
	if evicted > 0 {
		b.Evicted(evicted)
		b.Left(evicted)
	}
	return examined, evicted
}
