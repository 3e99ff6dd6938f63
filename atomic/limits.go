package atomic

import (
	"fmt"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// NewLimits returns a keyed limiter enforcing limits independently for
// every key, lock-free. For limits of one rule it returns what [New]
// returns for that rule, which is an [admit.CompositeStore] too. Keyed
// composites of two rules or more are more than one compare-and-swap on a
// table's slot can hold: for them it returns an error wrapping
// [admit.ErrUnsupported] that names sharded.NewLimits, which holds every
// composite.
func NewLimits(limits admit.Limits, opts ...admit.Option) (admit.CompositeStore, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if limits.Len() > 1 {
		return nil, fmt.Errorf("%w: atomic.NewLimits(%v): a keyed composite of %d rules is more than one compare-and-swap on a table's slot can hold; use sharded.NewLimits",
			admit.ErrUnsupported, limits, limits.Len())
	}
	return New(limits.At(0), opts...)
}

// newLimits is NewLimits for limits of two or more rules, in the pair form
// only if pair is true and the limits take it (tests pass false to run the
// snapshot on every composite).
func newLimits(limits admit.Limits, opts []admit.Option, pair bool) (admit.KeyedLimiter, error) {
	set, err := limitsSettings(limits, opts)
	if err != nil {
		return nil, err
	}
	k := newCompKernel(limits, set.ShardCount(), pair)
	if k.isPair {
		return newKeyedLimits[pairCell](k, limits, set), nil
	}
	return newKeyedLimits[snapCell](k, limits, set), nil
}

// NewLimitsLimiter returns a lock-free limiter enforcing limits, several
// rules on one key, for a single key, in the form [NewLimits] takes. For
// limits of one rule it returns what [NewLimiter] returns for that rule;
// for two or more, an [admit.CompositeLimiter], and an [admit.Reserver]
// when every rule is a token bucket. It supports the token bucket, the
// fixed window and the sliding counter; for limits with a sliding log it
// returns an error wrapping [admit.ErrUnsupported].
func NewLimitsLimiter(limits admit.Limits, opts ...admit.Option) (admit.Limiter, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if limits.Len() == 1 {
		return NewLimiter(limits.At(0), opts...)
	}
	return newLimitsLimiter(limits, opts, true)
}

// newLimitsLimiter is NewLimitsLimiter for limits of two or more rules;
// pair is newLimits's.
func newLimitsLimiter(limits admit.Limits, opts []admit.Option, pair bool) (admit.Limiter, error) {
	set, err := limitsSettings(limits, opts)
	if err != nil {
		return nil, err
	}
	if names := set.StoreOptions(); names != "" {
		return nil, fmt.Errorf("%w: atomic: %s shape a keyed store; a single-key limiter has none, use NewLimits", admit.ErrUnsupported, names)
	}
	k := newCompKernel(limits, 1, pair)
	clk := clockref.New(set.Clock)
	switch {
	case k.isPair && k.Reservable():
		r := new(pairReserver)
		r.k, r.clock = k, clk
		return r, nil
	case k.isPair:
		l := new(pairLimiter)
		l.k, l.clock = k, clk
		return l, nil
	case k.Reservable():
		r := new(limitsReserver[snapCell, *snapCell])
		r.k, r.clock = k, clk
		return r, nil
	default:
		return &limitsLimiter[snapCell, *snapCell]{k: k, clock: clk}, nil
	}
}

// limitsSettings applies opts for NewLimits and NewLimitsLimiter, whose
// limits are valid, of two or more rules.
func limitsSettings(limits admit.Limits, opts []admit.Option) (plumb.Settings, error) {
	for i := range limits.Len() {
		if r := limits.At(i); r.Algorithm == admit.SlidingLog {
			return plumb.Settings{}, fmt.Errorf("%w: atomic has no sliding log: rule %d of %d, %v, keeps a ring of %d timestamps per key, more than one compare-and-swap can update; use locked.NewLimitsLimiter (or sharded.NewLimits) for %v",
				admit.ErrUnsupported, i+1, limits.Len(), r, r.Limit, limits)
		}
	}
	set, err := plumb.ResolveLimiter("atomic", opts)
	if err != nil {
		return plumb.Settings{}, err // already "admit: invalid …: …"
	}
	if set.HashedKeys {
		return plumb.Settings{}, fmt.Errorf("%w: atomic.NewLimits: WithHashedKeys; an atomic store keeps full keys, use sharded.NewLimits to store hashes", admit.ErrUnsupported)
	}
	return set, nil
}

// compKCell is a composite cell of a keyed store (kcell) with what a
// composite adds: the index of the part that bound a decision, and
// reservations.
type compKCell interface {
	kcell[*compKernel]
	// decideWhich is decideKeyed with the index of the part that bound.
	decideWhich(k *compKernel, now time.Duration, n int, pause func()) (v kernel.Verdict, which int, live bool)
	// allowOneWhich is allowOne with the index of the part that bound.
	allowOneWhich(k *compKernel, now time.Duration, pause func()) (v kernel.Verdict, which int, ok bool)
	// reserve is compReserve on the cell.
	reserve(k *compKernel, now time.Duration, n int, maxWait time.Duration, pause func()) (d time.Duration, ok bool, ticket uint64, live bool)
	// cancel is compCancel on the cell.
	cancel(k *compKernel, ticket uint64, now time.Duration) bool
}

// limitsLimiter is the single-key composite, its cell C: an
// admit.CompositeLimiter.
type limitsLimiter[C any, PC interface {
	*C
	compKCell
}] struct {
	c     C
	k     *compKernel
	clock clockref.Ref
}

// limitsReserver is limitsLimiter for composites of token buckets, which
// also hand out reservations.
type limitsReserver[C any, PC interface {
	*C
	compKCell
}] struct {
	limitsLimiter[C, PC]
}

var (
	_ admit.CompositeLimiter = (*limitsLimiter[snapCell, *snapCell])(nil)
	_ admit.Reserver         = (*limitsReserver[snapCell, *snapCell])(nil)
)

// Limits implements [admit.CompositeLimiter].
func (l *limitsLimiter[C, PC]) Limits() admit.Limits { return l.k.Limits() }

// Allow is AllowN(1).
func (l *limitsLimiter[C, PC]) Allow() admit.Decision { return l.AllowN(1) }

// AllowN decides a request for n, with the semantics of [admit.Limits].
func (l *limitsLimiter[C, PC]) AllowN(n int) admit.Decision {
	v, which, _ := PC(&l.c).decideWhich(l.k, l.clock.Now(), n, nil)
	return l.k.decision(v, which)
}

// AllowNWhich implements [admit.CompositeLimiter].
func (l *limitsLimiter[C, PC]) AllowNWhich(n int) (admit.Decision, int) {
	v, which, _ := PC(&l.c).decideWhich(l.k, l.clock.Now(), n, nil)
	return l.k.decision(v, which), which
}

// ReserveN implements [admit.Reserver]: it reserves n in every rule.
func (l *limitsReserver[C, PC]) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, t, _ := PC(&l.c).reserve(l.k, l.clock.Now(), n, maxWait, nil)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver]: it gives the reservation
// back in every rule.
func (l *limitsReserver[C, PC]) CancelReservation(r admit.Reservation) bool {
	return PC(&l.c).cancel(l.k, reservation.Ticket(r), l.clock.Now())
}

