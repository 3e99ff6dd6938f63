package locked

import (
	"fmt"
	"sync"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// NewLimits returns a keyed limiter enforcing limits independently for
// every key: a request is admitted only if every rule admits it, and then
// every rule is charged (see [admit.Limits]). For Limits of one rule it
// returns exactly what [New] returns for that rule, which is an
// [admit.CompositeStore] too. For two rules or more it keeps every rule's
// state of a key together and decides them under the key's stripe lock,
// all or nothing; when every rule is a token bucket its ReserveN reserves
// ahead in every rule, so [admit.WaitKey] paces its waiters. It supports
// every mix of the four algorithms and the options [New] takes, and, as
// New, returns an error wrapping [admit.ErrUnsupported] for
// [admit.WithHashedKeys]. Other errors wrap [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption].
func NewLimits(limits admit.Limits, opts ...admit.Option) (admit.CompositeStore, error) {
	if err := limits.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if limits.Len() == 1 {
		return New(limits.At(0), opts...)
	}
	set, err := plumb.ResolveLimiter("locked", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if set.HashedKeys {
		return nil, fmt.Errorf("%w: locked.NewLimits: WithHashedKeys; a locked store keeps full keys, use sharded.NewLimits to store hashes", admit.ErrUnsupported)
	}
	return mapstore.NewLimits(limits, set), nil
}

// NewLimitsLimiter returns a limiter enforcing limits for a single key. For
// Limits of one rule it returns exactly what [NewLimiter] returns for that
// rule. For two rules or more it is an [admit.CompositeLimiter]: one mutex
// around the states of all the rules, decided together, all or nothing;
// when every rule is a token bucket it is also an [admit.Reserver], so
// [admit.Wait] paces its waiters. It supports every mix of the four
// algorithms. The error wraps [admit.ErrInvalidRule] or
// [admit.ErrInvalidOption], or [admit.ErrUnsupported] for the keyed-store
// options, as NewLimiter's does.
func NewLimitsLimiter(limits admit.Limits, opts ...admit.Option) (admit.Limiter, error) {
	if err := limits.Validate(); err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if limits.Len() == 1 {
		return NewLimiter(limits.At(0), opts...)
	}
	set, err := plumb.ResolveLimiter("locked", opts)
	if err != nil {
		return nil, err // already "admit: invalid …: …"
	}
	if names := set.StoreOptions(); names != "" {
		return nil, fmt.Errorf("%w: locked.NewLimitsLimiter: %s shape a keyed store; NewLimitsLimiter guards a single key, use NewLimits", admit.ErrUnsupported, names)
	}
	k := kernel.NewComposite(limits)
	if k.Reservable() {
		return &compositeTB{composite: composite{k: k, clock: set.Clock}}, nil
	}
	return &composite{k: k, clock: set.Clock}, nil
}

// composite guards one key's composite state with one mutex. A single key
// has no use for sizing its state to the rules (mapstore does, for many
// keys): it keeps room for admit.MaxLimits parts and uses the first k.Len().
type composite struct {
	mu    sync.Mutex
	state [admit.MaxLimits]kernel.PartState // guarded by mu
	k     *kernel.Composite
	clock clock.Clock
	// hold (kernel.CompositeHold) records the latest reservation that can
	// still be cancelled; only compositeTB's ReserveN sets it, so for other
	// composites its Ticket stays 0 and decide never looks further.
	hold kernel.CompositeHold // guarded by mu
}

var _ admit.CompositeLimiter = (*composite)(nil)

// Limits returns the rules the limiter enforces.
func (l *composite) Limits() admit.Limits { return l.k.Limits() }

func (l *composite) Allow() admit.Decision { return l.AllowN(1) }

// AllowN fills its Decision from the kernel's Verdict field by field (see
// kernel.Verdict: a Decision returned through calls is copied in memory).
func (l *composite) AllowN(n int) (d admit.Decision) {
	v, which := l.decide(n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.PartLimit(which), v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}

// AllowNWhich implements [admit.CompositeLimiter].
func (l *composite) AllowNWhich(n int) (d admit.Decision, which int) {
	v, which := l.decide(n)
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, l.k.PartLimit(which), v.Remaining, v.RetryAfter, v.ResetAfter
	return d, which
}

// decide runs the kernel on the state under the mutex and shows the hold,
// if there is one, the reading, as tokenBucket's does.
func (l *composite) decide(n int) (kernel.Verdict, int) {
	now := l.clock.Now() // read outside the lock; the kernels clamp a stale reading
	l.mu.Lock()
	v, which := l.k.Decide(l.state[:l.k.Len()], now, n)
	if l.hold.Ticket != 0 {
		return l.observe(v, which, now)
	}
	l.mu.Unlock()
	return v, which
}

// observe is decide's end for a composite with a hold: it shows the hold the
// reading now, dropping it once it can no longer be cancelled, unlocks l.mu
// and returns v and which. It is outlined so that a composite without a
// hold pays only decide's test of the Ticket.
//
//go:noinline
func (l *composite) observe(v kernel.Verdict, which int, now time.Duration) (kernel.Verdict, int) {
	if !l.k.Observe(&l.hold, l.state[:l.k.Len()], now) {
		l.hold = kernel.CompositeHold{}
	}
	l.mu.Unlock()
	return v, which
}

// compositeTB is the single-key composite of token buckets, which also hands
// out reservations (admit.Reserver) in every rule at once, recorded in
// composite's hold.
type compositeTB struct {
	composite
}

var (
	_ admit.CompositeLimiter = (*compositeTB)(nil)
	_ admit.Reserver         = (*compositeTB)(nil)
)

// ReserveN implements [admit.Reserver].
func (l *compositeTB) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok, t := l.k.ReserveHold(l.state[:l.k.Len()], &l.hold, now, n, maxWait)
	return reservation.New(d, n, t), ok
}

// CancelReservation implements [admit.Reserver].
func (l *compositeTB) CancelReservation(r admit.Reservation) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ok, drop := l.k.CancelHold(l.state[:l.k.Len()], &l.hold, reservation.Ticket(r), now)
	if drop {
		l.hold = kernel.CompositeHold{}
	}
	return ok
}
