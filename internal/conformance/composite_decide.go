package conformance

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// The decisions of a composite: scripted walks, all or nothing, n above the
// smallest Limit, the differential check against kernel.Composite, Reset
// and the allocations of a call.

// compositeStep is one scripted call: at the fake clock's time at,
// AllowNWhich(n) on key, its Decision and the index of the rule that bound
// it.
type compositeStep struct {
	at    time.Duration
	key   string
	n     int
	want  admit.Decision
	which int
}

// runCompositeSteps replays steps through the keyed limiter (and, for key
// "a", the single-key one) of l.
func runCompositeSteps(t tester, v CompositeVariant, l admit.Limits, steps []compositeStep) {
	t.Helper()
	fake := clock.NewFake()
	ck, single := compositeLimiters(t, v, l, fake)
	for i, st := range steps {
		fake.Set(st.at)
		if got, which := ck.AllowNWhich(st.key, st.n); got != st.want || which != st.which {
			t.Errorf("%v step %d: AllowNWhich(t=%v, %q, %d) = %+v, rule %d; want %+v, rule %d", l, i, st.at, st.key, st.n, got, which, st.want, st.which)
		}
		if single != nil && st.key == "a" {
			if got, which := single.AllowNWhich(st.n); got != st.want || which != st.which {
				t.Errorf("%v step %d: AllowNWhich(t=%v, %d) = %+v, rule %d; want %+v, rule %d", l, i, st.at, st.n, got, which, st.want, st.which)
			}
		}
	}
}

// compositeLimiters returns the keyed limiter of l and the single-key one
// (nil when v has none), both on fake.
func compositeLimiters(t tester, v CompositeVariant, l admit.Limits, fake *clock.Fake) (compositeKeyed, admit.CompositeLimiter) {
	t.Helper()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err, "NewLimits(%v)", l)
	ck, ok := lim.(compositeKeyed)
	require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
	if v.NewLimitsLimiter == nil {
		return ck, nil
	}
	s, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
	require.NoError(t, err, "NewLimitsLimiter(%v)", l)
	single, ok := s.(admit.CompositeLimiter)
	require.True(t, ok, "NewLimitsLimiter(%v) is an admit.CompositeLimiter", l)
	return ck, single
}

// testCompositeWalkthrough: 2 per second and 3 per 10s on one key. The
// Decision's Remaining is the smallest, RetryAfter and ResetAfter the
// largest, and the rule that binds is the one with the smallest Remaining
// on an admission and the largest RetryAfter on a denial, the first on a
// tie.
func testCompositeWalkthrough(t *testing.T, v CompositeVariant) {
	if !v.Supports(admit.FixedWindow) {
		t.Skip("no fixed window")
	}
	s, ms := time.Second, time.Millisecond
	ok := func(limit, remaining int, reset time.Duration) admit.Decision {
		return admit.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
	}
	no := func(limit int, retry, reset time.Duration) admit.Decision {
		return admit.Decision{Limit: limit, RetryAfter: retry, ResetAfter: reset}
	}
	runCompositeSteps(t, v, mustLimits(t, "token-bucket,2,1s + fixed-window,3,10s"), []compositeStep{
		{0, "a", 1, ok(2, 1, 10*s), 0},
		{0, "a", 1, ok(2, 0, 10*s), 0},
		{0, "a", 1, no(2, 500*ms, 10*s), 0}, // the bucket is empty, the window has room: nothing is charged
		{0, "a", 0, ok(2, 0, 10*s), 0},
		{500 * ms, "a", 1, ok(2, 0, 9*s+500*ms), 0}, // both have none left: the first binds
		{s, "a", 1, no(3, 9*s, 9*s), 1},             // a token, but no room in the window
		{s, "a", 0, ok(3, 0, 9*s), 1},
		{s, "b", 2, ok(2, 0, 9*s), 0}, // another key's budget is its own
		{10 * s, "a", 3, no(2, admit.Never, 0), 0},
		{10 * s, "a", -1, no(2, admit.Never, 0), 0},
		{10 * s, "a", 2, ok(2, 0, 10*s), 0},
		{10 * s, "a", 1, no(2, 500*ms, 10*s), 0},
		{10*s + 500*ms, "a", 1, ok(2, 0, 9*s+500*ms), 0},
	})
}

