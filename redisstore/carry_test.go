package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/redisstore"
)

var carries = []policy.Carry{policy.CarryConsumed, policy.CarryProportional, policy.CarryNothing}

// carrier is one process's limiter in Redis beside its kernel and the
// strategy it was given (0: WithCarry was not).
type carrier struct {
	l     *redisstore.Limiter
	k     *kernel.Composite
	carry policy.Carry
}

func newCarrier(t require.TestingT, c redis.Scripter, limits admit.Limits, carry policy.Carry, opts ...redisstore.Option) carrier {
	if carry != 0 {
		opts = append(opts, redisstore.WithCarry(carry))
	}
	l, err := redisstore.NewLimits(c, limits, opts...)
	require.NoError(t, err)
	return carrier{l, kernel.NewComposite(limits), carry}
}

// carryOracle is the executable specification of WithCarry: each key's
// state under the limits that last decided it, stepped by
// kernel.Composite, and converted by kernel.Convert, with the strategy of
// the limiter that touches it, at the reading of the first touch by a
// limiter of other limits.
type carryOracle map[string]*carriedKey

type carriedKey struct {
	k      *kernel.Composite
	states []kernel.PartState
	stored bool // Redis holds the key: a fresh state is a missing key
}

// allow returns the Decision and the binding rule that by's call must
// return, or ok false if it must return an error (by converts nothing and
// Redis holds the key under other limits) and change nothing.
func (o carryOracle) allow(by carrier, key string, now time.Duration, n int) (d admit.Decision, which int, ok bool) {
	e := o[key]
	if e == nil || !e.stored {
		e = &carriedKey{k: by.k, states: make([]kernel.PartState, by.k.Len())}
		o[key] = e
	}
	converted := !slices.Equal(e.k.Limits().Rules(), by.k.Limits().Rules())
	if converted {
		if by.carry == 0 {
			return admit.Decision{}, 0, false
		}
		ts := make([]kernel.PartState, by.k.Len())
		kernel.Convert(e.k, e.states, by.k, ts, now, kernel.Conversion(by.carry))
		e.k, e.states = by.k, ts
	}
	d, which = by.k.Allow(e.states, now, n)
	switch {
	case converted: // written whatever the decision, deleted if fresh
		e.stored = slices.ContainsFunc(e.states, func(s kernel.PartState) bool { return s != kernel.PartState{} })
	case d.Allowed && n > 0 && n <= by.k.Limit():
		e.stored = true
	}
	return d, which, true
}

// check makes by's call of key for n at reading now, and fails unless
// Redis answers as the oracle does; it returns the Decision.
func (o carryOracle) check(t require.TestingT, c redis.Scripter, by carrier, key string, now time.Duration, n int, step string) admit.Decision {
	exp, expWhich, ok := o.allow(by, key, now, n)
	got, which, err := by.l.AllowNWhich(context.Background(), key, n)
	persist(t, c, by.l.Key(key))
	if !ok {
		if err == nil || !(strings.Contains(err.Error(), "holds state of another rule") || strings.Contains(err.Error(), "WRONGTYPE")) {
			t.Errorf("%s: %v (converts nothing) AllowNWhich(t=%v, %q, %d) = %+v, %v, want the error of another rule's key", step, by.k.Limits(), now, key, n, got, err)
			t.FailNow()
		}
		return admit.Decision{}
	}
	require.NoError(t, err, step)
	if got != exp || which != expWhich {
		t.Errorf("%s: %v (carry %v) AllowNWhich(t=%v, %q, %d) = %+v, %d, want %+v, %d", step, by.k.Limits(), by.carry, now, key, n, got, which, exp, expWhich)
		t.FailNow()
	}
	return got
}

// windowMultiples are the windows drawCarryLimits draws, in multiples of a
// scale. From 1 and 9 (or 4 and 9) a window of 3 (or 6) lies at equal
// ratios, where kernel.Convert carries from the first in order; at scales
// past about a millisecond the products compared reach 2^53, where the
// script compares them in digits.
var windowMultiples = []int64{1, 2, 3, 4, 6, 9}

