package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
)

// Option configures a [Limiter]. A bad option makes [New] and [NewLimits]
// return an error wrapping [admit.ErrInvalidOption].
type Option func(*config) error

type config struct {
	prefix   string
	clock    clock.Clock
	carry    policy.Carry     // 0: a key of another rule is an error
	observer observe.Observer // nil: no decision observed
	wait     *waiter          // nil: no WAIT (WithWaitReplicas)

	// slack is added to every key's time to live: keyed.Slack, unless a
	// test sets it (export_test.go), as a test whose fake clock stands
	// while real time runs must, so that Redis, which expires keys on its
	// own clock, never drops a state the fake clock still holds.
	slack time.Duration
}

// WithPrefix sets the prefix of the limiter's Redis keys (default
// [DefaultPrefix]). A user key k is stored at prefix + "{" + k + "}": the
// braces are a Redis Cluster hash tag, so each key's state sits in one slot
// whatever the prefix. Limiters of different rules that share a Redis
// database need different prefixes; a key written under another rule is
// reported as an error, never misread (unless [WithCarry] converts it). The
// prefix may not contain '{' or '}'.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: WithPrefix(%q): a prefix may not contain '{' or '}', which would move the key's hash tag", admit.ErrInvalidOption, prefix)
		}
		c.prefix = prefix
		return nil
	}
}

// WithClock makes the limiter pass readings of c to Redis instead of reading
// the server's TIME. Every process sharing the limiter's keys must then read
// the same clock; it is meant for tests and simulations, which move a
// [clock.Fake] between calls, and its readings must stay within
// ±[MaxReading] (about 26 days from the clock's origin). Without it, time is
// the server's, read inside the script: one clock for every client, however
// skewed their own.
func WithClock(c clock.Clock) Option {
	return func(cfg *config) error {
		if f, isFake := c.(*clock.Fake); c == nil || (isFake && f == nil) {
			return fmt.Errorf("%w: redisstore.WithClock(nil); pass a clock.NewFake(), or leave time to the server", admit.ErrInvalidOption)
		}
		cfg.clock = c
		return nil
	}
}

// WithCarry makes the limiter convert a key written under other rules, as
// a rule change leaves it, instead of returning an error: the first time
// the key is touched under this limiter's rules, its script reads the old
// rules from the key's tag, converts the state to this limiter's rules as c
// says ([policy.CarryConsumed], [policy.CarryProportional] or
// [policy.CarryNothing], as kernel.Convert defines them for policy.Service's
// Reload), writes it under this limiter's tag, whatever the decision, and
// then decides, all in the one script call. Use it while a rule changes:
// processes deployed with the new rules then keep each user's spending.
//
// Without it a key written under other rules is an error, as it is for
// limiters of different rules that were wrongly given one prefix, which
// converting would hide. A key whose tag the script cannot read (not a
// limiter's, or counted in other units: [WithClock]'s nanoseconds against
// server time's microseconds) stays an error either way. Two processes of
// different rules that both carry convert a shared key back and forth: see
// docs/redis.md ("Changing a rule") for what that admits. Any other c is an
// error wrapping [admit.ErrInvalidOption].
func WithCarry(c policy.Carry) Option {
	return func(cfg *config) error {
		if c < policy.CarryConsumed || c > policy.CarryNothing {
			return fmt.Errorf("%w: redisstore.WithCarry(%v); pass policy.CarryConsumed, policy.CarryProportional or policy.CarryNothing", admit.ErrInvalidOption, c)
		}
		cfg.carry = c
		return nil
	}
}

// WithObserver makes the limiter report its decisions to o. [New] and
// [NewLimits] call o.Instrument once, when they have checked everything else,
// with Labels{Source: "redis", Name: the key prefix ([WithPrefix]'s, or
// [DefaultPrefix]), Limits: the limiter's limits}; no key is ever passed.
// Every decision is then counted on that Instrument, with no allocation and
// no lookup, and timed (from the call to its return, the round trip
// included) only if the Instrument's Timed said so when it was resolved:
//
//   - [Limiter.AllowN], [Limiter.AllowNWhich] and each call of [AllowBatch]
//     count one observe.Admitted or observe.Denied for a decision Redis made,
//     observe.TimedOut for an error that is a deadline (the context's
//     DeadlineExceeded, or a network error whose Timeout() is true), and
//     observe.Errored for any other error, a clock reading out of range
//     included. A call of a batch is timed as the whole batch.
//   - [Keyed] counts the same for each call it sends to Redis, and
//     observe.FellBack for every decision its Policy takes instead of Redis:
//     after a failed call (so beside that call's Errored or TimedOut) and
//     for every call the open circuit decides without asking Redis (alone:
//     nothing failed). So for a Keyed limiter, Admitted + Denied + FellBack
//     counts each decision it returned once, Errored + TimedOut the calls to
//     Redis that failed, and FellBack minus those the decisions of the open
//     circuit.
//
// [Limiter.Reset] and a batch refused as a whole are not decisions, and are
// not counted. A nil o is an error wrapping [admit.ErrInvalidOption]: leave
// the option out to observe nothing.
func WithObserver(o observe.Observer) Option {
	return func(cfg *config) error {
		if o == nil {
			return fmt.Errorf("%w: redisstore.WithObserver(nil); pass an observe.Observer (a tally, say), or leave the option out to observe nothing", admit.ErrInvalidOption)
		}
		cfg.observer = o
		return nil
	}
}