// keyedLimits is the keyed composite store: keyed's map, rings and eviction
// protocol (keyed.go) over composite cells C. It is not a keyed value
// itself so that it has no Rule (an admit.Store's), which a composite has
// not.
type keyedLimits[C any, PC interface {
	*C
	compKCell
}] struct {
	st *keyed[C, PC, *compKernel]
}

// keyedLimitsReserver is keyedLimits for composites of token buckets, which
// also hand out reservations.
type keyedLimitsReserver[C any, PC interface {
	*C
	compKCell
}] struct {
	keyedLimits[C, PC]
}

// newKeyedLimits returns the keyed store of limits with cells C.
func newKeyedLimits[C any, PC interface {
	*C
	compKCell
}](k *compKernel, limits admit.Limits, set plumb.Settings) admit.KeyedLimiter {
	st := makeKeyed[C, PC](k, limits.At(0), set)
	st.limits, st.limit = limits, limits.Limit()
	st.horizon = k.horizon()
	l := keyedLimits[C, PC]{st: st}
	if k.Reservable() {
		return keyedLimitsReserver[C, PC]{l}
	}
	return l
}

// Limits implements [admit.CompositeStore].
func (l keyedLimits[C, PC]) Limits() admit.Limits { return l.st.k.Limits() }

// Allow implements [admit.KeyedLimiter]: AllowN(key, 1).
func (l keyedLimits[C, PC]) Allow(key string) admit.Decision {
	v, which := l.decide(key, 1)
	if v.Remaining < 0 {
		d, _ := l.redirect(key, 1)
		return d
	}
	return l.st.k.decision(v, which)
}

// AllowN implements [admit.KeyedLimiter].
func (l keyedLimits[C, PC]) AllowN(key string, n int) admit.Decision {
	v, which := l.decide(key, n)
	if v.Remaining < 0 {
		d, _ := l.redirect(key, n)
		return d
	}
	return l.st.k.decision(v, which)
}

// AllowNWhich implements [admit.CompositeStore]. A call on a missing key
// that the hooks' Keep refused (decide's Verdict is redirected) returns
// Redirect's decision and index (migrate.go).
func (l keyedLimits[C, PC]) AllowNWhich(key string, n int) (admit.Decision, int) {
	v, which := l.decide(key, n)
	if v.Remaining < 0 {
		return l.redirect(key, n)
	}
	return l.st.k.decision(v, which), which
}