// testCompositeAllOrNothing: a rule that admits is charged only if every
// rule admits. A window (or log, or counter) of 3 per minute and a bucket
// of 1 per second: four requests denied by the bucket at 0 must leave the
// window's count at 1, so that requests at 1s and 2s pass and the one at
// 3s is the window's fourth.
func testCompositeAllOrNothing(t tester, v CompositeVariant) {
	t.Helper()
	for _, first := range []string{"fixed-window,3,1m", "sliding-log,3,1m", "sliding-counter,3,1m"} {
		l := mustLimits(t, first+" + token-bucket,1,1s")
		if !supportsLimits(v, l) {
			continue
		}
		fake := clock.NewFake()
		lim, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err, "NewLimits(%v)", l)
		ck, ok := lim.(compositeKeyed)
		require.True(t, ok, "NewLimits(%v) has Limits and AllowNWhich", l)
		oracle := NewCompositeOracle(l)
		for i, st := range []struct {
			at      time.Duration
			allowed bool
			which   int
		}{
			{0, true, 1},
			{0, false, 1}, {0, false, 1}, {0, false, 1}, {0, false, 1},
			{time.Second, true, 1},
			{2 * time.Second, true, 0},
			{3 * time.Second, false, 0},
		} {
			fake.Set(st.at)
			want, wantWhich := oracle.Allow("k", st.at, 1)
			got, which := ck.AllowNWhich("k", 1)
			if got.Allowed != st.allowed || which != st.which || got != want || which != wantWhich {
				t.Errorf("%v step %d: AllowNWhich(t=%v, %q, 1) = %+v, rule %d; want %+v, rule %d", l, i, st.at, "k", got, which, want, wantWhich)
			}
		}
	}
}

// testCompositeAboveLimit: n above the smallest Limit, or negative, is
// denied with RetryAfter admit.Never, bound by the rule with the smallest
// Limit (the first on a tie), and charges nothing.
func testCompositeAboveLimit(t *testing.T, v CompositeVariant) {
	ex := issueExample(t, v) // 10 per second first
	swapped, err := admit.NewLimits(ex.At(1), ex.At(0))
	require.NoError(t, err)
	for _, l := range []admit.Limits{ex, swapped} {
		ck, single := compositeLimiters(t, v, l, clock.NewFake())
		for _, n := range []int{11, 1000, 1001, -1} {
			which := 0 // the first rule that can never admit n binds
			for n >= 0 && l.At(which).Limit >= n {
				which++
			}
			want := admit.Decision{Limit: l.At(which).Limit, RetryAfter: admit.Never}
			got, w := ck.AllowNWhich("k", n)
			assert.True(t, got == want && w == which, "%v: AllowNWhich(%q, %d) = %+v, rule %d; want %+v, rule %d", l, "k", n, got, w, want, which)
			if single != nil {
				got, w := single.AllowNWhich(n)
				assert.True(t, got == want && w == which, "%v: AllowNWhich(%d) = %+v, rule %d; want %+v, rule %d", l, n, got, w, want, which)
			}
		}
		assert.True(t, ck.AllowN("k", 10).Allowed, "%v: AllowN(10) after the refusals: nothing was charged", l)
		if single != nil {
			assert.True(t, single.AllowN(10).Allowed, "%v: AllowN(10) after the refusals: nothing was charged", l)
		}
	}
}

// drawLimits draws Limits of lo to hi rules of the algorithms v supports
// (only token buckets if tbOnly), with small limits.
func drawLimits(rt *rapid.T, v CompositeVariant, lo, hi int, tbOnly bool) admit.Limits {
	var algs []admit.Algorithm
	for _, a := range Algorithms {
		if v.Supports(a) && (!tbOnly || a == admit.TokenBucket) {
			algs = append(algs, a)
		}
	}
	var rules []admit.Rule
	for range rapid.IntRange(lo, hi).Draw(rt, "rules") {
		r := drawRule(rt, rapid.SampledFrom(algs).Draw(rt, "algorithm"))
		for slices.Contains(rules, r) {
			r.Window++ // the same rule twice is not Limits
		}
		rules = append(rules, r)
	}
	l, err := admit.NewLimits(rules...)
	require.NoError(rt, err)
	return l
}

// largestLimit is the largest Limit of l's rules.
func largestLimit(l admit.Limits) int {
	m := 0
	for _, r := range l.Rules() {
		m = max(m, r.Limit)
	}
	return m
}

// drawWindow draws the window of one of l's rules, by which a composite
// differential check moves its clock (moveClock).
func drawWindow(rt *rapid.T, l admit.Limits) time.Duration {
	return l.At(rapid.IntRange(0, l.Len()-1).Draw(rt, "rule")).Window
}

