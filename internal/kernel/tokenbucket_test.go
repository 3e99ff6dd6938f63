package kernel

import (
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Token-bucket step tables. Every table runs on the kernel and on the reference
// model (runSteps). "L per W" refills one token every W/L, exactly: the kernel
// counts in units of 1/W of a token, so waits are whole nanoseconds, rounded up.

func tb(limit int, window time.Duration) admit.Rule { return rule(admit.TokenBucket, limit, window) }

// The seed walkthrough: 5 per 10s (one token every 2s), five requests at t=0,
// a sixth denied with RetryAfter exactly 2s, admitted at t=2s.
func TestTokenBucketSeedWalkthrough(t *testing.T) {
	runSteps(t, tb(5, 10*time.Second), []step{
		{0, 1, allowed(4, 2*time.Second)},
		{0, 1, allowed(3, 4*time.Second)},
		{0, 1, allowed(2, 6*time.Second)},
		{0, 1, allowed(1, 8*time.Second)},
		{0, 1, allowed(0, 10*time.Second)},
		{0, 1, denied(2*time.Second, 10*time.Second)},
		{at(2, 0), 1, allowed(0, 10*time.Second)},
		{at(2, 0), 1, denied(2*time.Second, 10*time.Second)},
	})
}

// The boundary burst, 3 per 10s: three at 9.0s empty the bucket; at 10.0s only
// 0.3 of a token has come back, so none of the next three passes.
func TestTokenBucketBoundaryBurst(t *testing.T) {
	const third = 3333333334 // ceil(10s/3) in ns: one token
	runSteps(t, tb(3, 10*time.Second), []step{
		{at(9, 0), 1, allowed(2, third)},
		{at(9, 0), 1, allowed(1, 6666666667)}, // ceil(20s/3)
		{at(9, 0), 1, allowed(0, 10*time.Second)},
		{at(10, 0), 1, denied(2333333334, 9*time.Second)}, // 0.7 token = 7s/3, rounded up
		{at(10, 0), 1, denied(2333333334, 9*time.Second)},
		{at(10, 0), 1, denied(2333333334, 9*time.Second)},
	})
}

// 3 per 10s counts tokens exactly: an empty bucket is full again at exactly
// t+10s, not 1ns later (no 3.333s rounding drift), and one token comes back at
// exactly ceil(10s/3) = 3333333334ns.
func TestTokenBucketExactRefill(t *testing.T) {
	runSteps(t, tb(3, 10*time.Second), []step{
		{0, 3, allowed(0, 10*time.Second)},
		{at(10, -1), 3, denied(time.Nanosecond, time.Nanosecond)},
		{at(10, 0), 3, allowed(0, 10*time.Second)},
	})
	runSteps(t, tb(3, 10*time.Second), []step{
		{0, 3, allowed(0, 10*time.Second)},
		{3333333333, 1, denied(time.Nanosecond, 6666666667)},
		{3333333334, 1, allowed(0, 10*time.Second)},
		{6666666666, 1, denied(time.Nanosecond, 6666666668)},
		{6666666667, 1, allowed(0, 10*time.Second)}, // ceil(20s/3): the second token
		{6666666667, 1, denied(3333333333, 10*time.Second)},
	})
}

// S1: TB(10/s, burst 1) is 1 per 100ms.
func TestTokenBucketBurst1(t *testing.T) {
	t0 := at(1, 0)
	ms := time.Millisecond
	runSteps(t, tb(1, 100*ms), []step{
		{t0, 1, allowed(0, 100*ms)},
		{t0, 1, denied(100*ms, 100*ms)},
		{t0 + 100*ms, 1, allowed(0, 100*ms)},
		{t0 + 200*ms, 2, impossible(0)}, // n > burst never succeeds
	})
}

// S2: TB(10/s, burst 3) is 3 per 300ms, x/time's TestLimiterBurst3 with every
// field checked.
func TestTokenBucketBurst3(t *testing.T) {
	t0 := at(1, 0)
	d := 100 * time.Millisecond
	runSteps(t, tb(3, 3*d), []step{
		{t0, 2, allowed(1, 2*d)},
		{t0, 2, denied(d, 2*d)},
		{t0, 1, allowed(0, 3*d)},
		{t0, 1, denied(d, 3*d)},
		{t0 + 1*d, 4, impossible(2 * d)},
		{t0 + 2*d, 1, allowed(1, 2*d)},
		{t0 + 3*d, 1, allowed(1, 2*d)},
		{t0 + 4*d, 1, allowed(1, 2*d)},
		{t0 + 4*d, 1, allowed(0, 3*d)},
		{t0 + 4*d, 1, denied(d, 3*d)},
		{t0 + 9*d, 3, allowed(0, 3*d)},
		{t0 + 9*d, 0, allowed(0, 3*d)},
	})
}

// S10 (Envoy's Consume): TB(1/s, burst 10) is 10 per 10s.
func TestTokenBucketEnvoyConsume(t *testing.T) {
	t0 := at(1, 0)
	ms := time.Millisecond
	runSteps(t, tb(10, 10*time.Second), []step{
		{t0, 9, allowed(1, 9*time.Second)},
		{t0, 1, allowed(0, 10*time.Second)},
		{t0 + 999*ms, 1, denied(ms, 9001*ms)},
		{t0 + 5999*ms, 6, denied(ms, 4001*ms)},
		{t0 + 6000*ms, 6, allowed(0, 10*time.Second)},
		{t0 + 6000*ms, 1, denied(time.Second, 10*time.Second)},
	})
}

// S11 (Envoy's Refill): TB(0.5/s, burst 1) is 1 per 2s: no early token.
func TestTokenBucketEnvoyRefill(t *testing.T) {
	t0 := at(1, 0)
	ms := time.Millisecond
	runSteps(t, tb(1, 2*time.Second), []step{
		{t0, 1, allowed(0, 2*time.Second)},
		{t0 + 500*ms, 1, denied(1500*ms, 1500*ms)},
		{t0 + 1500*ms, 1, denied(500*ms, 500*ms)},
		{t0 + 2000*ms - 1, 1, denied(1, 1)},
		{t0 + 2000*ms, 1, allowed(0, 2*time.Second)},
	})
}

// S12 (Envoy's MaxBucketSize): TB(1/s, burst 3) is 3 per 3s; a long idle
// refills to the capacity and no further.
func TestTokenBucketCapacity(t *testing.T) {
	t0 := at(1, 0)
	runSteps(t, tb(3, 3*time.Second), []step{
		{t0, 3, allowed(0, 3*time.Second)},
		{t0 + 10*time.Second, 4, impossible(0)},
		{t0 + 10*time.Second, 3, allowed(0, 3*time.Second)},
		{t0 + 10*time.Second, 1, denied(time.Second, 3*time.Second)},
	})
}

// S9/K4: TB(1e6/s, burst 10) is 10 per 10µs; idle 2^55 ns (elapsed × rate far
// beyond int64) and MaxInt64/2: capped at the burst, no wrap.
func TestTokenBucketLongIdle(t *testing.T) {
	us := time.Microsecond
	t0 := at(1, 0)
	t1 := t0 + 1<<55
	t2 := time.Duration(maxInt64 / 2)
	runSteps(t, tb(10, 10*us), []step{
		{t0, 10, allowed(0, 10*us)},
		{t1, 10, allowed(0, 10*us)},
		{t1, 1, denied(us, 10*us)},
		{t2, 11, impossible(0)},
		{t2, 10, allowed(0, 10*us)},
		{t2, 1, denied(us, 10*us)},
	})
}

// S28/K1/K2: the clock goes backwards. A stale reading sees the debt the
// bucket has at that reading (GCRA: TAT − reading), which is more than at any
// later reading: no refill while behind, waits measured from the caller's
// reading (so they include the staleness), nothing negative; tokens are earned
// only for time beyond the newest admission's TAT.
func TestTokenBucketClockBackwards(t *testing.T) {
	s := time.Second
	runSteps(t, tb(2, 10*s), []step{ // one token every 5s
		{at(100, 0), 2, allowed(0, 10*s)},
		{at(50, 0), 1, denied(55*s, 60*s)}, // next token at 105s
		{at(50, 0), 0, allowed(0, 60*s)},
		{at(100, 0), 1, denied(5*s, 10*s)}, // the 50s of going back earned nothing
		{at(105, -1), 1, denied(1, 5*s+1)},
		{at(105, 0), 1, allowed(0, 10*s)},
		{0, 1, denied(110*s, 115*s)},
		{-time.Hour, 1, denied(time.Hour+110*s, time.Hour+115*s)},
		{at(104, 0), 1, denied(6*s, 11*s)},
		{at(110, 0), 1, allowed(0, 10*s)},
		{at(120, 0), 2, allowed(0, 10*s)},
	})
	// A stale reading far behind the TAT is denied, though the bucket was not
	// empty at the newest reading: at 40s the bucket owes 65s, more than the
	// 10s a full bucket's worth; clamping to the newest reading would admit.
	runSteps(t, tb(2, 10*s), []step{
		{at(100, 0), 1, allowed(1, 5*s)},
		{at(40, 0), 1, denied(60*s, 65*s)}, // TAT 105s: one token from 100s on
		{at(40, 0), 0, allowed(0, 65*s)},
		{at(109, 0), 2, allowed(0, 10*s)},
		{at(110, 0), 2, denied(9*s, 9*s)},
	})
	// A stale reading within a full bucket's worth of the TAT is admitted, and
	// the TAT moves on from where it was, never backwards.
	runSteps(t, tb(4, 20*s), []step{ // one token every 5s
		{at(100, 0), 1, allowed(3, 5*s)},   // TAT 105s
		{at(96, 0), 1, allowed(1, 14*s)},   // 2.2 tokens at 96s; TAT 110s
		{at(100, 0), 2, allowed(0, 20*s)},  // 2 tokens at 100s; TAT 120s
		{at(100, 0), 1, denied(5*s, 20*s)}, // a token at 105s
		{at(120, 0), 4, allowed(0, 20*s)},
	})
}

// TestTokenBucketStaleCharge pins what a stale reading is charged. The
// request is judged at its own reading, so it is never admitted where the
// newest reading would deny it; and it is charged at its own reading too, so
// its tokens refill from then. That is not stricter than clamping the reading
// to the newest one for the requests that follow: here clamping would deny
// the last AllowN(2). The interval bound over the readings holds either way:
// 5 tokens over readings 0–5s, against 2 + floor(5·2/2) = 7.
func TestTokenBucketStaleCharge(t *testing.T) {
	s := time.Second
	runSteps(t, tb(2, 2*s), []step{ // one token a second
		{0, 2, allowed(0, 2*s)},   // TAT 2s
		{5 * s, 0, allowed(2, 0)}, // a probe at 5s: full
		{1500 * time.Millisecond, 1, allowed(0, 1500*time.Millisecond)}, // stale: owes 0.5s; TAT 3s
		{5 * s, 2, allowed(0, 2*s)},                                     // full again at 5s; clamped, the 1.5s request would have left TAT 6s
	})
}

// Negative readings are ordinary readings.
func TestTokenBucketNegativeClock(t *testing.T) {
	runSteps(t, tb(2, 2*time.Second), []step{
		{-1, 2, allowed(0, 2*time.Second)},
		{time.Second - 2, 1, denied(1, time.Second+1)},
		{time.Second - 1, 1, allowed(0, 2*time.Second)},
	})
}
