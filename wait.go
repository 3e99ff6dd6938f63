package admit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/admit-go/admit/internal/reservation"
)

var (
	// ErrExceedsLimit is returned by the Wait functions for a request that can
	// never be admitted: n greater than the rule's Limit, or negative.
	ErrExceedsLimit = errors.New("admit: the request can never be admitted")

	// ErrWouldExceedDeadline is returned by the Wait functions, at once and
	// without consuming anything, when the request could not be admitted by
	// the context's deadline.
	ErrWouldExceedDeadline = errors.New("admit: the wait would exceed the context's deadline")
)

// Reservation is a token bucket's promise to a waiter, made by
// [Reserver.ReserveN] or [Store.ReserveN]: the tokens are taken at once, and
// are due after its field Delay (for a reservation that was refused, the
// wait that would have been needed, [Never] if n can never be admitted); its
// method N returns the number of tokens reserved. (A store of another
// algorithm reserves nothing ahead: its reservations are due at once, and
// cancel nothing.) It is a small value, free to copy; its identity is the
// limiter's own record, which [Reserver.CancelReservation] uses to give the
// tokens back at most once, and only to the limiter and key it was made on.
type Reservation = reservation.Reservation

// Reserver is a [Limiter] that can hand waiters successive slots instead of
// letting them wake together to fight for one token. The token buckets of
// every variant implement it; [WaitN] uses it when it can.
type Reserver interface {
	Limiter

	// ReserveN takes n tokens now and reports when they are due, if that is
	// within maxWait; otherwise it takes nothing and reports false, with the
	// wait that would have been needed. With maxWait 0 it decides as AllowN.
	ReserveN(n int, maxWait time.Duration) (Reservation, bool)

	// CancelReservation gives a reservation's tokens back if nothing has been
	// admitted or reserved since and it is not yet due; it reports whether it
	// did. A reservation is cancelled at most once, however often it is
	// presented (copies included), and only by the limiter that made it. It
	// is judged at the newest reading the limiter has seen since the
	// reservation, so a stale reading never finds tokens undue that a newer
	// one found due. It never lets more through than the rule allows.
	CancelReservation(r Reservation) bool
}

// keyedReserver is a keyed limiter whose keys hand out reservations: every
// [Store] and [CompositeStore], and a limiter of another package that has
// the two methods (a Redis store's token buckets). [WaitKeyN] paces a
// limiter by reservation when it is one, and polls it otherwise.
type keyedReserver interface {
	KeyedLimiter
	ReserveN(key string, n int, maxWait time.Duration) (Reservation, bool)
	CancelReservation(key string, r Reservation) bool
}

// Wait is WaitN(ctx, l, 1).
func Wait(ctx context.Context, l Limiter) error { return WaitN(ctx, l, 1) }

// WaitN blocks until l admits n, or ctx is done. It returns at once, having
// consumed nothing, with ctx's error if ctx is already done, with an error
// wrapping [ErrExceedsLimit] if n can never be admitted, and with an error
// wrapping [ErrWouldExceedDeadline] if n could not be admitted by ctx's
// deadline. A wait that ends exactly at the deadline is taken, and the
// request is admitted at that instant, whichever path (reservation or
// polling) the limiter takes.
//
// A token bucket ([Reserver]) paces waiters by reservation: each waiter takes
// its tokens at once and sleeps until they are due, so N concurrent waiters
// proceed one slot apart, at the rule's rate. If ctx is done during the
// sleep, the reservation is cancelled, giving the tokens back if no later
// waiter relies on them (see [Reserver.CancelReservation]), and ctx's error is
// returned.
//
// Other limiters (the windows) are polled: WaitN sleeps for the Decision's
// RetryAfter and asks again. Waiters for the same window all wake when it
// opens and race for it; the losers sleep again. That is correct, only less
// orderly than a bucket's slots.
//
// The sleeps use the runtime's timers (pooled, so a wait that sleeps
// allocates no timer in the steady state); the limiter's clock should be the
// system clock, or a clock that moves with real time.
func WaitN(ctx context.Context, l Limiter, n int) error {
	if r, ok := l.(Reserver); ok {
		return wait(ctx, n, r.ReserveN, r.CancelReservation)
	}
	return poll(ctx, n, l.AllowN)
}

// WaitKey is WaitKeyN(ctx, l, key, 1).
func WaitKey(ctx context.Context, l KeyedLimiter, key string) error {
	return WaitKeyN(ctx, l, key, 1)
}

