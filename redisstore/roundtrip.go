package redisstore

// A decision's round trip to Redis: the arguments a Limiter passes to its
// script, and the decoding of the script's reply into a Decision.

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// args returns the script's arguments for a request of n at the current
// reading (a request that can never pass is sent as a probe, n = 0, for
// the state's ResetAfter).
func (l *Limiter) args(n int) ([]any, error) {
	probe := n
	if n < 0 || n > l.limit {
		probe = 0
	}
	if l.clock == nil && l.own && probe <= 1 {
		return serverTimeArgs[probe], nil
	}
	var now any = ""
	if l.clock != nil {
		t := l.clock.Now()
		if t > MaxReading || t < -MaxReading {
			return nil, fmt.Errorf("%w: %v is beyond ±2^51 ns of the clock's origin", ErrClockRange, t)
		}
		now = int64(t)
	}
	if l.own {
		return []any{now, probe}, nil
	}
	args := make([]any, 2, 2+len(l.fixed))
	args[0], args[1] = now, probe
	return append(args, l.fixed...), nil
}

// serverTimeArgs are the arguments of a call of a rule's own script on
// the server's time for n = 0 and n = 1, the most common calls, built once:
// go-redis copies a command's arguments, so one slice serves every call.
var serverTimeArgs = [2][]any{{"", 0}, {"", 1}}

// decision decodes the script's reply to a request of n: the Decision and
// the index of the rule that bound it.
func (l *Limiter) decision(cmd *redis.Cmd, key string, n int) (admit.Decision, int, error) {
	reply, err := cmd.Result()
	if err != nil {
		return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: %w", l.name, key, err)
	}
	if l.tb != nil {
		if d, ok := l.fromDebt(reply, n); ok {
			return d, 0, nil
		}
		if vals, ok := reply.([]any); !ok || len(vals) != 4 {
			return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: the script replied %v, want the bucket's debt (an integer from -1-%d to %d that the kernel agrees with) or its state ({ahead, frac})", l.name, key, reply, l.tb.Capacity(), l.tb.Capacity())
		}
	}
	want := 4 // allowed, remaining, retry-after, reset-after
	if l.composite {
		want = 5 // and the rule that bound
	}
	// The reply's integers, read from go-redis's []any without the []int64
	// that cmd.Int64Slice would allocate.
	var res [5]int64
	vals, ok := reply.([]any)
	ok = ok && len(vals) == want
	for i := 0; ok && i < want; i++ {
		res[i], ok = vals[i].(int64)
	}
	if !ok || (l.composite && (res[4] < 0 || res[4] >= int64(l.limits.Len()))) {
		return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: the script replied %v, want %d integers", l.name, key, reply, want)
	}
	which := 0
	if l.composite {
		which = int(res[4])
	}
	never := n < 0 || n > l.limit
	if never {
		which = l.neverBinds(n)
	}
	d := admit.Decision{
		Allowed:    res[0] == 1,
		Limit:      l.limits.At(which).Limit,
		Remaining:  int(res[1]),
		RetryAfter: time.Duration(res[2]) * l.unit,
		ResetAfter: time.Duration(res[3]) * l.unit,
	}
	if never {
		d.Allowed, d.Remaining, d.RetryAfter = false, 0, admit.Never
	}
	return d, which, nil
}

// fromDebt decodes the reply of a token bucket's rule script (see
// lua/tokenbucket_reply.lua) to a request of n: an integer, the bucket's
// debt before the request (units owed, at most the capacity), or -1 - debt
// for a denial; or, for a state more than a window ahead of the reading,
// that state as {tat - now, frac}. The Decision is the kernel's on the
// same state at reading 0: the token bucket's arithmetic depends only on
// how far the state is ahead of the reading, which the debt says (debt =
// ahead × Limit + frac, frac < Limit), so the script need not compute,
// and Redis need not build and convert, the four figures. ok is false for
// any other reply (a KeyedReserver's script replies four integers, which
// decision reads), and for one whose admission the kernel does not make
// on that state, a script that disagrees with the kernel, which decision
// then reports as a reply it cannot read.
func (l *Limiter) fromDebt(reply any, n int) (d admit.Decision, ok bool) {
	var s kernel.TokenBucketState
	var admitted bool
	switch r := reply.(type) {
	case int64:
		admitted = r >= 0
		debt := r
		if !admitted {
			debt = -1 - r
		}
		limit := int64(l.limit)
		if debt > l.tb.Capacity() {
			return d, false
		}
		if debt > 0 {
			s = l.tb.State(time.Duration(debt/limit), debt%limit)
		}
	case []any:
		if len(r) != 2 {
			return d, false
		}
		ahead, ok1 := r[0].(int64)
		frac, ok2 := r[1].(int64)
		if !ok1 || !ok2 || ahead <= 0 || frac < 0 || frac >= int64(l.limit) {
			return d, false
		}
		s = l.tb.State(time.Duration(ahead), frac)
		admitted = n == 0
	default:
		return d, false
	}
	v := l.tb.Decide(&s, 0, n)
	if n >= 0 && n <= l.limit && v.Allowed != admitted {
		return d, false
	}
	d = admit.Decision{Allowed: v.Allowed, Limit: l.limit, Remaining: v.Remaining, RetryAfter: v.RetryAfter * l.unit, ResetAfter: v.ResetAfter * l.unit}
	if n < 0 || n > l.limit {
		d.RetryAfter = admit.Never
	}
	return d, true
}

// neverBinds returns the index of the rule that binds a request for n that
// can never pass: the first whose Limit is below n, whose RetryAfter is
// admit.Never, or the first of all for n < 0, which every rule refuses.
func (l *Limiter) neverBinds(n int) int {
	for i := range l.limits.Len() {
		if n > l.limits.At(i).Limit {
			return i
		}
	}
	return 0
}
