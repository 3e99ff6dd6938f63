package atomic

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clockref"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// NewLimits returns what [New] returns for limits of one rule. For two
// rules or more it returns an error wrapping [admit.ErrUnsupported] that
// names sharded.NewLimits: the rules of a key fit no single
// compare-and-swap of the table's word. For one key, [NewLimitsLimiter]
// takes them lock-free.
func NewLimits(limits admit.Limits, opts ...admit.Option) (admit.CompositeStore, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if limits.Len() == 1 {
		return New(limits.At(0), opts...)
	}
	return nil, fmt.Errorf("%w: atomic.NewLimits(%v): the states of %d rules of a key fit no single compare-and-swap of the table's word, so atomic has no keyed composite; use sharded.NewLimits for many keys (or NewLimitsLimiter for one)",
		admit.ErrUnsupported, limits, limits.Len())
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
// pair is false for the snapshot form on every composite (tests), true
// for the pair form where the limits take it.
func newLimitsLimiter(limits admit.Limits, opts []admit.Option, pair bool) (admit.Limiter, error) {
	set, err := limitsSettings(limits, opts)
	if err != nil {
		return nil, err
	}
	if names := set.StoreOptions(); names != "" {
		return nil, fmt.Errorf("%w: atomic: %s shape a keyed store; a single-key limiter has none, use sharded.NewLimits", admit.ErrUnsupported, names)
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

// limitsSettings applies opts for NewLimitsLimiter, whose limits are
// valid, of two or more rules.
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
	return set, nil
}

// limitsLimiter is the single-key composite, its cell C (snapCell,
// pairCell): an admit.CompositeLimiter.
type limitsLimiter[C any, PC interface {
	*C
	compCell
}] struct {
	c     C
	k     *compKernel
	clock clockref.Ref
}

// limitsReserver is limitsLimiter for composites of token buckets, which
// also hand out reservations.
type limitsReserver[C any, PC interface {
	*C
	compCell
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
	v, which := compDecide(l.k, PC(&l.c), unsafe.Pointer(&l.c), l.clock.Now(), n)
	return l.k.decision(v, which)
}

// AllowNWhich implements [admit.CompositeLimiter].
func (l *limitsLimiter[C, PC]) AllowNWhich(n int) (admit.Decision, int) {
	v, which := compDecide(l.k, PC(&l.c), unsafe.Pointer(&l.c), l.clock.Now(), n)
	return l.k.decision(v, which), which
}

// ReserveN implements [admit.Reserver]: it reserves n in every rule.
func (l *limitsReserver[C, PC]) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	d, ok, t := compReserve(l.k, PC(&l.c), unsafe.Pointer(&l.c), l.clock.Now(), n, maxWait)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver]: it gives the reservation
// back in every rule.
func (l *limitsReserver[C, PC]) CancelReservation(r admit.Reservation) bool {
	return compCancel(l.k, PC(&l.c), unsafe.Pointer(&l.c), reservation.Ticket(r), l.clock.Now())
}
