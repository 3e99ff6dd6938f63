package atomic_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
)

func mustLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// compositeForms are the two forms of a composite: the snapshot, which
// every composite can take, and whatever NewLimits picks (the pair, for
// two rules that pack, on amd64).
var compositeForms = []struct {
	name string
	pair bool
}{{"snapshot", false}, {"chosen", true}}

// TestLimitsConstructors: one rule is that rule's limiter, exactly; a
// sliding log, a zero Limits and the options a store does not take are
// errors wrapping the right sentinel; composites are CompositeStores and
// CompositeLimiters, reservers when every rule is a token bucket.
func TestLimitsConstructors(t *testing.T) {
	one := mustLimits(t, "token-bucket,10,1s")
	keyed, err := admitatomic.NewLimits(one)
	require.NoError(t, err)
	want, err := admitatomic.New(one.At(0))
	require.NoError(t, err)
	assert.IsType(t, want, keyed, "NewLimits of one rule is New's limiter")
	single, err := admitatomic.NewLimitsLimiter(one)
	require.NoError(t, err)
	assert.IsType(t, &admitatomic.TokenBucket{}, single, "NewLimitsLimiter of one rule is NewLimiter's limiter")
	_, err = admitatomic.NewLimits(mustLimits(t, "sliding-log,5,1s"))
	assert.ErrorIs(t, err, admit.ErrUnsupported)

	_, err = admitatomic.NewLimits(admit.Limits{})
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	_, err = admitatomic.NewLimitsLimiter(admit.Limits{})
	assert.ErrorIs(t, err, admit.ErrInvalidRule)

	withLog := mustLimits(t, "token-bucket,10,1s + sliding-log,100,1m")
	_, err = admitatomic.NewLimits(withLog)
	require.ErrorIs(t, err, admit.ErrUnsupported)
	assert.Contains(t, err.Error(), "rule 2 of 2, sliding-log,100,1m")
	assert.Contains(t, err.Error(), "locked.NewLimitsLimiter")
	_, err = admitatomic.NewLimitsLimiter(withLog)
	assert.ErrorIs(t, err, admit.ErrUnsupported)

	both := mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")
	_, err = admitatomic.NewLimits(both, admit.WithHashedKeys())
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	_, err = admitatomic.NewLimitsLimiter(both, admit.WithMaxKeys(10))
	assert.ErrorIs(t, err, admit.ErrUnsupported)
	_, err = admitatomic.NewLimits(both, admit.WithShards(3))
	assert.ErrorIs(t, err, admit.ErrInvalidOption)

	for text, pair := range map[string]bool{
		"token-bucket,10,1s + fixed-window,1000,1h":                          true,
		"token-bucket,10,1s + token-bucket,1000,1h":                          true,
		"token-bucket,3,1s + token-bucket,9999,1s":                           true, // scaled units, with horizons
		"sliding-counter,1000,1s + fixed-window,7,1m":                        true,
		"sliding-counter,60000,1s + fixed-window,7,1m":                       false, // the counter does not pack
		"token-bucket,10,1s + sliding-counter,100,1m + fixed-window,1000,1h": false,
		"token-bucket,3,1s + token-bucket,7,1m + token-bucket,9999,1h":       false,
	} {
		if !admitatomic.PairAvailable() {
			pair = false
		}
		limits := mustLimits(t, text)
		reservable := true
		for _, r := range limits.Rules() {
			reservable = reservable && r.Algorithm == admit.TokenBucket
		}
		for _, form := range compositeForms {
			keyed, err := admitatomic.NewLimitsForm(limits, form.pair)
			require.NoError(t, err)
			want := "snapshot"
			if pair && form.pair {
				want = "pair"
			}
			assert.Equal(t, want, admitatomic.LimitsForm(keyed), "%s (%s)", text, form.name)
			store, ok := keyed.(admit.CompositeStore)
			require.True(t, ok, "%s (%s): a CompositeStore", text, form.name)
			assert.Equal(t, limits, store.Limits())
			assert.Implements(t, (*resetter)(nil), keyed)
			_, isStore := keyed.(admit.Store)
			assert.False(t, isStore, "%s: a composite has no Rule", text)
			_, reserves := keyed.(keyedReserver)
			assert.Equal(t, reservable, reserves, "%s (%s): a KeyedReserver iff every rule is a token bucket", text, form.name)

			single, err := admitatomic.NewLimitsLimiterForm(limits, form.pair)
			require.NoError(t, err)
			assert.Equal(t, want, admitatomic.LimitsForm(single), "%s (%s): single key", text, form.name)
			comp, ok := single.(admit.CompositeLimiter)
			require.True(t, ok, "%s (%s): a CompositeLimiter", text, form.name)
			assert.Equal(t, limits, comp.Limits())
			_, reserves = single.(admit.Reserver)
			assert.Equal(t, reservable, reserves, "%s (%s): a Reserver iff every rule is a token bucket", text, form.name)
		}
	}
}