// drawCarryLimits draws Limits of 1 to 3 rules of any algorithms, with
// small limits and windows that are a few multiples of scale, in
// nanoseconds: two draws often share a window, with or without the
// algorithm, and as often do not, so that every way a new rule finds its
// source is taken.
func drawCarryLimits(rt *rapid.T, scale int64, label string) admit.Limits {
	var rules []admit.Rule
	for range rapid.IntRange(1, 3).Draw(rt, label+"Rules") {
		r := admit.Rule{
			Algorithm: rapid.SampledFrom(algorithms).Draw(rt, label+"Algo"),
			Limit:     rapid.IntRange(1, 12).Draw(rt, label+"Limit"),
			Window:    time.Duration(scale * rapid.SampledFrom(windowMultiples).Draw(rt, label+"Window")),
		}
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	limits, err := admit.NewLimits(rules...)
	require.NoError(rt, err)
	return limits
}

// TestCarryDifferential holds WithCarry to kernel.Convert and the kernel's
// decisions after it: two limiters of different Limits (single rules and
// composites of every algorithm) share a server and a prefix, as an old
// process and a new one do while a rule changes. The old one mostly
// decides first and the new one later, each sometimes touching keys the
// other wrote last; each has its own strategy, or none for the old one
// (its calls on the new one's keys are then errors that change nothing).
// The clock moves forwards by small and large steps, and backwards. Each
// Decision and binding rule must be the oracle's, which converts a key at
// the reading of its first touch under other limits and decides on the
// result as the kernel does.
func TestCarryDifferential(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	rapid.Check(t, func(rt *rapid.T) {
		scale := rapid.Int64Range(12, int64(time.Second)).Draw(rt, "scale")
		var old, cur carrier
		for {
			oldLimits, newLimits := drawCarryLimits(rt, scale, "old"), drawCarryLimits(rt, scale, "new")
			if !slices.Equal(oldLimits.Rules(), newLimits.Rules()) {
				fake := clock.NewFake()
				fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
				prefix := freshPrefix("carry")
				old = newCarrier(rt, c, oldLimits, rapid.SampledFrom([]policy.Carry{0, policy.CarryConsumed, policy.CarryProportional, policy.CarryNothing}).Draw(rt, "oldCarry"), redisstore.WithTestClock(fake), prefix)
				cur = newCarrier(rt, c, newLimits, rapid.SampledFrom(carries).Draw(rt, "newCarry"), redisstore.WithTestClock(fake), prefix)
				runCarryOps(rt, c, fake, old, cur, 80)
				return
			}
		}
	})
}

// runCarryOps makes up to ops random calls by old and cur on three keys,
// old mostly in the first half and cur in the second, with the clock
// moving between them, and checks each against a carryOracle.
func runCarryOps(rt *rapid.T, c redis.Scripter, fake *clock.Fake, old, cur carrier, ops int) {
	var windows []int64
	maxLimit := 0
	for _, r := range append(old.k.Limits().Rules(), cur.k.Limits().Rules()...) {
		windows = append(windows, int64(r.Window))
		maxLimit = max(maxLimit, r.Limit)
	}
	want := carryOracle{}
	total := rapid.IntRange(1, ops).Draw(rt, "ops")
	for i := range total {
		switch rapid.IntRange(0, 9).Draw(rt, "op") {
		case 0, 1:
			w := rapid.SampledFrom(windows).Draw(rt, "scale")
			fake.Advance(time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "advance")))
		case 2:
			fake.Advance(time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge")))
		case 3:
			// up to two windows back: a bucket's TAT then lies more than a
			// window ahead, and a window's index behind the state's
			w := rapid.SampledFrom(windows).Draw(rt, "scale")
			fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, 2*w).Draw(rt, "back")))
		default:
			by := old
			if rapid.IntRange(0, 3).Draw(rt, "who") == 0 != (i < total/2) {
				by = cur
			}
			key := rapid.SampledFrom([]string{"a", "a", "b", "c"}).Draw(rt, "key")
			n := rapid.OneOf(rapid.IntRange(0, by.k.Limit()), rapid.IntRange(-1, maxLimit+1)).Draw(rt, "n")
			want.check(rt, c, by, key, fake.Now(), n, fmt.Sprintf("op %d", i))
		}
	}
}

// TestCarryExactAtTheEdges holds the conversion to kernel.Convert where its
// numbers are largest: rules of one or two parts drawn at the edges of the
// domain New accepts (drawEdgeRule: limits up to 2^31 - 1, windows up to
// 2^51 ns, Limit × Window up to 2^52), so that a consumption times a new
// window reaches 2^103, and readings up to ±MaxReading.
func TestCarryExactAtTheEdges(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	rapid.Check(t, func(rt *rapid.T) {
		drawLimits := func(label string) admit.Limits {
			var rules []admit.Rule
			for range rapid.IntRange(1, 2).Draw(rt, label+"Rules") {
				r := drawEdgeRule(rt, rapid.SampledFrom(algorithms).Draw(rt, label+"Algo"))
				if !slices.Contains(rules, r) {
					rules = append(rules, r)
				}
			}
			limits, err := admit.NewLimits(rules...)
			require.NoError(rt, err)
			return limits
		}
		oldLimits, newLimits := drawLimits("old"), drawLimits("new")
		fake := clock.NewFake()
		move := func(to int64) { fake.Set(time.Duration(max(-redisstore.MaxReading, min(to, redisstore.MaxReading)))) }
		move(rapid.OneOf(rapid.Int64Range(-redisstore.MaxReading, redisstore.MaxReading), rapid.Int64Range(-1000, 1000)).Draw(rt, "start"))
		prefix := freshPrefix("carry-edge")
		old := newCarrier(rt, c, oldLimits, rapid.SampledFrom(carries).Draw(rt, "oldCarry"), redisstore.WithTestClock(fake), prefix)
		cur := newCarrier(rt, c, newLimits, rapid.SampledFrom(carries).Draw(rt, "newCarry"), redisstore.WithTestClock(fake), prefix)
		var w []int64
		for _, r := range append(oldLimits.Rules(), newLimits.Rules()...) {
			w = append(w, int64(r.Window))
		}
		want := carryOracle{}
		total := rapid.IntRange(1, 40).Draw(rt, "ops")
		for i := range total {
			now := int64(fake.Now())
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				move(now + rapid.Int64Range(0, 2*rapid.SampledFrom(w).Draw(rt, "scale")).Draw(rt, "advance"))
			case 1:
				move(now + rapid.Int64Range(0, 10).Draw(rt, "nudge"))
			case 2:
				move(now - rapid.Int64Range(0, rapid.SampledFrom(w).Draw(rt, "scale")).Draw(rt, "back"))
			case 3:
				move(rapid.SampledFrom([]int64{-redisstore.MaxReading, redisstore.MaxReading, 0}).Draw(rt, "jump"))
			default:
				by := old
				if rapid.IntRange(0, 3).Draw(rt, "who") == 0 != (i < total/2) {
					by = cur
				}
				lim := by.k.Limit()
				n := rapid.OneOf(rapid.IntRange(0, 3), rapid.IntRange(0, lim), rapid.SampledFrom([]int{lim, lim - 1, lim / 2})).Draw(rt, "n")
				key := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key")
				want.check(rt, c, by, key, time.Duration(now), n, fmt.Sprintf("op %d", i))
			}
		}
	})
}