// Len implements [admit.CompositeStore]; see keyed.Len.
func (l keyedLimits[C, PC]) Len() int { return l.st.Len() }

// Sweep implements [admit.CompositeStore].
func (l keyedLimits[C, PC]) Sweep() int { return l.st.Sweep() }

// Stats implements [admit.StatsReporter]; see keyed.Stats.
func (l keyedLimits[C, PC]) Stats() admit.StoreStats { return l.st.Stats() }

// Reset implements [admit.Resetter]; see keyed.Reset.
func (l keyedLimits[C, PC]) Reset(key string) { l.st.Reset(key) }

// decide is keyed.decide for a composite, which also returns the index of
// the part that bound: it looks key up, creating it if it is missing and
// the call would store something, and decides on its cell, starting over
// from the lookup when the cell is a tombstone (the eviction protocol of
// keyed.go, unchanged). A new key refused by a full store (admit.WithMaxKeys)
// is denied with the wait until there is room, and names the first part of
// the smallest Limit, as the map store does. A missing key is where the
// hooks have their say (keyed.missing): decide returns redirected for a key
// their Keep refused, deciding nothing.
func (l keyedLimits[C, PC]) decide(key string, n int) (kernel.Verdict, int) {
	st := l.st
	var now time.Duration
	if st.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else if st.clock.Coarse == nil {
		now = st.clock.C.Now()
	} else {
		now = st.clock.CoarseNow()
	}
	var pause func()
	if st.pause.Load() != nil {
		pause = st.takePause()
	}
	for {
		c, ok := st.m.Load(key)
		hook.Between(hook.AfterLookup)
		if !ok {
			now = max(now, time.Duration(st.floor.n.Load())) // the key may have been evicted as fresh at floor
			var wait time.Duration
			var m missed
			switch c, wait, m = st.missing(key, now, n > 0 && n <= st.limit); m {
			case missFresh:
				v, which, _ := PC(&st.zero).decideWhich(st.k, now, n, nil) // publishes nothing for these n
				return v, which
			case missFull:
				return kernel.Verdict{RetryAfter: wait}, st.k.least
			case missMoved:
				return redirected, 0
			}
		}
		if n == 1 && st.k.isPair { // a snapshot has no fast path
			if v, which, ok := PC(c).allowOneWhich(st.k, now, pause); ok {
				return v, which
			}
			pause = nil // called after the fast path's load
		}
		if v, which, live := PC(c).decideWhich(st.k, now, n, pause); live {
			return v, which
		}
		// A tombstone: help unlink it, then look the key up again.
		pause = nil
		st.unlink(c)
	}
}

// ReserveN implements [admit.KeyedReserver]: it reserves n in every rule.
// Its loop is decide's, and a missing key is handled as
// keyedTokenBucket.ReserveN handles it, hooks included.
func (l keyedLimitsReserver[C, PC]) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	st := l.st
	now := st.clock.Now()
	pause := st.takePause()
	for {
		c, ok := st.m.Load(key)
		hook.Between(hook.AfterLookup)
		if !ok {
			now = max(now, time.Duration(st.floor.n.Load())) // the key may have been evicted as fresh at floor
			// Decide on a fresh state first: a reservation that would take
			// nothing (n == 0, n out of range, or too long a wait) needs no
			// cell and leaves nothing behind.
			var s [admit.MaxLimits]kernel.PartState
			d, ok := st.k.Reserve(s[:st.k.n], now, n, maxWait)
			var wait time.Duration
			var m missed
			switch c, wait, m = st.missing(key, now, ok && n != 0); m {
			case missFresh:
				return reservation.New(d, n, 0), ok
			case missFull:
				return reservation.New(wait, n, 0), false
			case missMoved:
				if r, ok, moved := st.reserveElsewhere(key, n); moved {
					return r, ok
				}
				continue // the hooks went meanwhile: a key like any other
			}
		}
		if d, ok, t, live := PC(c).reserve(st.k, now, n, maxWait, pause); live {
			return reservation.New(d, n, t), ok
		}
		// A tombstone: help unlink it, then look the key up again.
		pause = nil
		st.unlink(c)
	}
}

// CancelReservation implements [admit.KeyedReserver]: it gives the
// reservation back in every rule, only on the cell it was made on.
func (l keyedLimitsReserver[C, PC]) CancelReservation(key string, r admit.Reservation) bool {
	st := l.st
	now := st.clock.Now()
	c, ok := st.m.Load(key)
	if !ok {
		return false // evicted as fresh: the reservation was due
	}
	now = max(now, time.Duration(st.floor.n.Load()))
	return PC(c).cancel(st.k, reservation.Ticket(r), now)
}