// TestAllowNWhich walks a composite through scripted steps on a fake clock:
// the binding rule is the one with the smallest Remaining on an admission
// and the largest RetryAfter on a denial, the first on a tie, and the
// Decision carries its Limit.
func TestAllowNWhich(t *testing.T) {
	limits := mustLimits(t, "token-bucket,10,1s + fixed-window,15,1m")
	type step struct {
		at    time.Duration
		n     int
		want  admit.Decision
		which int
	}
	steps := []step{
		{0, 0, admit.Decision{Allowed: true, Limit: 10, Remaining: 10}, 0},                                                                                  // a probe: 10 < 15
		{0, 5, admit.Decision{Allowed: true, Limit: 10, Remaining: 5, ResetAfter: time.Minute}, 0},                                                          // 5 < 10
		{0, 5, admit.Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: time.Minute}, 0},                                                          // 0 < 5
		{0, 1, admit.Decision{Limit: 10, RetryAfter: 100 * time.Millisecond, ResetAfter: time.Minute}, 0},                                                   // the bucket is empty
		{time.Second, 5, admit.Decision{Allowed: true, Limit: 15, Remaining: 0, ResetAfter: 59 * time.Second}, 1},                                           // the window's 15 spent first
		{time.Second, 1, admit.Decision{Limit: 15, RetryAfter: 59 * time.Second, ResetAfter: 59 * time.Second}, 1},                                          // the window binds the wait
		{time.Second, 11, admit.Decision{Limit: 10, RetryAfter: admit.Never, ResetAfter: 59 * time.Second}, 0},                                              // more than 10: never, first on the tie
		{time.Minute, 3, admit.Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: time.Minute}, 0},                                                // a new window; 7 < 12
		{time.Minute, 16, admit.Decision{Limit: 10, RetryAfter: admit.Never, ResetAfter: time.Minute}, 0},                                                   // above both
		{time.Minute + 300*time.Millisecond, 0, admit.Decision{Allowed: true, Limit: 10, Remaining: 10, ResetAfter: time.Minute - 300*time.Millisecond}, 0}, // refilled; 10 < 12
	}
	for _, form := range compositeForms {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		single, err := admitatomic.NewLimitsLimiterForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		store, comp := keyed.(admit.CompositeStore), single.(admit.CompositeLimiter)
		for i, s := range steps {
			fake.Set(s.at)
			d, which := store.AllowNWhich("k", s.n)
			assert.Equal(t, s.want, d, "%s step %d: AllowNWhich(%q, %d) at %v", form.name, i, "k", s.n, s.at)
			assert.Equal(t, s.which, which, "%s step %d: which of AllowNWhich(%q, %d) at %v", form.name, i, "k", s.n, s.at)
			d, which = comp.AllowNWhich(s.n)
			assert.Equal(t, s.want, d, "%s step %d: single AllowNWhich(%d) at %v", form.name, i, s.n, s.at)
			assert.Equal(t, s.which, which, "%s step %d: which of single AllowNWhich(%d) at %v", form.name, i, s.n, s.at)
		}
	}
}

// genRule draws a rule of one of algs, small enough that a sequence of
// calls reaches its limit and large enough to vary: its window is whole
// milliseconds or an odd number of nanoseconds, so that a token bucket's
// emission interval is whole nanoseconds or not.
func genRule(t *rapid.T, label string, algs ...admit.Algorithm) admit.Rule {
	alg := rapid.SampledFrom(algs).Draw(t, label+".alg")
	limit := rapid.IntRange(1, 12).Draw(t, label+".limit")
	window := time.Duration(rapid.IntRange(1, 3000).Draw(t, label+".ms")) * time.Millisecond
	if rapid.Bool().Draw(t, label+".odd") {
		window += time.Duration(rapid.IntRange(1, 999).Draw(t, label+".ns"))
	}
	return admit.Rule{Algorithm: alg, Limit: limit, Window: window}
}

// genLimits draws limits of min to max distinct rules of algs.
func genLimits(t *rapid.T, min, max int, algs ...admit.Algorithm) admit.Limits {
	n := rapid.IntRange(min, max).Draw(t, "rules")
	var rules []admit.Rule
	for len(rules) < n {
		r := genRule(t, fmt.Sprintf("rule%d", len(rules)), algs...)
		dup := false
		for _, o := range rules {
			dup = dup || o == r
		}
		if !dup {
			rules = append(rules, r)
		}
	}
	limits, err := admit.NewLimits(rules...)
	if err != nil {
		t.Fatalf("NewLimits(%v): %v", rules, err)
	}
	return limits
}

// TestLimitsDifferential drives a composite store and a single-key
// composite with random calls on a fake clock that moves forwards and
// backwards (stale readings), and compares every answer with the kernel's,
// run sequentially: AllowNWhich, probes, requests out of range, Reset and,
// when every rule is a token bucket, reservations and their cancellations
// on the key they were made on and on others. Both forms run: the snapshot,
// and the pair where the limits take it (drawn often: two rules that pack).
func TestLimitsDifferential(t *testing.T) {
	for _, form := range compositeForms {
		t.Run("form="+form.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) { checkLimitsDifferential(t, form.pair) })
		})
	}
}

