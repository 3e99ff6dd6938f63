package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
)

// The exact domain of the scripts, whose numbers are Lua doubles: integers
// are exact below 2^53, and these bounds keep every sum and product the
// scripts form below it.
const (
	// MaxReading is the largest magnitude of a [WithClock] clock's reading:
	// 2^51 ns, about 26 days from the clock's origin. [Limiter.AllowN]
	// refuses readings beyond it with an error wrapping [ErrClockRange].
	// Server time is counted in microseconds from 2020-01-01 and stays within
	// the same bound until the year 2091.
	MaxReading = 1 << 51

	maxWindowUnits  = 1 << 51 // a rule's Window, in the script's units
	maxProductUnits = 1 << 52 // Limit × Window, in units, for the token bucket and sliding counter
)

// ErrClockRange is wrapped by the error of a decision whose [WithClock]
// reading lies beyond ±[MaxReading].
var ErrClockRange = errors.New("redisstore: clock reading out of range")

// DefaultPrefix is the prefix of every Redis key a [Limiter] writes, unless
// [WithPrefix] says otherwise.
const DefaultPrefix = "admit:"

// Limiter is a keyed limiter whose state lives in Redis, shared by every
// process that uses the same server, prefix and rules: one rule ([New]) or
// several enforced together on each key, a composite ([NewLimits]). Each
// decision is one round trip: one Lua script that reads the key's state,
// decides as the local kernels do, and writes the new state with a time to
// live (an admission under [WithWaitReplicas] takes a second, for WAIT). It
// is safe for concurrent use.
type Limiter struct {
	client    redis.Scripter
	script    *redis.Script
	limits    admit.Limits
	name      string // the Limits' text, which errors name
	limit     int    // the smallest Limit: no larger n ever passes
	composite bool   // two or more rules, decided by the composite script
	prefix    string
	clock     clock.Clock   // nil: the server's TIME
	unit      time.Duration // nanoseconds per unit of the script's time

	// The arguments after the reading and n of a script whose text every
	// limiter shares, boxed once: units per millisecond, TTL slack in ms, the
	// tag naming the rules and the units, stored with every state, and the
	// strategy that converts a key of other rules ('' for none); then each
	// rule's limit and Window in units, after its algorithm's letter in a
	// composite. A rule whose state is a string has a script of its own,
	// with these in its text (see script.go): own is then true, and its
	// calls send only the reading and n.
	fixed []any
	own   bool

	// inst counts the limiter's decisions, resolved once by newLimiter
	// from [WithObserver]'s Observer; nil when there is none, or when it
	// counts nothing. timed is inst.Timed(), read then: only a timed
	// instrument makes a decision read the clock.
	inst  observe.Instrument
	timed bool

	wait *waiter // WithWaitReplicas's; nil: admissions are not waited on

	// tb is the kernel of a token bucket's rule script, whose reply is the
	// bucket's debt (see fromDebt), with the rule's Window in units; nil
	// for every other script.
	tb *kernel.TokenBucket
}

// New returns a limiter for rule whose state lives in the Redis behind client
// (a *redis.Client, *redis.ClusterClient, *redis.Ring or any other
// redis.Scripter). It does not contact the server.
//
// Server time has a resolution of one microsecond, so without [WithClock]
// the rule's Window must be a whole number of microseconds and at least
// Limit microseconds, and decisions are those of the local kernels on a clock
// that ticks in microseconds. Lua computes in doubles, so New refuses, with
// an error wrapping [admit.ErrUnsupported], rules it could not decide
// exactly: a Window over 2^51 units (26 days in nanoseconds with WithClock,
// 71 years in microseconds), and for the token bucket and sliding counter a
// Limit × Window over 2^52 units. With server time that last bound is 2.3%
// short of admit's own (Limit × Window <= 2^62 ns): it allows at most 52,124
// per day where admit allows 53,375. With WithClock, counting nanoseconds, it
// allows at most 1,000 per 75 minutes, or 4,503,599 per second.
func New(client redis.Scripter, rule admit.Rule, opts ...Option) (*Limiter, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redisstore.New: the client is nil", admit.ErrInvalidOption)
	}
	limits, err := admit.NewLimits(rule) // a one-rule Limits: the rule's own error if it is invalid
	if err != nil {
		return nil, err
	}
	return newLimiter(client, limits, opts)
}

