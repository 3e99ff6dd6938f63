package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
)

// Call is one decision of a batch: what to ask (Limiter, Key, N) and, once
// [AllowBatch] returns, the answer (Decision, or Err as AllowN would have
// returned it).
type Call struct {
	Limiter *Limiter
	Key     string
	N       int

	Decision admit.Decision
	Err      error
}

// pipeliner is a client that can pipeline: *redis.Client,
// *redis.ClusterClient, *redis.Ring.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// AllowBatch decides every call in one round trip: their scripts are sent
// together in a pipeline, and the server runs them one after another, in
// order, exactly as that sequence of AllowN calls would have been decided.
// Each call is decided on its own: a denied call does not undo another's
// admission. It pays where one request must pass several limits (per user,
// per API, per address) or one caller decides for many keys: n decisions
// cost about one round trip instead of n (see docs/redis.md). Several rules
// on the same key, all or nothing, are one composite limiter's call
// ([NewLimits]); its Decision is the composite's.
//
// Every call's Limiter must use the same client, one that can pipeline (a
// *redis.Client, *redis.ClusterClient or *redis.Ring); otherwise AllowBatch
// decides nothing and returns an error wrapping admit.ErrInvalidOption. A
// limiter built with [WithWaitReplicas] is refused the same way, with an
// error wrapping admit.ErrUnsupported: a batch's admissions are not waited
// on. A
// call's own failure (the network, ctx, a clock reading out of range) is in
// its Err; when the server has lost the scripts, the calls that met
// NOSCRIPT are sent again with EVAL, in order, in a second round trip.
func AllowBatch(ctx context.Context, calls []Call) error {
	if len(calls) == 0 {
		return nil
	}
	first := calls[0].Limiter
	for i := range calls {
		if l := calls[i].Limiter; l == nil || l.client != first.client {
			return fmt.Errorf("%w: redisstore.AllowBatch: call %d's Limiter is nil or uses another client than call 0's", admit.ErrInvalidOption, i)
		}
		if calls[i].Limiter.wait != nil {
			return fmt.Errorf("%w: redisstore.AllowBatch: call %d's Limiter waits for replicas (WithWaitReplicas), which a batch does not; call its AllowN", admit.ErrUnsupported, i)
		}
	}
	client, ok := first.client.(pipeliner)
	if !ok {
		return fmt.Errorf("%w: redisstore.AllowBatch: the client, a %T, cannot pipeline", admit.ErrInvalidOption, first.client)
	}

	// One clock reading before and one after, for every call whose
	// limiter's Instrument is timed.
	var start time.Time
	for i := range calls {
		if calls[i].Limiter.timed {
			start = time.Now()
			break
		}
	}

	cmds := make([]*redis.Cmd, len(calls))
	args := make([][]any, len(calls))
	send := func(eval bool, which []int) {
		pipe := client.Pipeline()
		for _, i := range which {
			c := &calls[i]
			keys := []string{c.Limiter.Key(c.Key)}
			if eval {
				cmds[i] = c.Limiter.script.Eval(ctx, pipe, keys, args[i]...)
			} else {
				cmds[i] = c.Limiter.script.EvalSha(ctx, pipe, keys, args[i]...)
			}
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
	}

	all := make([]int, 0, len(calls))
	for i := range calls {
		c := &calls[i]
		c.Decision, c.Err = admit.Decision{}, nil
		if args[i], c.Err = c.Limiter.args(c.N); c.Err == nil {
			all = append(all, i)
		}
	}
	if len(all) > 0 {
		send(false, all)
		var lost []int
		for _, i := range all {
			if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
				lost = append(lost, i)
			}
		}
		if len(lost) > 0 {
			send(true, lost)
		}
		for _, i := range all {
			c := &calls[i]
			c.Decision, _, c.Err = c.Limiter.decision(cmds[i], c.Key, c.N)
		}
	}
	observeBatch(calls, start)
	return nil
}

// observeBatch counts every call of a decided batch begun at start (a zero
// Time if no limiter is timed) on its limiter's Instrument, if it has one.
func observeBatch(calls []Call, start time.Time) {
	var latency time.Duration
	if !start.IsZero() {
		latency = time.Since(start)
	}
	for i := range calls {
		c := &calls[i]
		if inst := c.Limiter.inst; inst != nil {
			var l time.Duration
			if c.Limiter.timed {
				l = latency
			}
			inst.Observe(outcome(c.Decision, c.Err), c.N, l)
		}
	}
}
