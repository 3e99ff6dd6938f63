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
// replicas replicas of the primary have it: Redis's WAIT, sent after the
// decision's script, on the same connection, when the script admitted: a
// second round trip for admissions alone (Redis refuses to block in a
// script, so WAIT cannot be inside it). When fewer
// than replicas acknowledge within timeout, or WAIT fails, the admission is
// reported as an error wrapping [ErrNotReplicated], with a zero Decision,
// never as an admission; [Keyed] then decides by its Policy: denied when
// FailClosed, admitted when FailOpen (which, as when Redis is down, trades
// this guarantee for availability: while no replica acknowledges, every
// admission is the Policy's), decided by Local when FailLocal. Denials and
// probes (n = 0) write nothing, send no WAIT and are answered at once,
// whatever the replicas acknowledge: they admit nothing that a failover
// could lose.
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
// Its cost falls on admissions alone: a second round trip to the primary,
// for WAIT, and the replicas' acknowledgement, for which the primary asks
// them at once (REPLCONF GETACK), so on a healthy network an admission
// takes two round trips, one of them longer by a round trip from the
// primary to its replicas (BenchmarkWaitReplicas; docs/redis.md,
// "Failover", gives its figures). While fewer than replicas
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
// [admit.ErrUnsupported] (WAIT must follow the script on the script's own
// connection, and of go-redis's clients only a *redis.Client lends one
// out, by its Conn method). replicas
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
		return fmt.Errorf("%w: redisstore.WithWaitReplicas needs a *redis.Client (redis.NewClient, or redis.NewFailoverClient for Sentinel), not a %T, which cannot send WAIT on the script's own connection", admit.ErrUnsupported, client)
	}
	if rt := c.Options().ReadTimeout; rt > 0 && w.timeout >= rt {
		return fmt.Errorf("%w: redisstore.WithWaitReplicas(%d, %v): the client's ReadTimeout, %v, would end the call before WAIT's timeout; choose a shorter timeout", admit.ErrInvalidOption, w.replicas, w.timeout, rt)
	}
	return nil
}

// allowAndWait is allowNWhich for a limiter with WithWaitReplicas and a
// request that may be admitted (0 < n <= l.limit): it runs the script on a
// connection of its own and, only if the script admitted, sends WAIT on that
// connection, a second round trip. A denial writes nothing and is returned
// at once: a WAIT behind it would wait for the connection's earlier writes,
// the whole timeout when one of them was never acknowledged. WAIT counts
// the writes of the connection it is sent on, so the script and WAIT must
// share one: a pooled client's next command may take another. args are the
// script's arguments, from l.args(n). It requires l.client a *redis.Client,
// which newLimiter checked.
func (l *Limiter) allowAndWait(ctx context.Context, key string, n int, args []any) (admit.Decision, int, error) {
	conn := l.client.(*redis.Client).Conn()
	defer conn.Close() // back to the client's pool
	// Run sends EVALSHA, and EVAL when the server has lost the script.
	d, which, err := l.decision(l.script.Run(ctx, conn, []string{l.Key(key)}, args...), key, n)
	if err != nil || !d.Allowed {
		return d, which, err // a denial wrote nothing to acknowledge
	}
	// Built as Conn.Wait builds it, but read within the client's
	// ReadTimeout, which the timeout is under (check), not Conn.Wait's
	// timeout + 10 s.
	acked := redis.NewIntCmd(ctx, "wait", l.wait.replicas, l.wait.timeout.Milliseconds())
	_ = conn.Process(ctx, acked)
	got, err := acked.Result()
	switch {
	case err != nil:
		return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: admitted and written on the primary, but WAIT failed: %w (%w)", l.name, key, ErrNotReplicated, err)
	case got < int64(l.wait.replicas):
		return admit.Decision{}, 0, fmt.Errorf("redisstore: %s, key %q: admitted and written on the primary, but %d of the %d replicas wanted acknowledged it within %v: %w", l.name, key, got, l.wait.replicas, l.wait.timeout, ErrNotReplicated)
	}
	return d, which, nil
}
