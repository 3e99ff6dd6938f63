package admit

import (
	"fmt"

	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/plumb"
)

// Option configures a limiter. The same options are accepted by every variant
// (atomic, locked, sharded); a bad option makes the constructor return an error
// wrapping [ErrInvalidOption], and an option a constructor cannot honour one
// wrapping [ErrUnsupported]: never a panic and never a silent default. Build
// options with the With functions of this package (and policy.WithFactory and
// policy.WithLimitsFactory): an Option cannot be implemented outside this module.
type Option = plumb.Option

// MaxShards is the largest number of shards [WithShards] accepts. A shard
// costs 128 bytes even when empty, so 65536 shards are 8 MiB per limiter.
const MaxShards = plumb.MaxShards

// DefaultShards is the number of shards of a keyed store when [WithShards] is
// not given: four per processor (runtime.GOMAXPROCS at the time of the call),
// rounded up to a power of two, at least 16 and at most [MaxShards]. Four per
// processor keeps the chance that two busy goroutines hash to the same shard
// low without paying for many empty shards in small limiters.
func DefaultShards() int { return plumb.DefaultShards() }

// WithClock makes the limiter read time from c instead of [clock.System]. Tests
// pass a [clock.Fake] and move it between calls.
func WithClock(c clock.Clock) Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if f, isFake := c.(*clock.Fake); c == nil || (isFake && f == nil) {
			return fmt.Errorf("%w: WithClock(nil); pass clock.System() or a clock.NewFake()", ErrInvalidOption)
		}
		s.Clock = c
		return nil
	})
}

// WithShards makes a keyed store use n independently locked parts: shards in
// packages atomic (a lock-free table each) and sharded (a map each), lock
// stripes in package locked. n must be a power of two between 1 and
// [MaxShards]. More shards mean less contention between keys and smaller
// maps to rebuild after an eviction, at 128 bytes per shard; one shard makes
// every key share one lock. Without this option a store has [DefaultShards].
// Single-key limiters reject it.
func WithShards(n int) Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if n < 1 || n > MaxShards || n&(n-1) != 0 {
			return fmt.Errorf("%w: WithShards(%d); want a power of two from 1 to %d, such as %d", ErrInvalidOption, n, MaxShards, DefaultShards())
		}
		s.Shards = n
		return nil
	})
}

// WithMaxKeys makes a keyed store hold at most n keys at once, so that a flood
// of new keys (client addresses, user names: chosen by clients) cannot grow
// its memory without bound. When the store is full and none of its keys is
// idle enough to evict without changing a decision, a request for a new key
// is denied (the store never admits more than the rule allows for any key);
// keys already stored are served as usual. The denial's RetryAfter is a
// hint of when room may appear, the same in every store for the same calls:
// if the store has at most 8 shards and at most 32 keys, so that the denial
// examines every key, the time until the soonest of them can be evicted;
// otherwise the rule's longest reset time (Window, twice that for the
// sliding counter); in both cases plus 100ms, the slack eviction keeps
// (docs/keyed-stores.md, "The full-store policy"). n must be at least 1;
// without this option a store has no bound. Single-key limiters reject it.
func WithMaxKeys(n int) Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxKeys(%d); want at least 1 key (leave the option out for no bound)", ErrInvalidOption, n)
		}
		s.MaxKeys = n
		return nil
	})
}

// WithHashedKeys makes a keyed store keep a 64-bit hash of each key, seeded
// per store, instead of the key itself: every key then costs the same few
// bytes however long it is. The price is a small chance that two keys share
// one budget: among k keys, about k²/2^65 colliding pairs are expected (one
// in 37 million for a million keys, one in 37 for a billion). A collision
// only ever makes the two keys stricter, never looser. Package locked
// returns an error wrapping [ErrUnsupported]; packages atomic (New) and
// sharded support it.
func WithHashedKeys() Option {
	return plumb.NewOption(func(s *plumb.Settings) error {
		s.HashedKeys = true
		return nil
	})
}
