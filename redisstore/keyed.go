package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
)

// Mode is what a [Keyed] limiter decides when Redis does not answer in time.
type Mode int

// The failure modes. The zero Mode is none of them: a [Policy] must choose.
const (
	// FailClosed denies: nothing passes while Redis is down. A denial then
	// has Remaining 0, ResetAfter 0 and RetryAfter one token's interval,
	// Window/Limit rounded up, so that a client that honours it retries at
	// the rule's own pace (for a composite, the longest of its rules'
	// intervals, and the Limit of that rule).
	FailClosed Mode = iota + 1
	// FailOpen admits everything: no request is refused because of Redis, and
	// no limit is enforced while it is down. An admission then has Remaining 0
	// and ResetAfter 0, since nothing is known of the budget (and, for a
	// composite, the Limit of its first rule).
	FailOpen
	// FailLocal asks Policy.Local, a limiter of this process (locked.New,
	// say): a limit is still enforced, but each process enforces its own, so
	// N processes admit up to N times the local rule between them. Give the
	// local limiter a share of the rule (Limit / N) to keep the total; for a
	// composite, a local composite of the rules' shares (locked.NewLimits).
	FailLocal
)

func (m Mode) String() string {
	switch m {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailLocal:
		return "fail-local"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Policy says how a [Keyed] limiter turns a Redis call into an
// admit.KeyedLimiter's Decision, which has no room for an error.
type Policy struct {
	// Mode is what to decide when a call fails or times out. Required.
	Mode Mode
	// Timeout bounds each call, round trip and reconnection included. It is
	// the most a request waits on Redis before the Mode decides, so choose it
	// as the latency you can afford to add: a few milliseconds on a local
	// network. Required, > 0.
	Timeout time.Duration
	// Local is the limiter asked in FailLocal mode; required then, and
	// refused in the others.
	Local admit.KeyedLimiter
	// Backoff is how long a Keyed limiter stops asking Redis once a call has
	// failed (the circuit opens): until it has passed, every call is decided
	// by Mode at once, without a round trip, and OnError is given an error
	// wrapping [ErrCircuitOpen]. Then one call at a time goes to Redis as a
	// probe: when one succeeds, the circuit closes and calls go to Redis
	// again; when it fails, another Backoff starts. So while Redis is down,
	// only the calls already on their way when it failed and one probe per
	// Backoff wait for Timeout, and decisions come from Redis again about a
	// Backoff after its return (after a restart, go-redis may add up to a
	// second of its own before it dials again). Any error opens the circuit
	// but Redis's answers about one key (a state of another rule or type).
	// Zero means [DefaultBackoff]; negative is refused.
	Backoff time.Duration
	// Clock times the Backoff; nil means clock.System(). Tests pass a
	// clock.Fake and advance it past the Backoff to let a probe through.
	Clock clock.Clock
	// OnError, if not nil, is called with every failed call's key and error
	// before the Mode decides, the calls the Backoff keeps from Redis
	// included: count and log there. It must be safe for concurrent use and
	// should not block.
	OnError func(key string, err error)
}

// DefaultBackoff is a [Policy]'s Backoff when it gives none: after a failure,
// Redis is asked again by one call every 100 ms until it answers.
const DefaultBackoff = 100 * time.Millisecond

// ErrCircuitOpen is wrapped by the error OnError is given for a call that a
// [Keyed] limiter decided without asking Redis, because a call failed and no
// probe has succeeded since: the failure was less than Policy.Backoff ago, or
// a probe is on its way.
var ErrCircuitOpen = errors.New("redisstore: Redis not asked, a recent call failed (circuit open)")

// Keyed adapts a [Limiter] to admit.KeyedLimiter, for code written against
// the local variants (an httplimit middleware, admit.WaitKey): every call is
// a Redis round trip bounded by Policy.Timeout, and a call that fails is
// decided by Policy.Mode. After a failure it is a circuit breaker: calls are
// decided by the Mode at once, without waiting on Redis, until a probe after
// Policy.Backoff finds Redis answering again. It is safe for concurrent use.
// It reports to the Instrument of the Limiter's [WithObserver], which counts
// the Policy's Decisions as observe.FellBack.
//
// For a composite limiter (redisstore.NewLimits) it also has admit.CompositeStore's
// Limits and AllowNWhich, but not the rest of that interface: Len and Sweep
// count and drop keys held in this process, and a Redis store holds none
// (Redis expires them); Reset is the Limiter's, which returns an error (see
// [Limiter.Reset]).
//
// Keyed has no reservations, so admit.WaitKey polls it: each waiter sleeps
// for its denial's RetryAfter and asks again, and waiters of one key wake
// together to race for a token. For a token bucket, [NewKeyedReserver]
// returns a [KeyedReserver] instead, whose waiters are handed successive
// slots across every process sharing the server.
type Keyed struct {
	l        *Limiter
	policy   Policy
	closed   time.Duration // RetryAfter of a fail-closed denial
	closedBy int           // the rule whose interval closed is
	br       breaker
}

var (
	_ admit.KeyedLimiter = (*Keyed)(nil)
	_ interface {
		Limits() admit.Limits
		AllowNWhich(key string, n int) (admit.Decision, int)
	} = (*Keyed)(nil)
)

// NewKeyed returns l behind policy. It checks the policy, and that the
// client honours context deadlines, without which no timeout could be kept:
// a *redis.Client, *redis.ClusterClient or *redis.Ring must be built with
// ContextTimeoutEnabled: true (other redis.Scripter implementations are
// trusted to honour them).
func NewKeyed(l *Limiter, policy Policy) (*Keyed, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: redisstore.NewKeyed: the Limiter is nil", admit.ErrInvalidOption)
	}
	switch policy.Mode {
	case FailClosed, FailOpen:
		if policy.Local != nil {
			return nil, fmt.Errorf("%w: redisstore.Policy: Local is used only in FailLocal mode, not %v", admit.ErrInvalidOption, policy.Mode)
		}
	case FailLocal:
		if policy.Local == nil {
			return nil, fmt.Errorf("%w: redisstore.Policy: FailLocal needs a Local limiter, such as locked.New(rule)", admit.ErrInvalidOption)
		}
	default:
		return nil, fmt.Errorf("%w: redisstore.Policy: Mode %v; choose FailClosed, FailOpen or FailLocal", admit.ErrInvalidOption, policy.Mode)
	}
	if policy.Timeout <= 0 {
		return nil, fmt.Errorf("%w: redisstore.Policy: Timeout %v; want the longest a request may wait on Redis, > 0", admit.ErrInvalidOption, policy.Timeout)
	}
	if l.wait != nil && policy.Timeout <= l.wait.timeout {
		// Every admission waiting on a slow replica would end at the
		// deadline, decided by the Mode, before WAIT could acknowledge it.
		return nil, fmt.Errorf("%w: redisstore.Policy: Timeout %v is not longer than the limiter's WithWaitReplicas timeout, %v: a call would give up before the replicas acknowledge; choose a Timeout above %v plus the two round trips of an admission", admit.ErrInvalidOption, policy.Timeout, l.wait.timeout, l.wait.timeout)
	}
	switch {
	case policy.Backoff < 0:
		return nil, fmt.Errorf("%w: redisstore.Policy: Backoff %v; want how long to stop asking Redis after a failure, > 0, or 0 for DefaultBackoff (%v)", admit.ErrInvalidOption, policy.Backoff, DefaultBackoff)
	case policy.Backoff == 0:
		policy.Backoff = DefaultBackoff
	}
	if f, isFake := policy.Clock.(*clock.Fake); isFake && f == nil {
		return nil, fmt.Errorf("%w: redisstore.Policy: Clock is a nil *clock.Fake; pass clock.NewFake(), or leave it nil for clock.System()", admit.ErrInvalidOption)
	}
	if policy.Clock == nil {
		policy.Clock = clock.System()
	}
	if !honoursDeadlines(l.client) {
		return nil, fmt.Errorf("%w: redisstore.NewKeyed: the client ignores context deadlines, so Policy.Timeout could not be kept; build it with ContextTimeoutEnabled: true", admit.ErrInvalidOption)
	}
	k := &Keyed{l: l, policy: policy, br: breaker{backoff: policy.Backoff, clock: policy.Clock}}
	for i := range l.limits.Len() {
		r := l.limits.At(i)
		interval := r.Window / time.Duration(r.Limit)
		if r.Window%time.Duration(r.Limit) != 0 {
			interval++
		}
		if interval > k.closed {
			k.closed, k.closedBy = interval, i
		}
	}
	return k, nil
}

func honoursDeadlines(c redis.Scripter) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Limiter returns the Redis limiter behind k.
func (k *Keyed) Limiter() *Limiter { return k.l }

// Limits returns the rules of the Redis limiter behind k.
func (k *Keyed) Limits() admit.Limits { return k.l.limits }

// Allow implements admit.KeyedLimiter.
func (k *Keyed) Allow(key string) admit.Decision { return k.AllowN(key, 1) }

// AllowN implements admit.KeyedLimiter: Redis's Decision if it answers within
// Policy.Timeout, the Policy's otherwise, and the Policy's at once while the
// circuit is open (see Policy.Backoff).
func (k *Keyed) AllowN(key string, n int) admit.Decision {
	d, _ := k.AllowNWhich(key, n)
	return d
}

// AllowNWhich is AllowN, and also returns the index in Limits of the rule
// that bound the decision, as [Limiter.AllowNWhich] does. A Decision of the
// Policy names the rule whose Limit it carries (see [Mode]), except that of
// Policy.Local, whose index is Local's own: its AllowNWhich's if it has
// one, else 0.
//
// With [WithObserver], a call sent to Redis is counted as the Limiter counts
// it, and a Decision of the Policy as observe.FellBack (see WithObserver).
func (k *Keyed) AllowNWhich(key string, n int) (admit.Decision, int) {
	l := k.l
	start := l.start()
	probe, pass := k.br.enter()
	if !pass {
		var err error
		if k.policy.OnError != nil {
			err = k.br.refusal(l.name, key)
		}
		return k.fail(key, n, err, start)
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.policy.Timeout)
	d, which, err := l.allowNWhich(ctx, key, n)
	cancel()
	k.br.exit(probe, err)
	if l.inst != nil {
		l.observe(outcome(d, err), n, start)
	}
	if err == nil {
		return d, which
	}
	return k.fail(key, n, err, start)
}

// fail reports err, if there is an OnError to see it, returns the Policy's
// Decision for a request of n, with the index of the rule it names, and
// counts it as observe.FellBack, timed from start, if the limiter is observed.
func (k *Keyed) fail(key string, n int, err error, start time.Time) (admit.Decision, int) {
	if k.policy.OnError != nil {
		k.policy.OnError(key, err)
	}
	d, which := k.fallBack(key, n)
	if k.l.inst != nil {
		k.l.observe(observe.FellBack, n, start)
	}
	return d, which
}

// fallBack returns the Policy's Decision for a request of n, with the index
// of the rule it names.
func (k *Keyed) fallBack(key string, n int) (admit.Decision, int) {
	limits := k.l.limits
	if n < 0 || n > k.l.limit {
		which := k.l.neverBinds(n)
		return admit.Decision{Limit: limits.At(which).Limit, RetryAfter: admit.Never}, which // never passes, whatever Redis says
	}
	switch k.policy.Mode {
	case FailOpen:
		return admit.Decision{Allowed: true, Limit: limits.At(0).Limit}, 0
	case FailLocal:
		if w, ok := k.policy.Local.(interface {
			AllowNWhich(key string, n int) (admit.Decision, int)
		}); ok {
			return w.AllowNWhich(key, n)
		}
		return k.policy.Local.AllowN(key, n), 0
	}
	if n == 0 {
		return admit.Decision{Allowed: true, Limit: limits.At(0).Limit}, 0 // a probe passes, even fail-closed
	}
	return admit.Decision{Limit: limits.At(k.closedBy).Limit, RetryAfter: k.closed}, k.closedBy
}

// breaker is Keyed's circuit breaker. Closed, it costs a call one atomic
// load. A failed call opens it: until the backoff has passed, calls are
// refused (decided by the Policy without a round trip); then one call at a
// time, the probe, goes to Redis, and only a probe's success closes it.
//
// The tempting simpler version closes it on any success. But calls that
// were sent before the failure can succeed after it (their replies were on
// the way), and closing on those would send every waiting call back to a
// server that is down; so a success closes the breaker only if it was a
// probe, sent while the breaker was open. A call that enters while the
// breaker is closed and fails reopens it, whatever a probe is doing.
//
// Ordering: on a failure, exit stores last, then until, then open, then
// (for a probe) clears probing. So a caller that sees open also sees an
// until at least as late as the failure that opened it, and a caller that
// takes probing after a failed probe cleared it sees that probe's new until
// (see claim), so no second probe starts within one backoff.
type breaker struct {
	backoff time.Duration
	clock   clock.Clock

	open    atomic.Bool
	until   atomic.Int64 // clock reading from which a probe may go; read only while open
	probing atomic.Bool  // a probe is on its way; only its caller clears it
	last    atomic.Pointer[failure]
}

type failure struct {
	err error
	at  time.Duration
}

// enter reports whether a call may go to Redis, and whether it goes as the
// probe (which must then call exit).
func (b *breaker) enter() (probe, pass bool) {
	if !b.open.Load() {
		return false, true
	}
	now := b.clock.Now()
	if now < time.Duration(b.until.Load()) {
		return false, false // the backoff has not passed: refused without a write
	}
	return b.claim(now)
}

// claim makes its caller the probe, at reading now, when no probe is on its
// way and the backoff has passed: enter's last step, after it saw until
// pass.
//
// The tempting shorter version takes probing and returns: but the until
// enter read may be stale. A probe that fails between that read and the
// CompareAndSwap stores a new until, then clears probing; the
// CompareAndSwap then succeeds, and a second probe goes to a server that
// is down within one backoff (TestCircuitUnderLoad saw it about once in
// ten runs). Taking probing first and reading until again closes that
// window: a CompareAndSwap that reads the failed probe's cleared probing
// also sees the until it stored before.
func (b *breaker) claim(now time.Duration) (probe, pass bool) {
	if !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	if now < time.Duration(b.until.Load()) {
		b.probing.Store(false)
		return false, false
	}
	return true, true
}

// exit records the outcome of a call that went to Redis.
func (b *breaker) exit(probe bool, err error) {
	switch {
	case err == nil || aboutTheKey(err):
		if probe {
			b.open.Store(false) // Redis answered
		}
	case errors.Is(err, ErrClockRange):
		// never sent: says nothing about Redis
	default:
		now := b.clock.Now()
		b.last.Store(&failure{err: err, at: now})
		b.until.Store(int64(now + b.backoff))
		b.open.Store(true)
	}
	if probe {
		b.probing.Store(false)
	}
}

// aboutTheKey reports whether err is Redis's answer about one key, which
// says the server is up: a state of another rule, or of another type.
func aboutTheKey(err error) bool {
	return redis.HasErrorPrefix(err, "ADMIT ") || redis.HasErrorPrefix(err, "WRONGTYPE")
}

// refusal returns the error of a call the open breaker kept from Redis, for
// key of the limiter whose rules' text is name.
func (b *breaker) refusal(name, key string) error {
	f := b.last.Load()
	if f == nil { // unreachable: last is stored before open
		return fmt.Errorf("%w: %s, key %q", ErrCircuitOpen, name, key)
	}
	return fmt.Errorf("%w: %s, key %q: the last call to fail did %v ago (%v); one call at a time asks Redis again every %v",
		ErrCircuitOpen, name, key, b.clock.Now()-f.at, f.err, b.backoff)
}
