package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
)

// Mode is what a [Keyed] limiter decides when Redis does not answer in time.
type Mode int

// The failure modes. The zero Mode is none of them: a [Policy] must choose.
const (
	// FailClosed denies: nothing passes while Redis is down. A denial then
	// has Remaining 0, ResetAfter 0 and RetryAfter one token's interval,
	// Window/Limit rounded up, so that a client that honours it retries at
	// the rule's own pace.
	FailClosed Mode = iota + 1
	// FailOpen admits everything: no request is refused because of Redis, and
	// no limit is enforced while it is down. An admission then has Remaining 0
	// and ResetAfter 0, since nothing is known of the budget.
	FailOpen
	// FailLocal asks Policy.Local, a limiter of this process (locked.New,
	// say): a limit is still enforced, but each process enforces its own, so
	// N processes admit up to N times the local rule between them. Give the
	// local limiter a share of the rule (Limit / N) to keep the total.
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
	// OnError, if not nil, is called with every failed call's key and error
	// before the Mode decides: count and log there. It must be safe for
	// concurrent use and should not block.
	OnError func(key string, err error)
}

// Keyed adapts a [Limiter] to admit.KeyedLimiter, for code written against
// the local variants (an httplimit middleware, admit.WaitKey): every call is
// a Redis round trip bounded by Policy.Timeout, and a call that fails is
// decided by Policy.Mode. It is safe for concurrent use.
type Keyed struct {
	l      *Limiter
	policy Policy
	closed time.Duration // RetryAfter of a fail-closed denial
}

var _ admit.KeyedLimiter = (*Keyed)(nil)

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
	if !honoursDeadlines(l.client) {
		return nil, fmt.Errorf("%w: redisstore.NewKeyed: the client ignores context deadlines, so Policy.Timeout could not be kept; build it with ContextTimeoutEnabled: true", admit.ErrInvalidOption)
	}
	r := l.rule
	closed := r.Window / time.Duration(r.Limit)
	if r.Window%time.Duration(r.Limit) != 0 {
		closed++
	}
	return &Keyed{l: l, policy: policy, closed: closed}, nil
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

// Allow implements admit.KeyedLimiter.
func (k *Keyed) Allow(key string) admit.Decision { return k.AllowN(key, 1) }

// AllowN implements admit.KeyedLimiter: Redis's Decision if it answers within
// Policy.Timeout, the Policy's otherwise.
func (k *Keyed) AllowN(key string, n int) admit.Decision {
	ctx, cancel := context.WithTimeout(context.Background(), k.policy.Timeout)
	d, err := k.l.AllowN(ctx, key, n)
	cancel()
	if err == nil {
		return d
	}
	if k.policy.OnError != nil {
		k.policy.OnError(key, err)
	}
	limit := k.l.rule.Limit
	if n < 0 || n > limit {
		return admit.Decision{Limit: limit, RetryAfter: admit.Never} // never passes, whatever Redis says
	}
	switch k.policy.Mode {
	case FailOpen:
		return admit.Decision{Allowed: true, Limit: limit}
	case FailLocal:
		return k.policy.Local.AllowN(key, n)
	}
	if n == 0 {
		return admit.Decision{Allowed: true, Limit: limit} // a probe passes, even fail-closed
	}
	return admit.Decision{Limit: limit, RetryAfter: k.closed}
}
