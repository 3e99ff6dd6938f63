package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/reservation"
)

// KeyedReserver is a [Keyed] limiter of one token bucket that also hands
// waiters reservations (ReserveN and CancelReservation, as an admit.Store
// has), so that admit.WaitKey paces
// the waiters of a key across every process sharing the server, handing
// them successive slots at the rule's rate, instead of polling at each
// denial's RetryAfter and waking together to fight for one token. Build it
// with [NewKeyedReserver]; a rule of another algorithm, or a composite, has
// no reservations, and its Keyed is polled by admit.WaitKey.
//
// Reservations and cancellations are decided in Redis, one script call
// each, exactly as the local token buckets decide them (the kernel's
// Reserve, Cancel and Hold; see [KeyedReserver.ReserveN] and
// [KeyedReserver.CancelReservation]), on the same key and in the same
// encoding as the [Limiter]'s decisions, so that a KeyedReserver and a
// Limiter or Keyed of the same rule and prefix share one budget. A key with
// a reservation that may still be cancelled also has a hold, a small hash
// at [Limiter.Key](key) + ":hold", in the same Cluster slot (the key's
// hash tag) except for keys whose hash tag is empty (the key "", or one
// that starts with '}'), whose reservations a Redis Cluster refuses
// (CROSSSLOT) and the Policy decides. The hold expires with the state, and
// [Limiter.Reset] deletes it with the state.
//
// Its Allow and AllowN are Keyed's, bounded by Policy.Timeout, decided by
// Policy.Mode when Redis fails and counted by [WithObserver] as Keyed's
// are, except that they also show the key's hold their reading (see
// CancelReservation), which costs the script one more read. Reservations
// and cancellations are not observed: they are not decisions, as in the
// local stores. It is safe for concurrent use.
type KeyedReserver struct {
	k *Keyed
	// The script's arguments after the reading and n: the limiter's
	// constants, the rule's limit and window in units, boxed once.
	fixed []any
}

// localReserver is a Policy.Local that hands out reservations: every
// admit.Store and admit.CompositeStore (a token bucket's reserve ahead, the
// others reserve nothing ahead). Policy.Local may be any
// admit.KeyedLimiter, so FailLocal asks for the methods through this
// interface, and falls back to AllowN without them.
type localReserver interface {
	ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool)
	CancelReservation(key string, r admit.Reservation) bool
}

var _ localReserver = (*KeyedReserver)(nil)

// reserveScript decides a KeyedReserver's calls (lua/reserve.lua), with
// the token bucket of lua/tokenbucket.lua.
var reserveScript = mustScript("tokenbucket.lua", "reserve.lua")

// NewKeyedReserver returns l behind policy, as [NewKeyed] does, with
// reservations. l must enforce one token-bucket rule: any other rule, or a
// composite (even of token buckets), is refused with an error wrapping
// admit.ErrUnsupported; use NewKeyed for those. So is a limiter built
// with [WithWaitReplicas], whose promise a reservation, not waited on,
// would break. The policy is checked as NewKeyed checks it.
func NewKeyedReserver(l *Limiter, policy Policy) (*KeyedReserver, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: redisstore.NewKeyedReserver: the Limiter is nil", admit.ErrInvalidOption)
	}
	if l.composite {
		return nil, fmt.Errorf("%w: redisstore.NewKeyedReserver(%s): a composite has no reservations; use NewKeyed, whose waiters admit.WaitKey polls", admit.ErrUnsupported, l.name)
	}
	if r := l.limits.At(0); r.Algorithm != admit.TokenBucket {
		return nil, fmt.Errorf("%w: redisstore.NewKeyedReserver(%s): only a token bucket hands out reservations; use NewKeyed, whose waiters admit.WaitKey polls", admit.ErrUnsupported, r)
	}
	if l.wait != nil {
		// The reservation script's writes are not waited on: a reserver
		// would break WithWaitReplicas' promise for every reservation.
		return nil, fmt.Errorf("%w: redisstore.NewKeyedReserver(%s): reservations are not acknowledged by replicas; build the reserver over a Limiter without WithWaitReplicas", admit.ErrUnsupported, l.name)
	}
	k, err := NewKeyed(l, policy)
	if err != nil {
		return nil, err
	}
	r := l.limits.At(0)
	fixed := append([]any(nil), l.fixed[:4]...) // units per ms, TTL slack, tag, conversion
	fixed = append(fixed, int64(r.Limit), int64(r.Window/l.unit))
	return &KeyedReserver{k: k, fixed: fixed}, nil
}

// Limiter returns the Redis limiter behind r.
func (r *KeyedReserver) Limiter() *Limiter { return r.k.l }