// drawComposite draws Limits as drawLimits does and a fake clock at a
// reading within an hour of 0, and returns them and v's keyed limiter of
// the Limits on that clock.
func drawComposite(rt *rapid.T, v CompositeVariant, lo, hi int, tbOnly bool) (admit.Limits, *clock.Fake, admit.KeyedLimiter) {
	l := drawLimits(rt, v, lo, hi, tbOnly)
	fake := clock.NewFake()
	fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(rt, err)
	return l, fake, lim
}

// drawCall draws one operation of a composite differential check: a move
// of fake (moveClock, by the window of one of l's rules), or a call, for which it returns the key (one of keys), n
// (from -1 to top+1), the clock's reading and true.
func drawCall(rt *rapid.T, fake *clock.Fake, l admit.Limits, keys []string, top int) (key string, n int, now time.Duration, call bool) {
	if moveClock(rt, fake, drawWindow(rt, l)) {
		return "", 0, 0, false
	}
	n = rapid.IntRange(-1, top+1).Draw(rt, "n")
	key = rapid.SampledFrom(keys).Draw(rt, "key")
	return key, n, fake.Now(), true
}

// compositeDifferential drives the variant and the kernel oracle with the
// same generated calls, keys and clock moves (forwards and backwards),
// sequentially, on Limits of one to four rules, and requires identical
// Decisions and, through AllowNWhich, the same binding rule.
func compositeDifferential(v CompositeVariant) func(*rapid.T) {
	return func(rt *rapid.T) {
		l, fake, keyed := drawComposite(rt, v, 1, 4, false)
		ck, composite := keyed.(compositeKeyed)
		if l.Len() > 1 && !composite {
			rt.Fatalf("NewLimits(%v) has no AllowNWhich", l)
		}
		var single admit.Limiter
		if v.NewLimitsLimiter != nil {
			var err error
			single, err = v.NewLimitsLimiter(l, admit.WithClock(fake))
			require.NoError(rt, err)
		}
		cl, _ := single.(admit.CompositeLimiter)
		oracle := NewCompositeOracle(l)
		keys := []string{"a", "b", "c"}
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			key, n, now, call := drawCall(rt, fake, l, keys, largestLimit(l))
			if !call {
				continue
			}
			want, wantWhich := oracle.Allow(key, now, n)
			which := wantWhich
			var got admit.Decision
			switch {
			case composite && rapid.Bool().Draw(rt, "which"):
				got, which = ck.AllowNWhich(key, n)
			case n == 1 && rapid.Bool().Draw(rt, "allow"):
				got = keyed.Allow(key)
			default:
				got = keyed.AllowN(key, n)
			}
			if got != want || which != wantWhich {
				rt.Fatalf("%v op %d: keyed AllowN(t=%v, %q, %d) = %+v, rule %d; want %+v, rule %d", l, i, now, key, n, got, which, want, wantWhich)
			}
			if single == nil || key != "a" {
				continue // the single limiter mirrors key "a" of the keyed one
			}
			if cl != nil && rapid.Bool().Draw(rt, "single-which") {
				got, which = cl.AllowNWhich(n)
			} else {
				got = single.AllowN(n)
			}
			if got != want || which != wantWhich {
				rt.Fatalf("%v op %d: AllowN(t=%v, %d) = %+v, rule %d; want %+v, rule %d", l, i, now, n, got, which, want, wantWhich)
			}
		}
	}
}

