package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// TestFromDebt checks the decoding of a token bucket's rule script's reply
// (lua/tokenbucket_reply.lua) without a server: the Decision derived from
// the bucket's debt, or from a state more than a window ahead, is the
// kernel's on the state the script read, at the script's reading, for
// every rule, reading, debt and n, the n that can never pass included.
// The script's side (that it replies with that debt) is held to the
// kernels by the conformance suite.
func TestFromDebt(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 1000).Draw(t, "limit")
		window := rapid.Int64Range(int64(limit), min(1e9, (1<<52)/int64(limit))).Draw(t, "window (µs)") // the domain of server time
		rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: time.Duration(window) * time.Microsecond}
		l, err := New(c, rule)
		require.NoError(t, err)
		require.NotNil(t, l.tb, "a token bucket's rule script replies with the debt")
		k := kernel.NewTokenBucket(admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: time.Duration(window)})
		now := rapid.Int64Range(-1<<40, 1<<40).Draw(t, "now (µs)")
		n := rapid.IntRange(-1, limit+1).Draw(t, "n")
		inRange := n >= 0 && n <= limit

		// The state the script read, and what it replies.
		var s kernel.TokenBucketState
		var reply any
		if rapid.IntRange(0, 9).Draw(t, "saturated") == 0 {
			ahead := rapid.Int64Range(window+1, 1<<51).Draw(t, "ahead")
			frac := rapid.Int64Range(0, int64(limit)-1).Draw(t, "frac")
			s = k.State(time.Duration(now+ahead), frac)
			reply = []any{ahead, frac}
		} else {
			debt := rapid.Int64Range(0, k.Capacity()).Draw(t, "debt")
			if debt > 0 {
				s = k.State(time.Duration(now+debt/int64(limit)), debt%int64(limit))
			}
			reply = debt
			if probe := s; inRange && !k.Decide(&probe, time.Duration(now), n).Allowed {
				reply = -1 - debt
			}
		}
		v := k.Decide(&s, time.Duration(now), n)
		want := admit.Decision{Allowed: v.Allowed, Limit: limit, Remaining: v.Remaining, RetryAfter: v.RetryAfter * time.Microsecond, ResetAfter: v.ResetAfter * time.Microsecond}
		if !inRange {
			want.RetryAfter = admit.Never
		}
		got, which, err := l.decision(redis.NewCmdResult(reply, nil), "k", n)
		require.NoError(t, err)
		assert.Equal(t, 0, which)
		assert.Equal(t, want, got, "reply %v, n = %d", reply, n)
	})
}

// TestFromDebtRefusesBadReplies checks that a reply the kernel cannot
// agree with is an error naming it, never a Decision.
func TestFromDebtRefusesBadReplies(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	l, err := New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 10, Window: 10 * time.Millisecond}) // 10 per 10,000 µs
	require.NoError(t, err)
	capacity := int64(10 * 10_000)
	for _, reply := range []any{
		capacity + 1,                        // more than a full bucket owes
		-2 - capacity,                       // a denial owing more than that
		int64(-1),                           // a denial of one token by an empty bucket
		capacity,                            // an admission by a bucket owing all of it
		[]any{int64(0), int64(0)},           // a state that is not ahead
		[]any{int64(20_000), int64(10)},     // a fraction of a whole unit
		[]any{int64(20_000)},                // no fraction
		[]any{int64(20_000), "0"},           // not integers
		"1",                                 // not an integer
		[]any{int64(1), int64(0), int64(0)}, // three integers
	} {
		t.Run(fmt.Sprint(reply), func(t *testing.T) {
			d, _, err := l.decision(redis.NewCmdResult(reply, nil), "k", 1)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "want the bucket's debt")
			assert.Equal(t, admit.Decision{}, d)
		})
	}
	// A probe is admitted whatever the bucket owes: a probe's reply of a
	// state ahead is a Decision.
	d, _, err := l.decision(redis.NewCmdResult([]any{int64(20_000), int64(0)}, nil), "k", 0)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
}