// Limits returns the rule of the Redis limiter behind r, as a Limits of one.
func (r *KeyedReserver) Limits() admit.Limits { return r.k.l.limits }

// Allow implements admit.KeyedLimiter.
func (r *KeyedReserver) Allow(key string) admit.Decision { return r.AllowN(key, 1) }

// AllowN implements admit.KeyedLimiter, as [Keyed.AllowN] does, and shows
// the key's hold its reading.
func (r *KeyedReserver) AllowN(key string, n int) admit.Decision {
	k, l := r.k, r.k.l
	start := l.start()
	probe, err := r.enter(key)
	if err != nil {
		d, _ := k.fail(key, n, err, start)
		return d
	}
	var d admit.Decision
	cmd, err := r.run(key, n, "a", 0, "")
	if err == nil {
		d, _, err = l.decision(cmd, key, n)
	}
	k.br.exit(probe, err)
	if l.inst != nil {
		l.observe(outcome(d, err), n, start)
	}
	if err == nil {
		return d
	}
	d, _ = k.fail(key, n, err, start)
	return d
}

// ReserveN takes n tokens of key's
// bucket now and reports after how long they are due, if that is within
// maxWait, in one script call; otherwise it takes nothing and reports false,
// with the wait that would have been needed (admit.Never for n < 0 or n
// above the Limit). With maxWait 0 it decides as AllowN. Every process's
// reservations on a key come from the one bucket in Redis, so the waiters
// of all of them are handed successive slots: at a frozen reading, the
// Delays of N waiters behind an empty bucket are the first N slots, each
// n·Window/Limit after the last (rounded up to the clock's unit), whichever
// processes they wait in.
//
// When Redis fails (or the circuit is open, see Policy.Backoff), OnError
// is told and the Policy decides: FailClosed reserves nothing and reports
// false with the Delay of its denial, one token's interval, so that
// admit.WaitKey sleeps that long and asks again while its deadline allows;
// FailOpen reports an immediate reservation (Delay 0, true), taking nothing;
// FailLocal asks Policy.Local: its ReserveN if it has one (every
// admit.Store does), else its AllowN, as an immediate reservation if
// admitted, or false with the denial's RetryAfter. A probe (n = 0) passes
// in every mode, and n < 0 or n above the Limit never does.
func (r *KeyedReserver) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	k, l := r.k, r.k.l
	never := n < 0 || n > l.limit
	ticket := newTicket()
	probe, err := r.enter(key)
	if err == nil {
		var (
			res [3]int64
			cmd *redis.Cmd
		)
		cmd, err = r.run(key, n, "r", l.units(maxWait), strconv.FormatUint(ticket, 10))
		if err == nil {
			err = r.reply(cmd, key, res[:])
		}
		k.br.exit(probe, err)
		if err == nil {
			switch {
			case never:
				return reservation.New(admit.Never, n, 0), false // a probe showed the hold the reading
			case res[2] != 1:
				ticket = 0 // nothing to cancel: refused, or due at once
			}
			return reservation.New(time.Duration(res[1])*l.unit, n, ticket), res[0] == 1
		}
	}
	if k.policy.OnError != nil {
		k.policy.OnError(key, err)
	}
	switch {
	case never:
		return reservation.New(admit.Never, n, 0), false
	case n == 0 || k.policy.Mode == FailOpen:
		return reservation.New(0, n, 0), true
	case k.policy.Mode == FailLocal:
		if kr, ok := k.policy.Local.(localReserver); ok {
			return kr.ReserveN(key, n, maxWait)
		}
		if d := k.policy.Local.AllowN(key, n); !d.Allowed {
			return reservation.New(d.RetryAfter, n, 0), false
		}
		return reservation.New(0, n, 0), true
	}
	return reservation.New(k.closed, n, 0), false
}