// TestCarrySourceByRatio: a new rule whose window no old rule has carries
// from the old rule whose window is nearest by ratio, compared exactly, the
// first on a tie, as kernel.Convert chooses. Old rules of two fixed windows
// a and b spend 3 at reading 0; at the reading min(a, b) the shorter
// window has ended and the longer has not, so a new fixed window of r holds
// 0 if it carries from the shorter and 3 if from the longer. Windows at
// equal ratios (a × b = r², in either order), at random ones, and near 2^50
// ns at ratios a whisker apart ((r-1) × (r+1) = r² - 1, whose products,
// near 2^100, round to the same double) are tried; each choice must be the
// oracle's and the exact comparison's.
func TestCarrySourceByRatio(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	type triple struct{ a, r, b time.Duration }
	var triples []triple
	const unit = time.Minute
	for r := time.Duration(2); r <= 40; r++ {
		for a := time.Duration(1); a < r; a++ {
			if r*r%a == 0 {
				triples = append(triples, triple{a * unit, r * unit, r * r / a * unit}, triple{r * r / a * unit, r * unit, a * unit})
			}
		}
	}
	for a := time.Duration(1); a <= 12; a++ {
		for b := a + 2; b <= 30; b += 3 {
			triples = append(triples, triple{a * unit, (a + b) / 2 * unit, b * unit}, triple{b * unit, (a + b) / 2 * unit, a * unit})
		}
	}
	for _, r := range []time.Duration{1<<50 + 1, 1<<50 + 12345, 1<<51 - 1} {
		triples = append(triples, triple{r - 1, r, r + 1}, triple{r + 1, r, r - 1})
	}
	fake := clock.NewFake()
	ties := 0
	for _, tr := range triples {
		oldLimits, err := admit.NewLimits(
			admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: tr.a},
			admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: tr.b})
		require.NoError(t, err)
		newLimits, err := admit.NewLimits(admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: tr.r})
		require.NoError(t, err)
		prefix := freshPrefix("ratio")
		old := newCarrier(t, c, oldLimits, 0, redisstore.WithTestClock(fake), prefix)
		cur := newCarrier(t, c, newLimits, policy.CarryConsumed, redisstore.WithTestClock(fake), prefix)
		want := carryOracle{}
		fake.Set(0)
		want.check(t, c, old, "k", 0, 3, "spend")
		first := min(tr.a, tr.b)
		fake.Set(first)
		step := fmt.Sprintf("windows %v, %v → %v", tr.a, tr.b, tr.r)
		want.check(t, c, cur, "k", first, 0, step)
		d, err := cur.l.AllowN(ctx, "k", 0)
		require.NoError(t, err)
		fromFirst := d.Remaining == 5 // carried 0: from the window that has ended, the first in order
		if tr.a > tr.b {
			fromFirst = d.Remaining == 2
		}
		// a is nearer than b iff max(a, r)/min(a, r) < max(b, r)/min(b, r).
		da := new(big.Int).Mul(big.NewInt(int64(max(tr.a, tr.r))), big.NewInt(int64(min(tr.b, tr.r))))
		db := new(big.Int).Mul(big.NewInt(int64(max(tr.b, tr.r))), big.NewInt(int64(min(tr.a, tr.r))))
		cmp := da.Cmp(db)
		if cmp == 0 {
			ties++
		}
		assert.Equal(t, cmp <= 0, fromFirst, "%s: carries from the first (ratios compared exactly, the first on a tie)", step)
	}
	t.Logf("%d window triples, %d at equal ratios", len(triples), ties)
	assert.Positive(t, ties, "no triple at equal ratios")
}

