package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
)

// ErrNotReplicated is wrapped by the error of an admission that the primary
// made and wrote, but that fewer replicas than [WithWaitReplicas] asks for
// acknowledged within its timeout (or whose WAIT failed). The admission is
// not acknowledged: [Limiter.AllowN] returns the error and a zero Decision,
// and [Keyed] decides by its Policy. Its budget was charged on the
// primary all the same (see WithWaitReplicas).
var ErrNotReplicated = errors.New("redisstore: admission not acknowledged by enough replicas")

// waiter is WithWaitReplicas' setting: the replicas that must acknowledge
// each admission, and how long the primary may wait for them.
type waiter struct {
	replicas int
	timeout  time.Duration // whole milliseconds, > 0
}

// WithWaitReplicas makes the limiter acknowledge an admission only once
// replicas replicas of the primary have it: Redis's WAIT, sent behind each
// decision's script on the same connection, in the same round trip (Redis
// refuses to block in a script, so WAIT cannot be inside it). When fewer
// than replicas acknowledge within timeout, or WAIT fails, the admission is
// reported as an error wrapping [ErrNotReplicated], with a zero Decision,
// never as an admission; [Keyed] then decides by its Policy: denied when
// FailClosed, admitted when FailOpen (which, as when Redis is down, trades
// this guarantee for availability: while no replica acknowledges, every
// admission is the Policy's), decided by Local when FailLocal. Denials and
// probes (n = 0) are answered as usual, whatever the replicas acknowledge:
// they admit nothing that a failover could lose.
//
// What it guarantees: every admission AllowN returns without an error is
// held by at least replicas replicas when it returns (WAIT returns the
// number of replicas that acknowledged every write the connection made
// before it, this decision's included). So a failover that promotes one of
// those replicas keeps it: the key's budget on the new primary is charged
// for it. With replicas equal to the number of replicas, and a failover by
// Sentinel, which promotes only one of the primary's replicas, every
// acknowledged admission survives a failover of the primary alone.
//
// What it does not guarantee. WAIT does not make Redis strongly consistent
// (Redis's documentation of WAIT says so): with replicas below the number
// of replicas, Sentinel (or Redis Cluster) may promote a replica that did
// not acknowledge, since its choice of the replica with the largest
// replication offset is best effort, and the admission is lost; a replica
// that acknowledged and then restarts without persistence has lost it too.
// An admission reported as ErrNotReplicated was written on the primary and
// charged the key's budget there: if the primary survives, the key is
// charged for a request the caller was told failed (fewer admissions, never
// more); if it fails over, the charge may or may not survive. Nor does it
// make Reset durable; and [AllowBatch] and [NewKeyedReserver], whose
// writes would not be waited on, refuse a limiter built with it (an error
// wrapping [admit.ErrUnsupported]). It
// does not order anything either: a decision on the primary is made on the
// state the primary holds, acknowledged or not.
//
// Its cost is the replicas' acknowledgement: the primary asks them at once
// (REPLCONF GETACK), so on a healthy network an admission takes one round
// trip from the primary to its replicas longer (BenchmarkWaitReplicas;
// docs/redis.md, "Failover", gives its figures). While fewer than replicas
// replicas are connected, every admission waits the whole timeout and
// fails: a failover to the only replica leaves a primary with none, which
// refuses every admission until a replica follows it again. So choose replicas no larger than the
// replicas you keep, and timeout short against your latency budget: it
// must be under the client's ReadTimeout ([New] refuses it otherwise), and
// under a [Keyed] limiter's Policy.Timeout ([NewKeyed] refuses it
// otherwise), or the call would give up first.
//
// It needs a *redis.Client, such as go-redis's redis.NewFailoverClient for
// Sentinel returns: [New] refuses other clients with an error wrapping
// [admit.ErrUnsupported] (a cluster's or ring's pipeline would send WAIT
// to a node of its choosing, not to the script's connection). replicas
// must be at least 1 and timeout a whole number of milliseconds, at least
// one (WAIT counts milliseconds, and 0 would wait forever); otherwise the
// error wraps [admit.ErrInvalidOption].
func WithWaitReplicas(replicas int, timeout time.Duration) Option {
	return func(c *config) error {
		if replicas < 1 {
			return fmt.Errorf("%w: redisstore.WithWaitReplicas(%d, %v): want the number of replicas that must hold each admission, at least 1; leave the option out not to wait", admit.ErrInvalidOption, replicas, timeout)
		}
		if timeout < time.Millisecond || timeout%time.Millisecond != 0 {
			return fmt.Errorf("%w: redisstore.WithWaitReplicas(%d, %v): want a timeout of whole milliseconds, at least 1ms, as WAIT counts them (WAIT 0 would wait forever)", admit.ErrInvalidOption, replicas, timeout)
		}
		c.wait = &waiter{replicas: replicas, timeout: timeout}
		return nil
	}
}

