package atomic

import (
	"fmt"
	"strings"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// New returns a keyed limiter enforcing rule independently for every key,
// lock-free: keys live in a concurrent hash map (lookups take no lock; a new
// key is created once even when goroutines race on it) and each key's state is
// a word or a snapshot swapped by CAS. It supports the token bucket, the fixed
// window and the sliding counter; for the sliding log it returns an error
// wrapping [admit.ErrUnsupported].
func New(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		if k := kernel.NewTokenBucket(rule); k.Packable() {
			return newKeyed[tbCell](k, rule, set), nil
		} else {
			return newKeyed[tbSnapCell](k, rule, set), nil
		}
	case admit.FixedWindow:
		return newKeyed[fwCell](newFWCodec(rule), rule, set), nil
	default: // admit.SlidingCounter; settings rejected the sliding log
		if c, ok := newSCCodec(rule); ok {
			return newKeyed[scCell](c, rule, set), nil
		}
		k := kernel.NewSlidingCounter(rule)
		return newKeyed[scSnapCell](k, rule, set), nil
	}
}

// NewLimiter returns a lock-free limiter enforcing rule for a single key, in the
// packed form where the rule allows it. It supports the token bucket, the fixed
// window and the sliding counter; for the sliding log it returns an error
// wrapping [admit.ErrUnsupported].
func NewLimiter(rule admit.Rule, opts ...admit.Option) (admit.Limiter, error) {
	set, err := settings(rule, opts)
	if err != nil {
		return nil, err
	}
	switch rule.Algorithm {
	case admit.TokenBucket:
		if k := kernel.NewTokenBucket(rule); k.Packable() {
			return &TokenBucket{k: *k, clock: set.Clock}, nil
		}
		return &TokenBucketSnapshot{k: *kernel.NewTokenBucket(rule), clock: set.Clock}, nil
	case admit.FixedWindow:
		return &FixedWindow{codec: newFWCodec(rule), clock: set.Clock}, nil
	default:
		if c, ok := newSCCodec(rule); ok {
			return &single[scCell, *scCell, *scCodec]{k: c, clock: set.Clock}, nil
		}
		k := kernel.NewSlidingCounter(rule)
		return &single[scSnapCell, *scSnapCell, *kernel.SlidingCounter]{k: k, clock: set.Clock}, nil
	}
}

func settings(rule admit.Rule, opts []admit.Option) (admit.Settings, error) {
	if err := rule.Validate(); err != nil {
		return admit.Settings{}, fmt.Errorf("atomic: %w", err)
	}
	if rule.Algorithm == admit.SlidingLog {
		return admit.Settings{}, fmt.Errorf("atomic: %w: the sliding log keeps a ring of %d timestamps per key, which no single compare-and-swap can update; use locked.New (or sharded.New) for %v",
			admit.ErrUnsupported, rule.Limit, rule)
	}
	set, err := admit.NewSettings(opts...)
	if err != nil {
		return admit.Settings{}, fmt.Errorf("atomic: %w", err)
	}
	return set, nil
}

// cell is one key's lock-free state; K is what it needs to decide (a kernel,
// or a kernel with the codec of its packed word).
type cell[K any] interface {
	allowN(k K, now time.Duration, n int) admit.Decision
}

// single is a one-key limiter over any cell; PC is *C, the type whose methods
// are the cell's. The hottest forms have concrete types of their own
// ([TokenBucket], [FixedWindow]), which call the cell directly.
type single[C any, PC interface {
	*C
	cell[K]
}, K any] struct {
	c     C
	k     K
	clock clock.Clock
}

func (l *single[C, PC, K]) Allow() admit.Decision { return l.AllowN(1) }

func (l *single[C, PC, K]) AllowN(n int) admit.Decision {
	return PC(&l.c).allowN(l.k, l.clock.Now(), n)
}

// keyed is a keyed limiter: a concurrent map from key to cell. PC is *C, the
// type whose methods are the cell's.
type keyed[C any, PC interface {
	*C
	cell[K]
}, K any] struct {
	m     *xsync.MapOf[string, *C]
	k     K
	limit int
	clock clock.Clock
}

func newKeyed[C any, PC interface {
	*C
	cell[K]
}, K any](k K, rule admit.Rule, set admit.Settings) *keyed[C, PC, K] {
	return &keyed[C, PC, K]{m: xsync.NewMapOf[string, *C](), k: k, limit: rule.Limit, clock: set.Clock}
}

func (l *keyed[C, PC, K]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

func (l *keyed[C, PC, K]) AllowN(key string, n int) admit.Decision {
	now := l.clock.Now()
	c, ok := l.m.Load(key)
	if !ok {
		if n <= 0 || n > l.limit {
			// A probe, or a request that can never pass, leaves no state
			// behind: decide it on a fresh cell that is then dropped.
			return PC(new(C)).allowN(l.k, now, n)
		}
		// LoadOrCompute creates the cell once: goroutines racing on a new key
		// all get the same cell. The map keeps its own copy of the key.
		c, _ = l.m.LoadOrCompute(strings.Clone(key), func() *C { return new(C) })
	}
	return PC(c).allowN(l.k, now, n)
}