// TestCarryRollingDeploy: while a limit is lowered from 10 to 5 per minute,
// old and new processes share the keys, and both carry. Each touch by the
// other side converts the key, and its tag says whose rules it holds. With
// CarryConsumed the 7 spent stay spent under the Limit of 5 (a count past
// it) and come back whole, and with CarryProportional the fraction spent
// never drops: either way the pair admits at most the larger Limit at one
// reading. (When a conversion carried at most the new Limit, CarryConsumed
// admitted 13.)
func TestCarryRollingDeploy(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour + time.Second) // every step is in one window
	type step struct {
		process string // "old" or "new"
		n       int
		allowed bool
		left    int
		tag     string // the key's tag after the step
	}
	const oldTag, newTag = "ns:f10/60000000000", "ns:f5/60000000000"
	for _, tc := range []struct {
		carry policy.Carry
		steps []step
	}{
		{policy.CarryConsumed, []step{
			{"old", 7, true, 3, oldTag},
			{"new", 0, true, 0, newTag}, // 7 spent, all 7 carried
			{"new", 1, false, 0, newTag},
			{"old", 1, true, 2, oldTag}, // 7 carried back: 3 more to spend
			{"old", 2, true, 0, oldTag},
			{"new", 1, false, 0, newTag},
			{"old", 1, false, 0, oldTag}, // 10 admitted at one reading
		}},
		{policy.CarryProportional, []step{
			{"old", 7, true, 3, oldTag},
			{"new", 0, true, 1, newTag}, // 3.5 of 5, rounded up
			{"new", 1, true, 0, newTag},
			{"old", 1, false, 0, oldTag}, // 10 of 10 carried back
			{"new", 1, false, 0, newTag},
		}},
	} {
		prefix := freshPrefix("deploy")
		old, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 10, Window: time.Minute}, redisstore.WithTestClock(fake), prefix, redisstore.WithCarry(tc.carry))
		require.NoError(t, err)
		cur, err := redisstore.New(c, admit.Rule{Algorithm: admit.FixedWindow, Limit: 5, Window: time.Minute}, redisstore.WithTestClock(fake), prefix, redisstore.WithCarry(tc.carry))
		require.NoError(t, err)
		admitted := 0
		for i, st := range tc.steps {
			l := old
			if st.process == "new" {
				l = cur
			}
			d, err := l.AllowN(ctx, "k", st.n)
			require.NoError(t, err)
			if d.Allowed != st.allowed || d.Remaining != st.left {
				t.Errorf("%v step %d: %s AllowN(%d) = %+v, want allowed %v, %d left", tc.carry, i, st.process, st.n, d, st.allowed, st.left)
			}
			if d.Allowed {
				admitted += st.n
			}
			v, err := c.Get(ctx, l.Key("k")).Result()
			require.NoError(t, err)
			assert.Equal(t, st.tag, strings.Fields(v)[0], "%v step %d: the key's tag", tc.carry, i)
		}
		t.Logf("%v: %d admitted at one reading", tc.carry, admitted)
	}
}

// TestCarryPingPongBound checks what docs/redis.md says two processes of
// different rules that both carry admit between them at one reading (no
// time passing, so nothing refills), whatever the algorithms and however
// they interleave: with CarryConsumed and CarryProportional at most the
// larger Limit (a conversion keeps the consumption past the smaller Limit,
// so converting back hands none of it out again); with CarryNothing at
// most the larger Limit per conversion, plus one. Every decision is also
// held to the oracle.
func TestCarryPingPongBound(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	rapid.Check(t, func(rt *rapid.T) {
		drawRule := func(label string) admit.Rule {
			return admit.Rule{
				Algorithm: rapid.SampledFrom(algorithms).Draw(rt, label+"Algo"),
				Limit:     rapid.IntRange(1, 12).Draw(rt, label+"Limit"),
				Window:    time.Duration(rapid.SampledFrom([]int64{1, 2, 3, 60}).Draw(rt, label+"Window")) * time.Second,
			}
		}
		ra, rb := drawRule("a"), drawRule("b")
		if ra == rb {
			return
		}
		carry := rapid.SampledFrom(carries).Draw(rt, "carry")
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "at")))
		prefix := freshPrefix("pingpong")
		la, err := admit.NewLimits(ra)
		require.NoError(rt, err)
		lb, err := admit.NewLimits(rb)
		require.NoError(rt, err)
		a := newCarrier(rt, c, la, carry, redisstore.WithTestClock(fake), prefix)
		b := newCarrier(rt, c, lb, carry, redisstore.WithTestClock(fake), prefix)
		large := max(ra.Limit, rb.Limit)
		want := carryOracle{}
		admitted, conversions := 0, 0
		for i := range rapid.IntRange(1, 60).Draw(rt, "calls") {
			by := a
			if rapid.Bool().Draw(rt, "b") {
				by = b
			}
			if e := want["k"]; e != nil && e.stored && e.k != by.k {
				conversions++
			}
			n := rapid.IntRange(1, by.k.Limit()).Draw(rt, "n")
			if d := want.check(rt, c, by, "k", fake.Now(), n, fmt.Sprintf("call %d", i)); d.Allowed {
				admitted += n
			}
		}
		bound := large
		if carry == policy.CarryNothing {
			bound = large * (conversions + 1)
		}
		if admitted > bound {
			rt.Fatalf("%v and %v, %v: %d admitted at one reading, more than %d (%d conversions)", ra, rb, carry, admitted, bound, conversions)
		}
	})
}