// testCompositeReset checks Reset on a composite store that offers it: a
// reset key has one fresh budget in every rule at the same reading, other
// keys keep theirs, a reservation made before a reset cannot be cancelled
// after it, and over random operations the store equals the kernel with a
// reset replaced by a fresh state.
func testCompositeReset(t *testing.T, v CompositeVariant) {
	lim, err := v.NewLimits(issueExample(t, v))
	require.NoError(t, err)
	if !implements[resetter](lim) {
		t.Skip("no Reset")
	}
	t.Run("Fresh", func(t *testing.T) {
		// 10 per second and 15 per hour: after a second, a key that spent
		// 10 has 5 left, in the hour's rule.
		l := mustLimits(t, "token-bucket,10,1s + token-bucket,15,1h")
		if v.Supports(admit.FixedWindow) {
			l = mustLimits(t, "token-bucket,10,1s + fixed-window,15,1h")
		}
		fake := clock.NewFake()
		fake.Set(time.Hour)
		lim, err := v.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err)
		r := lim.(resetter)
		oracle := NewCompositeOracle(l)
		call := func(key string, n int, allowed bool) {
			t.Helper()
			want, _ := oracle.Allow(key, fake.Now(), n)
			got := lim.AllowN(key, n)
			assert.Equal(t, want, got, "%v: AllowN(t=%v, %q, %d)", l, fake.Now(), key, n)
			assert.Equal(t, allowed, got.Allowed, "%v: AllowN(t=%v, %q, %d)", l, fake.Now(), key, n)
		}
		for _, k := range []string{"a", "b"} {
			call(k, 10, true)
			call(k, 1, false)
		}
		fake.Advance(time.Second)
		for _, k := range []string{"a", "b"} {
			call(k, 5, true)
			call(k, 1, false) // 15 spent in the hour
		}
		r.Reset("a")
		oracle.Reset("a")
		r.Reset("never-seen")
		call("a", 10, true) // a fresh budget in every rule
		call("a", 1, false)
		call("b", 1, false) // Reset of a leaves b alone
		fake.Advance(time.Second)
		call("a", 5, true)
		call("a", 1, false) // one fresh budget, not more
		call("b", 1, false)
		call("never-seen", 10, true)
	})
	t.Run("Reservation", func(t *testing.T) {
		tbs := mustLimits(t, "token-bucket,3,10s + token-bucket,5,1h")
		lim, err := v.NewLimits(tbs, admit.WithClock(clock.NewFake()))
		require.NoError(t, err)
		res, ok := lim.(keyedReserver)
		if !ok {
			t.Skip("no ReserveN")
		}
		require.True(t, lim.AllowN("w", 3).Allowed)
		rv, ok := res.ReserveN("w", 1, time.Minute)
		require.True(t, ok)
		require.Positive(t, rv.Delay, "the reservation waits")
		lim.(resetter).Reset("w")
		assert.False(t, res.CancelReservation("w", rv), "a reservation made before a reset cannot be cancelled after it")
		assert.True(t, lim.AllowN("w", 3).Allowed, "after Reset: a fresh budget in every rule")
		assert.False(t, lim.Allow("w").Allowed)
	})
	t.Run("Differential", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			l, fake, lim := drawComposite(rt, v, 2, 3, false)
			r := lim.(resetter)
			oracle := NewCompositeOracle(l)
			keys := []string{"a", "b"}
			for i := range rapid.IntRange(1, 50).Draw(rt, "ops") {
				if moveClock(rt, fake, drawWindow(rt, l)) {
					continue
				}
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				if rapid.IntRange(0, 3).Draw(rt, "reset") == 0 {
					r.Reset(key)
					oracle.Reset(key)
					continue
				}
				n := rapid.IntRange(0, l.Limit()).Draw(rt, "n")
				want, _ := oracle.Allow(key, fake.Now(), n)
				if got := lim.AllowN(key, n); got != want {
					rt.Fatalf("%v op %d: AllowN(t=%v, %q, %d) = %+v, kernel %+v", l, i, fake.Now(), key, n, got, want)
				}
			}
		})
	})
}

// testCompositeAllocs: an admitted Allow of the issue's Limits on an
// existing key, with the clock moving on, makes at most v.AllowAllocs
// allocations, keyed or single-key; a denied one makes none.
func testCompositeAllocs(t *testing.T, v CompositeVariant) {
	if v.Remote {
		t.Skip("a remote variant's allocations are its network client's")
	}
	if raceEnabled {
		t.Skip("the race detector's runtime allocates of its own")
	}
	l := issueExample(t, v) // 10 per second and 1,000 per hour
	fake := clock.NewFake()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	allow := map[string]func() admit.Decision{"keyed": func() admit.Decision { return lim.Allow("hot") }}
	if v.NewLimitsLimiter != nil {
		single, err := v.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(t, err)
		allow["single"] = single.Allow
	}
	for name, call := range allow {
		call() // create the key
		// A token every 100ms: 201 admissions, within the hour's 1,000.
		allocs := testing.AllocsPerRun(200, func() {
			fake.Advance(100 * time.Millisecond)
			if !call().Allowed {
				panic("a token comes every 100ms")
			}
		})
		assert.LessOrEqual(t, allocs, v.AllowAllocs, "%v: allocations per admitted Allow on an existing key (%s)", l, name)
		for call().Allowed {
		}
		assert.Zero(t, testing.AllocsPerRun(100, func() {
			if call().Allowed {
				panic("the bucket is empty")
			}
		}), "%v: allocations per denied Allow (%s)", l, name)
	}
}