// NewLimits returns a limiter that enforces every rule of limits on each key,
// all or nothing, as admit.Limits defines it: a request for n is admitted
// only if every rule admits it at that reading, and then every rule is
// charged; if any rule denies, nothing is written. One script decides all
// the rules of a key, on one Redis key, in one round trip, so a composite
// costs no more round trips than a single rule and works on Redis Cluster as
// New's limiters do. For Limits of one rule it returns New's limiter for
// that rule, which decides, stores and names its keys exactly as New's does.
//
// Each rule must be one that [New] accepts with the same options (the same
// exactness bounds and, with server time, the same resolution); the error
// for one that is not wraps [admit.ErrUnsupported] and names it. Invalid
// Limits (the zero Limits) are an error wrapping [admit.ErrInvalidRule].
// [Limiter.AllowNWhich] also returns the index of the rule that bound a
// decision.
func NewLimits(client redis.Scripter, limits admit.Limits, opts ...Option) (*Limiter, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redisstore.NewLimits: the client is nil", admit.ErrInvalidOption)
	}
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return newLimiter(client, limits, opts)
}

// newLimiter is New and NewLimits after their checks of client and limits,
// which are valid.
func newLimiter(client redis.Scripter, limits admit.Limits, opts []Option) (*Limiter, error) {
	cfg := config{prefix: DefaultPrefix, slack: keyed.Slack}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: redisstore option %d is nil", admit.ErrInvalidOption, i)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.wait.check(client); err != nil {
		return nil, err
	}
	l := &Limiter{
		client:    client,
		limits:    limits,
		name:      limits.String(),
		limit:     limits.Limit(),
		composite: limits.Len() > 1,
		prefix:    cfg.prefix,
		clock:     cfg.clock,
		unit:      time.Nanosecond,
		wait:      cfg.wait,
	}
	if l.clock == nil {
		l.unit = time.Microsecond
	}
	for i := range limits.Len() {
		if err := l.checkDomain(limits.At(i)); err != nil {
			return nil, err
		}
	}
	// The tag names each rule as the scripts count it, its algorithm's
	// letter, Limit and Window in units ("t10/1000000"), so that a state
	// written for other rules, or counted in other units, is never misread,
	// and so that WithCarry's script can read the rules a state was written
	// under; a composite's joins its rules' with '+'. A tag in nanoseconds
	// (WithClock) starts with "ns:", one in microseconds (server time) with
	// the rules, as every tag did before the units were marked: the same
	// numbers in the two units are different rules, and their readings
	// different clocks. It stays short: a hash with a value over 64 bytes
	// leaves Redis's compact encoding, which more than doubles a composite
	// key's memory.
	tags := make([]string, limits.Len())
	for i := range limits.Len() {
		r := limits.At(i)
		tags[i] = fmt.Sprintf("%c%d/%d", algorithmLetter(r.Algorithm), r.Limit, r.Window/l.unit)
	}
	tag := strings.Join(tags, "+")
	if l.unit == time.Nanosecond {
		tag = "ns:" + tag
	}
	l.fixed = []any{int64(time.Millisecond / l.unit), int64(cfg.slack / time.Millisecond), tag, carryLetter(cfg.carry)}
	if l.composite {
		l.script = compositeScript
		for i := range limits.Len() {
			r := limits.At(i)
			l.fixed = append(l.fixed, string(algorithmLetter(r.Algorithm)), int64(r.Limit), int64(r.Window/l.unit))
		}
	} else {
		r := limits.At(0)
		l.fixed = append(l.fixed, int64(r.Limit), int64(r.Window/l.unit))
		if r.Algorithm == admit.SlidingLog {
			l.script = slidingLogScript
		} else {
			l.script = ruleScript(r, int64(time.Millisecond/l.unit), int64(cfg.slack/time.Millisecond), tag, carryLetter(cfg.carry), int64(r.Window/l.unit))
			l.own = true
			if r.Algorithm == admit.TokenBucket {
				l.tb = kernel.NewTokenBucket(admit.Rule{Algorithm: admit.TokenBucket, Limit: r.Limit, Window: r.Window / l.unit})
			}
		}
	}
	l.resolve(cfg.observer)
	return l, nil
}

// resolve asks o, if there is one, for the Instrument of l's decisions:
// once, when l is built and valid, never per decision.
func (l *Limiter) resolve(o observe.Observer) {
	if o == nil {
		return
	}
	l.inst = o.Instrument(observe.Labels{Source: "redis", Name: l.prefix, Limits: l.limits})
	l.timed = l.inst != nil && l.inst.Timed()
}