// TestCarryFlipFlop is issue 25's scenario in Redis: on a frozen clock a
// key spends its 10 per hour, then processes of 5 per hour and of 10 per
// hour (one rule, or a composite, whose sliding log then holds more
// entries than its limit) take turns on it, five times over; with
// CarryConsumed and CarryProportional 10 pass in all (35 when a
// conversion carried at most the new limit), and every decision is the
// kernel's (the oracle).
func TestCarryFlipFlop(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	for _, tc := range [][2]string{
		{"token-bucket,10,1h", "token-bucket,5,1h"},
		{"fixed-window,10,1h", "fixed-window,5,1h"},
		{"sliding-log,10,1h", "sliding-log,5,1h"},
		{"sliding-counter,10,1h", "sliding-counter,5,1h"},
		{"sliding-log,10,1h + fixed-window,100,24h", "sliding-log,5,1h + fixed-window,100,24h"},
		{"token-bucket,10,1h + sliding-counter,100,2h", "token-bucket,5,1h + sliding-counter,100,2h"},
	} {
		for _, carry := range []policy.Carry{policy.CarryConsumed, policy.CarryProportional} {
			hiLimits, err := admit.ParseLimits(tc[0])
			require.NoError(t, err)
			loLimits, err := admit.ParseLimits(tc[1])
			require.NoError(t, err)
			fake := clock.NewFake()
			fake.Set(5 * time.Hour)
			prefix := freshPrefix("flipflop")
			hi := newCarrier(t, c, hiLimits, carry, redisstore.WithTestClock(fake), prefix)
			lo := newCarrier(t, c, loLimits, carry, redisstore.WithTestClock(fake), prefix)
			want := carryOracle{}
			total, step := 0, 0
			spend := func(by carrier) {
				for {
					step++
					if !want.check(t, c, by, "k", fake.Now(), 1, fmt.Sprintf("%s, carry %v, step %d", tc[0], carry, step)).Allowed {
						return
					}
					total++
				}
			}
			spend(hi)
			for range 5 {
				spend(lo)
				spend(hi)
			}
			require.Equal(t, 10, total, "%s and %s, carry %v: admitted on a frozen clock", tc[0], tc[1], carry)
		}
	}
}

// logEntries returns the times of the entries of the sliding log that is
// part i of l's Limits at key, as Redis holds them: a list after the tag,
// or a composite's ring, from its head.
func logEntries(t *testing.T, c *redis.Client, l *redisstore.Limiter, key string, i int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var raw []string
	if l.Limits().Len() == 1 {
		all, err := c.LRange(ctx, l.Key(key), 1, -1).Result()
		require.NoError(t, err)
		raw = all
	} else {
		var head, size int
		v, err := c.HGet(ctx, l.Key(key), fmt.Sprint(i)).Result()
		require.NoError(t, err)
		ring := l.Limits().At(i).Limit
		if f := strings.Fields(v); len(f) == 3 { // a carried log's longer ring
			_, err = fmt.Sscanf(v, "%d %d %d", &head, &size, &ring)
		} else {
			_, err = fmt.Sscanf(v, "%d %d", &head, &size)
		}
		require.NoError(t, err)
		for j := range size {
			slot := fmt.Sprintf("%d:%d", i, (head+j)%ring)
			v, err := c.HGet(ctx, l.Key(key), slot).Result()
			require.NoError(t, err)
			raw = append(raw, v)
		}
	}
	var out []time.Duration
	for _, v := range raw {
		var ns int64
		_, err := fmt.Sscanf(v, "%d", &ns)
		require.NoError(t, err)
		out = append(out, time.Duration(ns))
	}
	return out
}