// WaitKeyN is [WaitN] for one key of a keyed limiter. A limiter with the
// methods ReserveN and CancelReservation of [Store] (every [Store] and
// [CompositeStore]) is paced by them: a token bucket's waiters each take
// their tokens at once and sleep until they are due; a store that reserves
// nothing ahead refuses with the wait of its Decision, which WaitKeyN
// sleeps and asks again, as it polls. Any other keyed limiter is polled
// through AllowN.
func WaitKeyN(ctx context.Context, l KeyedLimiter, key string, n int) error {
	if r, ok := l.(keyedReserver); ok {
		return wait(ctx, n,
			func(n int, maxWait time.Duration) (Reservation, bool) { return r.ReserveN(key, n, maxWait) },
			func(res Reservation) bool { return r.CancelReservation(key, res) })
	}
	return poll(ctx, n, func(n int) Decision { return l.AllowN(key, n) })
}

// remaining returns how long ctx allows a wait to last: until its deadline
// (0 once that has passed), or Never without one.
func remaining(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return max(0, time.Until(deadline))
	}
	return Never
}

// waitError is the error of a wait refused at once: n can never pass, or
// it needs a wait longer than ctx allows (ctx's own error if ctx is done).
func waitError(ctx context.Context, n int, need, budget time.Duration) error {
	if need == Never {
		return fmt.Errorf("%w: n=%d is negative or above the rule's limit", ErrExceedsLimit, n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: n=%d needs a wait of %v, the deadline is %v away", ErrWouldExceedDeadline, n, need, budget)
}

// The two loops below agree on a wait that ends exactly at ctx's deadline:
// it is taken (the kernels admit a reservation whose wait is at most
// maxWait), and when its sleep ends at the deadline the request is decided
// once more at that instant, as a call made then would be, before ctx's
// error is returned. Only a ctx already done when the wait starts is
// refused without a decision, so that it consumes nothing.

func wait(ctx context.Context, n int, reserve func(int, time.Duration) (Reservation, bool), cancel func(Reservation) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for {
		maxWait := remaining(ctx)
		r, ok := reserve(n, maxWait)
		if !ok {
			// Refused: the wait exceeds the deadline, or n can never pass, or
			// (a keyed store at WithMaxKeys) there is no room for a new key
			// yet. In the last case the Delay is when room may appear:
			// sleep that long and ask again, if the deadline allows.
			if r.Delay == Never || r.Delay == 0 || r.Delay > maxWait {
				return waitError(ctx, n, r.Delay, maxWait)
			}
			if err := sleeper.sleep(ctx, r.Delay); err != nil {
				return err
			}
			continue
		}
		if r.Delay == 0 {
			return nil
		}
		if err := sleeper.sleep(ctx, r.Delay); err != nil {
			cancel(r)
			return err
		}
		return nil
	}
}

func poll(ctx context.Context, n int, allowN func(int) Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for {
		d := allowN(n)
		if d.Allowed {
			return nil
		}
		maxWait := remaining(ctx)
		if d.RetryAfter == Never || d.RetryAfter > maxWait {
			return waitError(ctx, n, d.RetryAfter, maxWait)
		}
		if err := sleeper.sleep(ctx, d.RetryAfter); err != nil {
			return err
		}
	}
}

// timerPool reuses stopped timers, so that a wait that sleeps allocates no
// timer in the steady state. Since Go 1.23 a stopped timer's channel never
// delivers a stale tick, so a pooled timer can be Reset and reused as it is.
type timerPool struct{ p sync.Pool }

// sleeper is the pool the Wait functions sleep on. Tests inside a synctest
// bubble swap it for a fresh pool, since a timer made outside a bubble runs
// on real time.
var sleeper = new(timerPool)

// sleep waits for d, or until ctx is done; when both happen at once, the
// sleep is over (nil). "At once" is judged by the clock, not by which
// channel the select saw first: a ctx whose deadline is the sleep's end can
// be done before the timer's channel is ready (synctest fires timers of one
// instant in no set order), and Stop would then report the timer stopped in
// time, although its end has come.
func (tp *timerPool) sleep(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	t, _ := tp.p.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C:
		tp.p.Put(t)
		return nil
	case <-ctx.Done():
		fired := !t.Stop() // the timer expired too: the sleep is over
		tp.p.Put(t)
		if fired || !time.Now().Before(end) {
			return nil
		}
		return ctx.Err()
	}
}