func checkLimitsDifferential(t *rapid.T, pair bool) {
	var limits admit.Limits
	switch rapid.IntRange(0, 2).Draw(t, "shape") {
	case 0: // two rules, which pack in a pair on amd64
		limits = genLimits(t, 2, 2, admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter)
	case 1: // token buckets only: reservations
		limits = genLimits(t, 2, 3, admit.TokenBucket)
	default:
		limits = genLimits(t, 2, 4, admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter)
	}
	fake := clock.NewFake()
	start := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(t, "start"))
	if r := limits.At(0); r.Algorithm == admit.TokenBucket && rapid.Bool().Draw(t, "nearHorizon") {
		// Where a token bucket's state leaves its packed word: the pair
		// spills it, and takes it back once it packs again.
		if h := kernel.NewTokenBucket(r).Horizon(); h < 1<<62 {
			start = rapid.SampledFrom([]time.Duration{h, -h}).Draw(t, "horizon") + start/1000
		}
	}
	fake.Set(start)
	keyed, err := admitatomic.NewLimitsForm(limits, pair, admit.WithClock(fake))
	require.NoError(t, err)
	single, err := admitatomic.NewLimitsLimiterForm(limits, pair, admit.WithClock(fake))
	require.NoError(t, err)
	store, comp := keyed.(admit.CompositeStore), single.(admit.CompositeLimiter)
	keyedRes, reservable := keyed.(keyedReserver)
	singleRes, _ := single.(admit.Reserver)
	model := conformance.NewCompositeOracle(limits)
	const singleKey = "\x00single" // the model's key for the single-key limiter
	keys := []string{"a", "b", "c", singleKey}
	type made struct {
		key    string
		r      admit.Reservation
		ticket uint64
	}
	var reservations []made
	maxWindow := time.Duration(0)
	for _, r := range limits.Rules() {
		maxWindow = max(maxWindow, r.Window)
	}
	for step := range rapid.IntRange(1, 120).Draw(t, "steps") {
		now := fake.Now()
		key := rapid.SampledFrom(keys).Draw(t, "key")
		ops := 8 // without reservations: 0-4 decide, 5-7 move the clock or reset
		if reservable {
			ops = 12 // 8-9 reserve, 10-11 cancel
		}
		switch op := rapid.IntRange(0, ops-1).Draw(t, "op"); {
		case op <= 4:
			n := rapid.IntRange(-1, limits.Limit()+1).Draw(t, "n")
			if op <= 2 {
				n = 1
			}
			want, wantWhich := model.Allow(key, now, n)
			var got admit.Decision
			var which int
			if key == singleKey {
				got, which = comp.AllowNWhich(n)
			} else {
				got, which = store.AllowNWhich(key, n)
			}
			require.Equal(t, want, got, "step %d: AllowNWhich(%q, %d) at %v on %v", step, key, n, now, limits)
			require.Equal(t, wantWhich, which, "step %d: which of AllowNWhich(%q, %d) at %v on %v", step, key, n, now, limits)
		case op == 5:
			fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*maxWindow)).Draw(t, "advance")))
		case op == 6:
			fake.Set(now - time.Duration(rapid.Int64Range(0, int64(maxWindow)).Draw(t, "back")))
		case op == 7:
			if key != singleKey {
				store.(resetter).Reset(key)
				model.Reset(key)
			}
		case op == 8 || op == 9:
			n := rapid.IntRange(0, limits.Limit()+1).Draw(t, "reserve.n")
			maxWait := time.Duration(rapid.Int64Range(0, int64(2*maxWindow)).Draw(t, "maxWait"))
			wantD, wantOK, ticket := model.Reserve(key, now, n, maxWait)
			var r admit.Reservation
			var ok bool
			if key == singleKey {
				r, ok = singleRes.ReserveN(n, maxWait)
			} else {
				r, ok = keyedRes.ReserveN(key, n, maxWait)
			}
			require.Equal(t, wantOK, ok, "step %d: ReserveN(%q, %d, %v) at %v on %v", step, key, n, maxWait, now, limits)
			require.Equal(t, wantD, r.Delay, "step %d: the delay of ReserveN(%q, %d, %v) at %v on %v", step, key, n, maxWait, now, limits)
			reservations = append(reservations, made{key, r, ticket})
		case len(reservations) > 0:
			m := rapid.SampledFrom(reservations).Draw(t, "reservation")
			want := model.Cancel(key, m.ticket, now) // another key's hold has another ticket
			var got bool
			if key == singleKey {
				got = singleRes.CancelReservation(m.r)
			} else {
				got = keyedRes.CancelReservation(key, m.r)
			}
			require.Equal(t, want, got, "step %d: CancelReservation(%q) of a reservation made on %q, at %v on %v", step, key, m.key, now, limits)
		}
	}
}