// TestCarrySlidingLogEntries: a sliding log converted to a sliding log
// carries the newest ceil(c) of its live entries at their own times, padded
// with entries at the reading (or at the newest entry, if that is later),
// whether the old log is a list (a single rule) or a composite's ring that
// has wrapped round, and the new one either. The old log of 5 per 10 s
// holds entries at 1, 2, 3, 4 and 10.5 s (the ring's slot 0 reused by the
// last); at 11.5 s the first has expired and 4 are live.
func TestCarrySlidingLogEntries(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	fake := clock.NewFake()
	const s = time.Second
	for _, tc := range []struct {
		old, new string
		carry    policy.Carry
		want     []time.Duration
	}{
		// 4 live entries kept past the Limit of 3: the newest 3, and the
		// oldest as a copy of the newest (as kernel.Convert keeps them)
		{"sliding-log,5,10s", "sliding-log,3,10s", policy.CarryConsumed, []time.Duration{3 * s, 4 * s, 10500 * time.Millisecond, 10500 * time.Millisecond}},
		{"sliding-log,5,10s + fixed-window,100,1h", "sliding-log,3,10s", policy.CarryConsumed, []time.Duration{3 * s, 4 * s, 10500 * time.Millisecond, 10500 * time.Millisecond}},
		{"sliding-log,5,10s", "fixed-window,100,1h + sliding-log,3,10s", policy.CarryConsumed, []time.Duration{3 * s, 4 * s, 10500 * time.Millisecond, 10500 * time.Millisecond}},
		{"fixed-window,100,1h + sliding-log,5,10s", "sliding-log,3,10s + token-bucket,100,1h", policy.CarryConsumed, []time.Duration{3 * s, 4 * s, 10500 * time.Millisecond, 10500 * time.Millisecond}},
		// 4 × 6/5 = 4.8: the 4 live entries, and one at the reading
		{"sliding-log,5,10s", "sliding-log,6,10s", policy.CarryProportional, []time.Duration{2 * s, 3 * s, 4 * s, 10500 * time.Millisecond, 11500 * time.Millisecond}},
		{"sliding-log,5,10s + fixed-window,100,1h", "sliding-log,6,10s + fixed-window,100,1h", policy.CarryProportional, []time.Duration{2 * s, 3 * s, 4 * s, 10500 * time.Millisecond, 11500 * time.Millisecond}},
		// 4 × 2/5 = 1.6: the 2 newest
		{"fixed-window,100,1h + sliding-log,5,10s", "token-bucket,100,1h + sliding-log,2,10s", policy.CarryProportional, []time.Duration{4 * s, 10500 * time.Millisecond}},
		// from a fixed window of 4 spent: 4 entries at the reading
		{"fixed-window,5,1m", "sliding-log,6,10s", policy.CarryConsumed, []time.Duration{11500 * time.Millisecond, 11500 * time.Millisecond, 11500 * time.Millisecond, 11500 * time.Millisecond}},
	} {
		prefix := freshPrefix("log-entries")
		old := newCarrier(t, c, mustLimits(t, tc.old), 0, redisstore.WithTestClock(fake), prefix)
		cur := newCarrier(t, c, mustLimits(t, tc.new), tc.carry, redisstore.WithTestClock(fake), prefix)
		want := carryOracle{}
		for _, at := range []time.Duration{1 * s, 2 * s, 3 * s, 4 * s} {
			fake.Set(at)
			want.check(t, c, old, "k", at, 1, "spend")
		}
		at := 10500 * time.Millisecond
		fake.Set(at)
		if strings.HasPrefix(tc.old, "fixed-window,5") {
			at = 11500 * time.Millisecond // the window's 4 stand
		} else {
			want.check(t, c, old, "k", at, 1, "spend") // the oldest expired, its slot reused
			at = 11500 * time.Millisecond
		}
		fake.Set(at)
		step := fmt.Sprintf("%s → %s (%v)", tc.old, tc.new, tc.carry)
		want.check(t, c, cur, "k", at, 0, step)
		part := 0
		if strings.HasPrefix(tc.new, "fixed-window") || strings.HasPrefix(tc.new, "token-bucket") {
			part = 1
		}
		assert.Equal(t, tc.want, logEntries(t, c, cur.l, "k", part), step)
		for _, later := range []time.Duration{12 * s, 13 * s, 14 * s, 20 * s, 21 * s} {
			fake.Set(later)
			want.check(t, c, cur, "k", later, 1, step+fmt.Sprintf(" at %v", later))
		}
	}
}

// TestWithCarryRefusesBadStrategy: a Carry that is no strategy is an error
// wrapping admit.ErrInvalidOption that names the strategies, never a
// default.
func TestWithCarryRefusesBadStrategy(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer c.Close()
	for _, bad := range []policy.Carry{0, policy.CarryNothing + 1, 255} {
		_, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}, redisstore.WithCarry(bad))
		assert.ErrorIs(t, err, admit.ErrInvalidOption, "%v", bad)
		assert.ErrorContains(t, err, "policy.CarryConsumed, policy.CarryProportional or policy.CarryNothing", "%v", bad)
		_, err = redisstore.NewLimits(c, mustLimits(t, "token-bucket,5,1s + fixed-window,100,1h"), redisstore.WithCarry(bad))
		assert.ErrorIs(t, err, admit.ErrInvalidOption, "%v", bad)
	}
	for _, good := range carries {
		_, err := redisstore.New(c, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}, redisstore.WithCarry(good))
		assert.NoError(t, err, "%v", good)
	}
}

// TestCarryNothingStartsFresh: with CarryNothing a key spent under other
// rules decides as a fresh key: a probe finds the whole Limit and deletes
// the old state (a fresh state is a missing key), and an admission writes
// the new rules' state under their tag; whichever the Redis types of the
// old and new states.
func TestCarryNothingStartsFresh(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	texts := []string{"fixed-window,3,1m", "sliding-log,3,1m", "token-bucket,3,1m + sliding-log,4,1h"}
	for _, from := range texts {
		for _, to := range []string{"fixed-window,5,1m", "sliding-log,5,1m", "sliding-counter,5,1m + sliding-log,6,1h"} {
			prefix := freshPrefix("nothing")
			old := newCarrier(t, c, mustLimits(t, from), 0, redisstore.WithTestClock(fake), prefix)
			cur := newCarrier(t, c, mustLimits(t, to), policy.CarryNothing, redisstore.WithTestClock(fake), prefix)
			for _, key := range []string{"probed", "admitted"} {
				for range 3 {
					_, err := old.l.Allow(ctx, key)
					require.NoError(t, err)
				}
				d, err := old.l.Allow(ctx, key)
				require.NoError(t, err)
				require.False(t, d.Allowed, "%s: spent", from)
			}
			d, err := cur.l.AllowN(ctx, "probed", 0)
			require.NoError(t, err)
			assert.Equal(t, admit.Decision{Allowed: true, Limit: 5, Remaining: 5}, d, "%s → %s: a probe", from, to)
			assert.Zero(t, c.Exists(ctx, cur.l.Key("probed")).Val(), "%s → %s: the old state is deleted", from, to)
			d, err = cur.l.Allow(ctx, "admitted")
			require.NoError(t, err)
			fresh, err := cur.l.Allow(ctx, "fresh")
			require.NoError(t, err)
			assert.Equal(t, fresh, d, "%s → %s: as a fresh key", from, to)
			d, err = cur.l.Allow(ctx, "admitted")
			require.NoError(t, err)
			assert.Equal(t, 3, d.Remaining, "%s → %s: the new rules' state, read again", from, to)
		}
	}
}