// check returns an error if w cannot be kept with client; a nil w (the
// option left out) is always kept.
func (w *waiter) check(client redis.Scripter) error {
	if w == nil {
		return nil
	}
	c, ok := client.(*redis.Client)
	if !ok {
		return fmt.Errorf("%w: redisstore.WithWaitReplicas needs a *redis.Client (redis.NewClient, or redis.NewFailoverClient for Sentinel), not a %T, whose pipeline would send WAIT to another connection than the script's", admit.ErrUnsupported, client)
	}
	if rt := c.Options().ReadTimeout; rt > 0 && w.timeout >= rt {
		return fmt.Errorf("%w: redisstore.WithWaitReplicas(%d, %v): the client's ReadTimeout, %v, would end the call before WAIT's timeout; choose a shorter timeout", admit.ErrInvalidOption, w.replicas, w.timeout, rt)
	}
	return nil
}

// allowAndWait is allowNWhich for a limiter with WithWaitReplicas: it
// sends the script, then WAIT, in one pipeline on one connection, and
// returns the script's Decision unless it is an admission that fewer than
// the wanted replicas acknowledged. args are the script's arguments, from
// l.args(n). It requires l.wait != nil and l.client a *redis.Client, which
// newLimiter checked.
func (l *Limiter) allowAndWait(ctx context.Context, key string, n int, args []any) (admit.Decision, int, error) {
	client := l.client.(*redis.Client)
	keys := []string{l.Key(key)}
	cmd, acked := l.sendAndWait(ctx, client, false, keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		// The server has lost the script: EVAL loads it. WAIT found
		// nothing new to wait for in the first round trip.
		cmd, acked = l.sendAndWait(ctx, client, true, keys, args)
	}
	d, which, err := l.decision(cmd, key, n)
	if err != nil || !d.Allowed || n <= 0 {
		return d, which, err // a denial or a probe wrote nothing to acknowledge
	}
	got, err := acked.Result()
	switch {
	case err != nil:
		return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: admitted and written on the primary, but WAIT failed: %w (%w)", l.name, key, ErrNotReplicated, err)
	case got < int64(l.wait.replicas):
		return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: admitted and written on the primary, but %d of the %d replicas wanted acknowledged it within %v: %w", l.name, key, got, l.wait.replicas, l.wait.timeout, ErrNotReplicated)
	}
	return d, which, nil
}

// sendAndWait sends the script (EVALSHA, or EVAL if eval) and WAIT in one
// pipeline, and returns their commands, whatever their errors.
func (l *Limiter) sendAndWait(ctx context.Context, client *redis.Client, eval bool, keys []string, args []any) (*redis.Cmd, *redis.IntCmd) {
	pipe := client.Pipeline()
	var cmd *redis.Cmd
	if eval {
		cmd = l.script.Eval(ctx, pipe, keys, args...)
	} else {
		cmd = l.script.EvalSha(ctx, pipe, keys, args...)
	}
	// Pipeliner has no Wait method (go-redis keeps blocking commands out of
	// pipelines): the command is built as Client.Wait builds it.
	acked := redis.NewIntCmd(ctx, "wait", l.wait.replicas, l.wait.timeout.Milliseconds())
	_ = pipe.Process(ctx, acked)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmd, acked
}