// CancelReservation gives back a reservation, as the local token
// buckets do (kernel.TokenBucket.CancelHold), in one script call: it gives
// back the tokens of res, a reservation of key that must still wait, if
// nothing has been admitted or reserved on key since (the bucket is then
// exactly as if res had never been made) and its tokens are not due at the
// newest reading the key's hold has been shown; it reports whether it did.
// A reservation is cancelled at most once, however often it or a copy is
// presented, and only on the key it was made on; any KeyedReserver of the
// same server, prefix and rule may cancel it, in any process. It returns
// false when Redis fails, the circuit being open included (OnError is told):
// the tokens then stay taken, which never lets more through than the rule.
//
// The newest reading: every call of a KeyedReserver on the key shows the
// hold its reading, denials and probes included, so a cancellation at a
// stale reading gives nothing back once a newer reading found the tokens
// due. Calls of a [Limiter] or [Keyed] on the same keys admit and write as
// usual (an admission ends the hold: the state is no longer the one the
// reservation left) but do not show the hold their readings: with server
// time (no [WithClock]) that changes nothing while the server's clock does
// not step back, since a cancellation's reading, the server's TIME when it
// runs, is then the newest; with WithClock, decide on keys that waiters
// may cancel only through KeyedReservers.
//
// A reservation made by Policy.Local while Redis was failing (FailLocal)
// is cancelled by Policy.Local, whatever Redis does.
func (r *KeyedReserver) CancelReservation(key string, res admit.Reservation) bool {
	k := r.k
	ticket := reservation.Ticket(res)
	switch {
	case ticket == 0:
		return false // refused, due at once, or not a reservation: nothing to give back
	case ticket&redisTicket == 0:
		// A local reservation's ticket (internal/kernel counts them from 1, and
		// would take 292 years at 10^9 a second to reach 2^63).
		if kr, ok := k.policy.Local.(localReserver); ok {
			return kr.CancelReservation(key, res)
		}
		return false
	}
	probe, err := r.enter(key)
	if err == nil {
		var (
			reply [1]int64
			cmd   *redis.Cmd
		)
		cmd, err = r.run(key, 0, "c", 0, strconv.FormatUint(ticket, 10))
		if err == nil {
			err = r.reply(cmd, key, reply[:])
		}
		k.br.exit(probe, err)
		if err == nil {
			return reply[0] == 1
		}
	}
	if k.policy.OnError != nil {
		k.policy.OnError(key, err)
	}
	return false
}

// redisTicket marks the tickets of reservations made in Redis.
const redisTicket = 1 << 63

// newTicket returns the ticket of a reservation made in Redis: 63 random
// bits and the top bit, which tells it from a local reservation's (see
// CancelReservation). The ticket must be unique among every process's
// reservations on a key, so that a cancellation presenting it cancels only
// its own; two tickets drawn by any processes are equal with probability
// 2^-63, and a cancellation can only go astray if its ticket equals that of
// the one reservation the key holds, so the chance is at most 2^-63 per
// cancellation. A counter in Redis would need a key per limiter key that
// outlives every hold (a key's counter that expired with its hold would
// start again, and hand a new reservation the ticket of an old one still
// held by a waiter), or one counter for all keys, which a Redis Cluster
// would keep in another slot than the key's, where one script cannot reach
// it. math/rand/v2's generator is seeded at random in each process.
func newTicket() uint64 { return rand.Uint64() | redisTicket }

// enter reports whether a call on key may go to Redis, and whether as the
// breaker's probe (which must then exit); if not, the error OnError is
// given: ErrCircuitOpen, with the last failure when there is an OnError to
// read it.
func (r *KeyedReserver) enter(key string) (probe bool, err error) {
	probe, pass := r.k.br.enter()
	switch {
	case pass:
		return probe, nil
	case r.k.policy.OnError != nil:
		return false, r.k.br.refusal(r.k.l.name, key)
	}
	return false, ErrCircuitOpen
}

// run sends op for key and n (a probe for n that can never pass, as
// Limiter.AllowN sends it) to the reservation script, with maxWait in
// units and ticket, bounded by the Policy's Timeout.
func (r *KeyedReserver) run(key string, n int, op string, maxWait int64, ticket string) (*redis.Cmd, error) {
	l := r.k.l
	head, err := l.args(n) // the reading and n, and (for some scripts) more, which this one takes from r.fixed
	if err != nil {
		return nil, err
	}
	args := make([]any, 0, 2+len(r.fixed)+3)
	args = append(append(append(args, head[:2]...), r.fixed...), op, maxWait, ticket)
	ctx, cancel := context.WithTimeout(context.Background(), r.k.policy.Timeout)
	defer cancel()
	return reserveScript.Run(ctx, l.client, []string{l.Key(key), l.Key(key) + ":hold"}, args...), nil
}

// reply decodes the reservation script's reply of len(res) integers into
// res.
func (r *KeyedReserver) reply(cmd *redis.Cmd, key string, res []int64) error {
	l := r.k.l
	got, err := cmd.Int64Slice()
	if err != nil {
		return fmt.Errorf("redisstore: %s, key %q: %w", l.name, key, err)
	}
	if len(got) != len(res) {
		return fmt.Errorf("redisstore: %s, key %q: the reservation script replied %v, want %d integers", l.name, key, got, len(res))
	}
	copy(res, got)
	return nil
}

// units returns the longest wait d allows in the limiter's units, for the
// reservation script: whole units (a wait of w units is within d when
// w·unit <= d), -1 for a negative d, which no wait is within, and at most
// 2^53, above every wait the script computes, so that Lua reads it exactly.
func (l *Limiter) units(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return min(int64(d/l.unit), 1<<53)
}
