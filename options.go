package admit

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/admit-go/admit/clock"
)

// Option configures a limiter. The same options are accepted by every variant
// (atomic, locked, sharded); a bad option makes the constructor return an error
// wrapping [ErrInvalidOption], never a panic and never a silent default.
type Option func(*Settings) error

// Settings is the resolved form of a list of options. Variant packages call
// [NewSettings] once in their constructors; callers normally never see it.
type Settings struct {
	// Clock is the time source; [clock.System] unless [WithClock] says otherwise.
	Clock clock.Clock

	// Factory builds the keyed limiters of constructors that build limiters
	// for you, such as a policy.Service; nil lets them choose. Variant
	// constructors ignore it. Set it with [WithFactory].
	Factory Factory

	// The keyed-store options below shape the store behind a keyed limiter
	// (New in a variant package). A constructor that cannot honour one of
	// them (a single-key NewLimiter, or a store without that feature) returns
	// an error wrapping [ErrUnsupported]; see [Settings.StoreOptions].

	// Shards is the number of independently locked parts of a keyed store
	// (shards in package sharded, stripes in packages locked and atomic): a
	// power of two in [1, MaxShards], or 0 for the default, [DefaultShards].
	// Set it with [WithShards]; read it with [Settings.ShardCount].
	Shards int

	// MaxKeys bounds how many keys a keyed store holds at once; 0, the
	// default, means no bound. Set it with [WithMaxKeys].
	MaxKeys int

	// HashedKeys makes a keyed store keep a seeded 64-bit hash of each key
	// instead of the key; false by default. Set it with [WithHashedKeys].
	HashedKeys bool
}

// MaxShards is the largest number of shards [WithShards] accepts. A shard
// costs 128 bytes even when empty, so 65536 shards are 8 MiB per limiter.
const MaxShards = 1 << 16

// DefaultShards is the number of shards of a keyed store when [WithShards] is
// not given: four per processor (runtime.GOMAXPROCS at the time of the call),
// rounded up to a power of two, at least 16 and at most [MaxShards]. Four per
// processor keeps the chance that two busy goroutines hash to the same shard
// low without paying for many empty shards in small limiters.
func DefaultShards() int {
	n := 16
	for n < 4*runtime.GOMAXPROCS(0) && n < MaxShards {
		n <<= 1
	}
	return n
}

// ShardCount returns the number of shards the settings ask for: Shards, or
// [DefaultShards] when Shards is 0.
func (s Settings) ShardCount() int {
	if s.Shards == 0 {
		return DefaultShards()
	}
	return s.Shards
}

// StoreOptions returns the names of the keyed-store options that are set
// ("WithShards, WithMaxKeys", for instance), or "" when none is. A
// constructor of a single-key limiter, which has no store, rejects them with
// it.
func (s Settings) StoreOptions() string {
	var names []string
	if s.Shards != 0 {
		names = append(names, "WithShards")
	}
	if s.MaxKeys != 0 {
		names = append(names, "WithMaxKeys")
	}
	if s.HashedKeys {
		names = append(names, "WithHashedKeys")
	}
	return strings.Join(names, ", ")
}

// Factory builds a keyed limiter for a rule: the New function of a variant
// package, such as locked.New.
type Factory func(Rule, ...Option) (KeyedLimiter, error)

// WithFactory makes constructors that build limiters for you (a policy.Service,
// for one) build them with f, for example WithFactory(locked.New), instead of
// choosing the fastest variant for each rule.
func WithFactory(f Factory) Option {
	return func(s *Settings) error {
		if f == nil {
			return fmt.Errorf("%w: WithFactory(nil); pass a variant's New, such as locked.New", ErrInvalidOption)
		}
		s.Factory = f
		return nil
	}
}

// NewSettings applies opts, in order, over the defaults. The defaults live here
// and nowhere else: the system clock, no factory (the caller chooses), the
// default number of shards ([DefaultShards], recorded as 0), no bound on the
// number of keys, and full keys rather than hashes.
func NewSettings(opts ...Option) (Settings, error) {
	s := Settings{Clock: clock.System(), Factory: nil, Shards: 0, MaxKeys: 0, HashedKeys: false}
	for i, opt := range opts {
		if opt == nil {
			return Settings{}, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i)
		}
		if err := opt(&s); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

// WithClock makes the limiter read time from c instead of [clock.System]. Tests
// pass a [clock.Fake] and move it between calls.
func WithClock(c clock.Clock) Option {
	return func(s *Settings) error {
		if f, isFake := c.(*clock.Fake); c == nil || (isFake && f == nil) {
			return fmt.Errorf("%w: WithClock(nil); pass clock.System() or a clock.NewFake()", ErrInvalidOption)
		}
		s.Clock = c
		return nil
	}
}

// WithShards makes a keyed store use n independently locked parts: shards in
// package sharded, lock stripes in package locked, the stripes of the idle-key
// sweeper in package atomic. n must be a power of two between 1 and
// [MaxShards]. More shards mean less contention between keys and smaller
// maps to rebuild after an eviction, at 128 bytes per shard; one shard makes
// every key share one lock. Without this option a store has [DefaultShards].
// Single-key limiters reject it.
func WithShards(n int) Option {
	return func(s *Settings) error {
		if n < 1 || n > MaxShards || n&(n-1) != 0 {
			return fmt.Errorf("%w: WithShards(%d); want a power of two from 1 to %d, such as %d", ErrInvalidOption, n, MaxShards, DefaultShards())
		}
		s.Shards = n
		return nil
	}
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
	return func(s *Settings) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxKeys(%d); want at least 1 key (leave the option out for no bound)", ErrInvalidOption, n)
		}
		s.MaxKeys = n
		return nil
	}
}

// WithHashedKeys makes a keyed store keep a 64-bit hash of each key, seeded
// per store, instead of the key itself: every key then costs the same few
// bytes however long it is. The price is a small chance that two keys share
// one budget: among k keys, about k²/2^65 colliding pairs are expected (one
// in 37 million for a million keys, one in 37 for a billion). A collision
// only ever makes the two keys stricter, never looser. Variants that store
// full keys only return an error wrapping [ErrUnsupported]; package sharded
// supports it.
func WithHashedKeys() Option {
	return func(s *Settings) error {
		s.HashedKeys = true
		return nil
	}
}
