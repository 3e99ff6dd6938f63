package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// testReserveAsAllow checks, for a keyed limiter that is an
// admit.KeyedReserver, that ReserveN with maxWait 0 decides exactly as AllowN:
// two limiters on one clock, one driven by AllowN and the other by ReserveN,
// give the same answers (a refused reservation's Delay is the denial's
// RetryAfter), and a probe after every call sees the same state in both. Both
// are swept at the same moments, and half of the runs bound the store to two
// keys, so that the full-store path and eviction are covered too.
func testReserveAsAllow(t *testing.T, v Variant, alg admit.Algorithm) {
	probe, err := v.New(admit.Rule{Algorithm: alg, Limit: 1, Window: time.Second})
	require.NoError(t, err)
	if _, ok := probe.(admit.KeyedReserver); !ok {
		t.Skip("not an admit.KeyedReserver")
	}
	rapid.Check(t, func(rt *rapid.T) {
		rule := drawRule(rt, alg)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		opts := []admit.Option{admit.WithClock(fake), admit.WithShards(1)}
		if rapid.Bool().Draw(rt, "full") {
			opts = append(opts, admit.WithMaxKeys(2))
		}
		allowing, err := v.New(rule, opts...)
		require.NoError(rt, err)
		lim, err := v.New(rule, opts...)
		require.NoError(rt, err)
		reserving := lim.(admit.KeyedReserver)
		keys := []string{"a", "b", "c"}
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*rule.Window)).Draw(rt, "advance")))
			case 2:
				fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
			case 3:
				if s, ok := allowing.(storeLimiter); ok {
					require.Equal(rt, s.Sweep(), reserving.(storeLimiter).Sweep(), "op %d: Sweep", i)
				}
			default:
				n := rapid.IntRange(-1, rule.Limit+1).Draw(rt, "n")
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				d := allowing.AllowN(key, n)
				r, ok := reserving.ReserveN(key, n, 0)
				if ok != d.Allowed || (ok && r.Delay != 0) || (!ok && r.Delay != d.RetryAfter) {
					rt.Fatalf("%s op %d: ReserveN(t=%v, %q, %d, 0) = %v, %v; AllowN = %+v", rule, i, fake.Now(), key, n, r.Delay, ok, d)
				}
				for _, k := range keys {
					if want, got := allowing.AllowN(k, 0), reserving.AllowN(k, 0); got != want {
						rt.Fatalf("%s op %d: after ReserveN(%q, %d), a probe of %q = %+v, after AllowN %+v", rule, i, key, n, k, got, want)
					}
				}
			}
		}
	})
}