// TestCarryRefusesUnreadableKeys: a limiter that carries still returns an
// error, writing nothing, for a key whose state it cannot read: a tag that
// names no rules the client writes (not a limiter's, malformed, beyond the
// exact domain), a tag in other units, a state that does not match its tag
// or its Redis type (a log's entry is read when the log is the source of a
// new rule), a Redis type no limiter writes. The errors are about the key,
// so Keyed's circuit stays closed.
func TestCarryRefusesUnreadableKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	prefix := redisstore.WithPrefix("unreadable:")
	var lims []*redisstore.Limiter
	for _, text := range []string{"fixed-window,5,1m", "sliding-log,5,1m", "token-bucket,5,1s + sliding-log,5,1m"} {
		l, err := redisstore.NewLimits(c, mustLimits(t, text), redisstore.WithTestClock(fake), prefix, redisstore.WithCarry(policy.CarryConsumed))
		require.NoError(t, err)
		lims = append(lims, l)
	}
	key := func(name string) string { return lims[0].Key(name) }
	require.NoError(t, c.Set(ctx, key("text"), "hello world", 0).Err())
	require.NoError(t, c.Set(ctx, key("no-space"), "ns:f5/60000000000", 0).Err())
	require.NoError(t, c.Set(ctx, key("letter"), "ns:x5/60000000000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("zero-limit"), "ns:f0/60000000000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("limit"), "ns:f2147483648/60000000000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("window"), "ns:f5/2251799813685249 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("product"), "ns:t1000/4503599627371 1 0", 0).Err())
	require.NoError(t, c.Set(ctx, key("empty-rule"), "ns:f5/60000000000++t5/1000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("state"), "ns:f6/60000000000 x 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("short-state"), "ns:s5/60000000000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("log-in-string"), "ns:l5/60000000000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("composite-in-string"), "ns:f5/60000000000+t5/1000000000 1 2", 0).Err())
	require.NoError(t, c.Set(ctx, key("microseconds"), "f5/60000000 1 2", 0).Err())
	require.NoError(t, c.RPush(ctx, key("list"), "x", "1").Err())
	require.NoError(t, c.RPush(ctx, key("window-in-list"), "ns:f5/60000000000", "1").Err())
	require.NoError(t, c.RPush(ctx, key("entry"), "ns:l6/60000000000", "3600000000000", "soon").Err())
	require.NoError(t, c.HSet(ctx, key("untagged"), "0", "1 2").Err())
	require.NoError(t, c.HSet(ctx, key("one-rule-hash"), "tag", "ns:f5/60000000000", "0", "1 2").Err())
	require.NoError(t, c.HSet(ctx, key("ring"), "tag", "ns:l5/60000000000+f6/3600000000000", "0", "0 1", "0:0", "later").Err())
	require.NoError(t, c.SAdd(ctx, key("set"), "x").Err())

	names := []string{"text", "no-space", "letter", "zero-limit", "limit", "window", "product", "empty-rule", "state",
		"short-state", "log-in-string", "composite-in-string", "microseconds", "list", "window-in-list", "entry",
		"untagged", "one-rule-hash", "ring", "set"}
	dump := func(name string) string {
		v, err := c.Dump(ctx, key(name)).Result()
		require.NoError(t, err)
		return v
	}
	before := map[string]string{}
	for _, name := range names {
		before[name] = dump(name)
	}
	for _, l := range lims {
		errs := new(errorLog)
		k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Minute, Clock: clock.NewFake(), OnError: errs.record})
		require.NoError(t, err)
		checked := 0
		for _, name := range names {
			if name == "untagged" && l.Limits().Len() > 1 {
				continue // a hash without a tag is a composite's own (a tag is written with its first state)
			}
			checked++
			_, err := l.AllowN(ctx, name, 0)
			assert.ErrorContains(t, err, "ADMIT key unreadable:{"+name+"} holds ", "%v, %s", l.Limits(), name)
			assert.ErrorContains(t, err, "it is not converted (WithCarry)", "%v, %s", l.Limits(), name)
			_, err = l.Allow(ctx, name)
			assert.Error(t, err, "%v, %s", l.Limits(), name)
			assert.False(t, k.Allow(name).Allowed, "%v, %s", l.Limits(), name)
			assert.Equal(t, before[name], dump(name), "%v, %s: unchanged", l.Limits(), name)
		}
		got := errs.take()
		assert.Len(t, got, checked, "%v: Keyed saw each error", l.Limits())
		assert.NotErrorIs(t, errors.Join(got...), redisstore.ErrCircuitOpen, "%v", l.Limits())
		assert.True(t, k.Allow("mine").Allowed, "%v: the circuit is closed", l.Limits())
	}
	_, err := lims[0].Allow(ctx, "microseconds")
	assert.ErrorContains(t, err, "holds state counted in us (f5/60000000), this limiter counts ns (ns:f5/60000000000)")
}