// carryLetter names a strategy in the scripts' arguments: "" for none.
func carryLetter(c policy.Carry) string {
	switch c {
	case policy.CarryConsumed:
		return "c"
	case policy.CarryProportional:
		return "p"
	case policy.CarryNothing:
		return "n"
	}
	return ""
}

// algorithmLetter names an algorithm in the scripts' tags and arguments.
func algorithmLetter(a admit.Algorithm) byte { return "tfls"[a-admit.TokenBucket] }

func unitName(unit time.Duration) string {
	if unit == time.Nanosecond {
		return "ns"
	}
	return "µs"
}

// isNil reports whether c is nil, or a nil pointer of one of go-redis's
// client types (which would otherwise fail only at the first call).
func isNil(c redis.Scripter) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// checkDomain returns an error wrapping admit.ErrUnsupported if the scripts
// cannot decide r exactly in l's units.
func (l *Limiter) checkDomain(r admit.Rule) error {
	unitName := unitName(l.unit)
	if r.Window%l.unit != 0 {
		return fmt.Errorf("%w: redisstore: rule %s: with server time (microseconds) the window must be a whole number of microseconds", admit.ErrUnsupported, r)
	}
	w := int64(r.Window / l.unit)
	if w < int64(r.Limit) {
		return fmt.Errorf("%w: redisstore: rule %s: with server time (microseconds) the window must be at least Limit microseconds", admit.ErrUnsupported, r)
	}
	if w > maxWindowUnits {
		return fmt.Errorf("%w: redisstore: rule %s: a window over 2^51 %s is beyond what Redis's Lua computes exactly", admit.ErrUnsupported, r, unitName)
	}
	if r.Algorithm == admit.TokenBucket || r.Algorithm == admit.SlidingCounter {
		if hi, lo := bits.Mul64(uint64(r.Limit), uint64(w)); hi != 0 || lo > maxProductUnits {
			return fmt.Errorf("%w: redisstore: rule %s: Limit × Window over 2^52 %s is beyond what Redis's Lua computes exactly; use a fixed window or sliding log, or a shorter window", admit.ErrUnsupported, r, unitName)
		}
	}
	return nil
}

// Rule returns the limiter's rule. A composite has several, which
// [Limiter.Limits] returns; its Rule is the zero Rule.
func (l *Limiter) Rule() admit.Rule {
	if l.composite {
		return admit.Rule{}
	}
	return l.limits.At(0)
}

// Limits returns the rules the limiter enforces on every key: New's one rule,
// or NewLimits' Limits.
func (l *Limiter) Limits() admit.Limits { return l.limits }

// Key returns the Redis key that holds key's state.
func (l *Limiter) Key(key string) string {
	return l.prefix + "{" + key + "}"
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (admit.Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether n more requests from key may pass now, in one round
// trip, and records them if so; its Decisions are those of the local
// variants (see admit.KeyedLimiter, and admit.Limits for a composite's). A
// request that can never pass (n < 0, or n above the smallest Limit) is
// denied with RetryAfter admit.Never, and n == 0 is a probe that changes
// nothing. When the server cannot be reached, or ctx ends first, it returns
// the error and a zero Decision: what to do then is the caller's choice,
// which [Keyed] makes by a [Policy].
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (admit.Decision, error) {
	d, _, err := l.AllowNWhich(ctx, key, n)
	return d, err
}

// AllowNWhich is AllowN, and also returns the index in [Limiter.Limits] of
// the rule that bound the decision: on a denial the rule with the largest
// RetryAfter, on an admission (or a probe) the rule with the smallest
// Remaining, the first in order on a tie, as admit.Limits defines it. For a
// limiter of one rule it is 0. On an error it is 0, with a zero Decision.
func (l *Limiter) AllowNWhich(ctx context.Context, key string, n int) (admit.Decision, int, error) {
	if l.inst == nil {
		return l.allowNWhich(ctx, key, n)
	}
	start := l.start()
	d, which, err := l.allowNWhich(ctx, key, n)
	l.observe(outcome(d, err), n, start)
	return d, which, err
}

// allowNWhich is AllowNWhich without observing it, for the callers that
// observe the decision themselves (Keyed).
func (l *Limiter) allowNWhich(ctx context.Context, key string, n int) (admit.Decision, int, error) {
	args, err := l.args(n)
	if err != nil {
		return admit.Decision{}, 0, err
	}
	if l.wait != nil && n > 0 && n <= l.limit {
		return l.allowAndWait(ctx, key, n, args) // a probe writes nothing: no WAIT
	}
	return l.decision(l.script.Run(ctx, l.client, []string{l.Key(key)}, args...), key, n)
}

// start returns the time a decision starts, for its latency: the zero Time,
// without reading the clock, unless l's Instrument is timed.
func (l *Limiter) start() time.Time {
	if l.timed {
		return time.Now()
	}
	return time.Time{}
}

// observe counts a decision about n, started at start (see Limiter.start),
// with outcome o. It requires l.inst != nil, which callers check first so
// that an unobserved decision costs one nil check.
func (l *Limiter) observe(o observe.Outcome, n int, start time.Time) {
	var latency time.Duration
	if l.timed {
		latency = time.Since(start)
	}
	l.inst.Observe(o, n, latency)
}

// outcome is what became of a decision that returned d and err, as
// WithObserver counts it.
func outcome(d admit.Decision, err error) observe.Outcome {
	switch {
	case err == nil && d.Allowed:
		return observe.Admitted
	case err == nil:
		return observe.Denied
	case timedOut(err):
		return observe.TimedOut
	}
	return observe.Errored
}

// timedOut reports whether err is a deadline: the context's, or the
// network's (a net.Error whose Timeout is true, as go-redis returns when a
// read or write passes the deadline it set on the connection).
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Reset forgets key's state: once it returns nil, the key's next decision,
// from this process or any other sharing the server, prefix and rule, sees a
// fresh state at its own reading. It is one round trip, one UNLINK of
// [Limiter.Key](key) (a one-line script that runs UNLINK when the client is a
// redis.Scripter without an Unlink method), and a key never written is not
// an error. Any key is accepted, as [Limiter.AllowN] accepts it; Reset reads
// no clock, so it has no reading to refuse.
//
// Redis runs one command at a time, and each decision is one script, so a
// decision concurrent with Reset is ordered wholly before it (its admission
// is forgotten with the rest of the state) or wholly after it (it decides on
// a fresh state): never half of each, never lost or counted twice. UNLINK
// rather than DEL: both remove the key from the keyspace at once, so the
// ordering is the same, but UNLINK frees a large value (a long sliding log)
// in a background thread instead of blocking the server while it does; on a
// small value it is DEL. Neither is refused on a server out of memory.
//
// Like AllowN it tells the truth about the network: when Redis does not
// answer, or ctx ends first, it returns the error, and the state may or may
// not have been deleted. So [Keyed] has no Reset (it is no admit.Store,
// whose Reset returns nothing): a reset that failed would be
// silent, which is worse than none. Call k.Limiter().Reset(ctx, key) and
// handle its error. Reset deletes whatever the Redis key holds, a state
// written under another rule with the same prefix included (which AllowN
// would refuse to read, or with [WithCarry] convert). Across a failover,
// asynchronous replication can lose the deletion as it can lose a
// decision's write: the key's old state then comes back (see
// docs/redis.md).
//
// A token bucket's Reset also deletes the key's hold (see
// [NewKeyedReserver]), in the same UNLINK: a reservation made before the
// reset can then never be cancelled against a state made after it. On a
// Redis Cluster a key whose hash tag is empty (the key "", or one that
// starts with '}') has its hold in another slot, where no reservation can
// have written one (they fail with CROSSSLOT): its Reset unlinks the state
// alone, after the server refused the pair.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	keys := []string{l.Key(key)}
	if !l.composite && l.limits.At(0).Algorithm == admit.TokenBucket {
		keys = append(keys, l.Key(key)+":hold")
	}
	err := l.unlink(ctx, keys)
	if len(keys) > 1 && redis.HasErrorPrefix(err, "CROSSSLOT") {
		err = l.unlink(ctx, keys[:1])
	}
	if err != nil {
		return fmt.Errorf("redisstore: %s, key %q: reset: %w", l.name, key, err)
	}
	return nil
}

// unlink deletes keys in one UNLINK, sent by the client or from a script.
func (l *Limiter) unlink(ctx context.Context, keys []string) error {
	if c, ok := l.client.(unlinker); ok {
		return c.Unlink(ctx, keys...).Err()
	}
	return l.client.Eval(ctx, unlinkScript, keys).Err()
}

// unlinker is a client that can send UNLINK itself: *redis.Client,
// *redis.ClusterClient, *redis.Ring.
type unlinker interface {
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// unlinkScript is Reset's one round trip through a client that offers only
// redis.Scripter. It is sent with EVAL, never EVALSHA, so that a server that
// has lost its scripts costs no second round trip.
const unlinkScript = "return redis.call('UNLINK', unpack(KEYS))"