// TestCarryUnits: a limiter on server time (microseconds) and one on a
// WithClock clock (nanoseconds) never convert each other's keys, even of
// the same rule: their readings are different clocks.
func TestCarryUnits(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	rule := admit.Rule{Algorithm: admit.SlidingLog, Limit: 5, Window: time.Hour}
	prefix := redisstore.WithPrefix("units:")
	fake := clock.NewFake()
	fake.Set(time.Hour)
	ns, err := redisstore.New(c, rule, prefix, redisstore.WithTestClock(fake), redisstore.WithCarry(policy.CarryConsumed))
	require.NoError(t, err)
	us, err := redisstore.New(c, rule, prefix, redisstore.WithCarry(policy.CarryConsumed))
	require.NoError(t, err)
	_, err = ns.Allow(ctx, "ns")
	require.NoError(t, err)
	_, err = us.Allow(ctx, "us")
	require.NoError(t, err)
	_, err = us.Allow(ctx, "ns")
	assert.ErrorContains(t, err, "holds state counted in ns (ns:l5/3600000000000), this limiter counts us (l5/3600000000)")
	_, err = ns.Allow(ctx, "us")
	assert.ErrorContains(t, err, "holds state counted in us (l5/3600000000), this limiter counts ns (ns:l5/3600000000000)")
}

// TestCarryServerTime: with server time, in microseconds, a sliding log of
// 10 per day with 7 spent converts to a composite of 20 per day and 100 per
// hour: the log keeps its 7 entries and the bucket 7 tokens of debt, so the
// next admission leaves 12 of the log. No duration is assumed: nothing
// expires or refills by a whole request within a day.
func TestCarryServerTime(t *testing.T) {
	c := newClient(t, redistest.Start(t))
	ctx := context.Background()
	prefix := freshPrefix("carry-server")
	old, err := redisstore.New(c, admit.Rule{Algorithm: admit.SlidingLog, Limit: 10, Window: 24 * time.Hour}, prefix)
	require.NoError(t, err)
	cur, err := redisstore.NewLimits(c, mustLimits(t, "sliding-log,20,24h + token-bucket,100,1h"), prefix, redisstore.WithCarry(policy.CarryConsumed))
	require.NoError(t, err)
	for range 7 {
		_, err := old.Allow(ctx, "k")
		require.NoError(t, err)
	}
	d, which, err := cur.AllowNWhich(ctx, "k", 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, 12, d.Remaining)
	assert.Zero(t, which)
	assert.Equal(t, "l20/86400000000+t100/3600000000", c.HGet(ctx, cur.Key("k"), "tag").Val())
	d, err = cur.AllowN(ctx, "k", 0)
	require.NoError(t, err)
	assert.Equal(t, 12, d.Remaining, "converted once")
}

// TestCarryOutOfMemory: on a server out of memory under noeviction, a
// conversion fails with Redis's OOM error and writes nothing, even for a
// probe or a denial, which write the converted state: the key stays under
// its old rules, whatever the Redis types of the old and new states; once
// memory is back, the key converts.
func TestCarryOutOfMemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := newClient(t, srv)
	ctx := context.Background()
	fake := clock.NewFake()
	fake.Set(time.Hour)
	type pair struct{ old, cur *redisstore.Limiter }
	var pairs []pair
	for _, p := range [][2]string{
		{"fixed-window,10,1m", "token-bucket,5,1m"},
		{"fixed-window,10,1m", "sliding-log,5,1m"},
		{"sliding-log,10,1m", "sliding-log,5,1m + fixed-window,100,1h"},
		{"sliding-log,10,1m + fixed-window,100,1h", "sliding-counter,5,1m"},
	} {
		prefix := freshPrefix("carry-oom")
		old := newCarrier(t, c, mustLimits(t, p[0]), 0, redisstore.WithTestClock(fake), prefix)
		cur := newCarrier(t, c, mustLimits(t, p[1]), policy.CarryConsumed, redisstore.WithTestClock(fake), prefix)
		for range 7 {
			_, err := old.l.Allow(ctx, "k")
			require.NoError(t, err)
		}
		pairs = append(pairs, pair{old.l, cur.l})
	}
	state := func(key string) string {
		v, err := c.Dump(ctx, key).Result()
		require.NoError(t, err)
		return v
	}
	before := make([]string, len(pairs))
	for i, p := range pairs {
		before[i] = state(p.old.Key("k"))
	}
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
	require.True(t, redis.IsOOMError(c.Set(ctx, "probe", "x", 0).Err()), "the server is out of memory")
	for i, p := range pairs {
		for _, n := range []int{0, 1, 6} { // a probe, an admission, a denial
			_, err := p.cur.AllowN(ctx, "k", n)
			assert.True(t, redis.IsOOMError(err), "%v, n %d: want Redis's OOM error, got %v", p.cur.Limits(), n, err)
		}
		assert.Equal(t, before[i], state(p.old.Key("k")), "%v: unchanged", p.cur.Limits())
		d, err := p.old.AllowN(ctx, "k", 0)
		require.NoError(t, err, "%v: still the old rules' key", p.old.Limits())
		assert.Equal(t, 3, d.Remaining)
	}
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "0").Err())
	for _, p := range pairs {
		d, err := p.cur.AllowN(ctx, "k", 0)
		require.NoError(t, err)
		assert.Zero(t, d.Remaining, "%v: 7 carried, at most 5", p.cur.Limits())
	}
}
