package kernel

// Tests of the composite kernel (composite.go). Its oracle is a reference
// model built from the per-algorithm reference models of reference_test.go,
// one per rule, composed by the definition in admit.Limits' doc: a request
// is admitted iff every rule's model admits it on a copy, and then every
// model is charged. Nothing in the oracle shares code with Composite.

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// limitsOf returns the Limits of rules, which must be valid and distinct.
func limitsOf(t fataler, rules ...admit.Rule) admit.Limits {
	t.Helper()
	l, err := admit.NewLimits(rules...)
	if err != nil {
		t.Fatalf("NewLimits(%v): %v", rules, err)
	}
	return l
}

// compositeRef is the reference model of a composite: one reference model
// per rule, each deciding on its own.
type compositeRef struct {
	rules  []admit.Rule
	models []model
}

func newCompositeRef(l admit.Limits) *compositeRef {
	r := &compositeRef{rules: l.Rules()}
	for _, rule := range r.rules {
		r.models = append(r.models, newModel(rule))
	}
	return r
}

// cloneModel returns a copy of m that shares no memory that either writes.
func cloneModel(m model) model {
	switch m := m.(type) {
	case *refTokenBucket:
		c := *m // tat is replaced by each admission, never written in place
		return &c
	case *refFixedWindow:
		c := *m
		c.counts = maps.Clone(m.counts)
		return &c
	case *refSlidingLog:
		c := *m
		c.times = slices.Clone(m.times)
		return &c
	case *refSlidingCounter:
		c := *m
		c.counts = maps.Clone(m.counts)
		return &c
	}
	panic(fmt.Sprintf("cloneModel: unknown model %T", m))
}

// Allow decides n at reading now as admit.Limits defines it, and returns the
// index of the rule that bound the decision.
func (r *compositeRef) Allow(now time.Duration, n int) (admit.Decision, int) {
	trial := make([]admit.Decision, len(r.models))
	all := true
	for i, m := range r.models {
		trial[i] = cloneModel(m).Allow(now, n)
		all = all && trial[i].Allowed
	}
	var d admit.Decision
	which := 0
	if all {
		// Every rule admits: charge every rule. Remaining is the smallest,
		// and the rule with it binds (the first on a tie).
		for i, m := range r.models {
			got := m.Allow(now, n)
			if got != trial[i] {
				panic(fmt.Sprintf("reference model %v decided %s on a copy and %s on the original", r.rules[i], fmtDecision(trial[i]), fmtDecision(got)))
			}
			if got.Remaining < trial[which].Remaining {
				which = i
			}
			d.ResetAfter = max(d.ResetAfter, got.ResetAfter)
		}
		d.Allowed, d.Remaining = true, trial[which].Remaining
	} else {
		// Some rule denies: nothing is charged. RetryAfter is the largest
		// (0 for a rule that admits), and the rule with it binds; every
		// rule's state stays as it is, so ResetAfter is its probe's.
		for i, m := range r.models {
			if trial[i].RetryAfter > d.RetryAfter {
				d.RetryAfter, which = trial[i].RetryAfter, i
			}
			d.ResetAfter = max(d.ResetAfter, m.Allow(now, 0).ResetAfter)
		}
	}
	d.Limit = r.rules[which].Limit
	return d, which
}

// cloneParts deep-copies a composite state: a sliding log's ring is copied.
func cloneParts(s []PartState) []PartState {
	c := slices.Clone(s)
	for i := range c {
		if c[i].Log != nil {
			l := cloneLog(*c[i].Log)
			c[i].Log = &l
		}
	}
	return c
}

// equalParts compares two composite states word by word, and sliding logs
// by their contents (ring, head, size), not by address.
func equalParts(a, b []PartState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].A != b[i].A || a[i].B != b[i].B || a[i].C != b[i].C || (a[i].Log == nil) != (b[i].Log == nil) {
			return false
		}
		if a[i].Log != nil && !equalState(*a[i].Log, *b[i].Log) {
			return false
		}
	}
	return true
}

// partSubject returns part i of the composite state s as a single-rule
// subject (reference_test.go) of its rule's own kernel, on a copy of s[i].
func partSubject(c *Composite, s []PartState, i int) subject {
	r := c.Limits().At(i)
	sub := newSubject(r)
	switch x := sub.(type) {
	case *kstate[TokenBucketState, *TokenBucket]:
		x.s = s[i].TB()
	case *kstate[FixedWindowState, *FixedWindow]:
		x.s = s[i].FW()
	case *kstate[SlidingCounterState, *SlidingCounter]:
		x.s = s[i].SC()
	case *kstate[Log, *SlidingLog]:
		if s[i].Log != nil {
			x.s = cloneLog(*s[i].Log)
		}
	}
	return sub
}

// drawPartRule draws a valid rule of alg: a small limit, sometimes a large
// one, and a window from one request per nanosecond to an hour.
func drawPartRule(t *rapid.T, alg admit.Algorithm, label string) admit.Rule {
	large := []int{100, 1000, 1 << 20}
	if alg == admit.SlidingLog {
		large = []int{100} // the reference model keeps every admission
	}
	limit := rapid.OneOf(rapid.IntRange(1, 5), rapid.IntRange(1, 20), rapid.SampledFrom(large)).Draw(t, label+"-limit")
	l := int64(limit)
	w := rapid.OneOf(
		rapid.Int64Range(l, 20*l),
		rapid.Int64Range(l, max(l, 1<<30)),
		rapid.SampledFrom([]int64{int64(time.Millisecond), int64(time.Second), int64(10 * time.Second), int64(time.Minute), int64(time.Hour)}),
	).Draw(t, label+"-window")
	return rule(alg, limit, time.Duration(max(w, l))) // L×W <= 2^20 × 1h < 2^62
}

// drawComposite draws the kernel of 1 to maxParts distinct rules of the
// algorithms algs.
func drawComposite(t *rapid.T, maxParts int, algs []admit.Algorithm) *Composite {
	var rules []admit.Rule
	for i := range rapid.IntRange(1, maxParts).Draw(t, "parts") {
		alg := rapid.SampledFrom(algs).Draw(t, fmt.Sprintf("rule%d-algorithm", i))
		if r := drawPartRule(t, alg, fmt.Sprintf("rule%d", i)); !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	return NewComposite(limitsOf(t, rules...))
}

// compositeClock bounds the readings of the composite tests to ±2^61 ns, so
// that a reading plus a wait stays within the kernels' clock range.
const compositeClock = int64(1) << 61

// compositeMove returns the next reading: the same, a few nanoseconds on, up
// to two windows of some part on, a few of its token intervals on, or set
// back by up to one of its windows (a stale reading).
func compositeMove(t *rapid.T, c *Composite, now int64) int64 {
	r := c.Limits().At(rapid.IntRange(0, c.Len()-1).Draw(t, "move-part"))
	l, w := int64(r.Limit), int64(r.Window)
	switch rapid.IntRange(0, 5).Draw(t, "move") {
	case 0:
		// the clock stands still
	case 1:
		now += rapid.Int64Range(0, 10).Draw(t, "move-small")
	case 2, 3:
		now += rapid.Int64Range(0, 2*w).Draw(t, "move-windows")
	case 4:
		now += rapid.Int64Range(0, 3*max(1, w/l)).Draw(t, "move-tokens")
	case 5:
		now -= rapid.Int64Range(1, w).Draw(t, "move-back")
	}
	return max(-compositeClock, min(now, compositeClock))
}

// drawCompositeN draws a request size in -1..(the largest Limit)+1,
// favouring small sizes and the edges of the smallest Limit.
func drawCompositeN(t *rapid.T, c *Composite) int {
	least, most := c.Limit(), 0
	for _, r := range c.Limits().Rules() {
		most = max(most, r.Limit)
	}
	return rapid.OneOf(
		rapid.IntRange(-1, most+1),
		rapid.IntRange(0, min(least, 3)),
		rapid.IntRange(1, least),
		rapid.SampledFrom([]int{-1, 0, 1, least, least + 1, most, most + 1}),
	).Draw(t, "n")
}

// compositeStep is one call of a scripted table: AllowN(n) at reading at,
// its Decision and the index of the rule that bound it.
type compositeStep struct {
	at    time.Duration
	n     int
	want  admit.Decision
	which int
}

// TestCompositeSteps: 2 per second and 3 per 10s on one key.
func TestCompositeSteps(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	c := NewComposite(limitsOf(t, tb(2, s), fw(3, 10*s)))
	state := make([]PartState, c.Len())
	for i, st := range []compositeStep{
		{0, 1, admit.Decision{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 10 * s}, 0},
		{0, 1, admit.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 10 * s}, 0},
		// The bucket is empty, the window has room: denied, nothing charged.
		{0, 1, admit.Decision{Limit: 2, RetryAfter: 500 * ms, ResetAfter: 10 * s}, 0},
		{0, 0, admit.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 10 * s}, 0},
		// Both have none left: a tie, the first rule binds.
		{500 * ms, 1, admit.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 9*s + 500*ms}, 0},
		// The bucket has a token, the window none: the window binds.
		{s, 1, admit.Decision{Limit: 3, RetryAfter: 9 * s, ResetAfter: 9 * s}, 1},
		{s, 0, admit.Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 9 * s}, 1},
		// 3 is above the bucket's Limit: never, and the bucket binds.
		{10 * s, 3, admit.Decision{Limit: 2, RetryAfter: admit.Never}, 0},
		{10 * s, -1, admit.Decision{Limit: 2, RetryAfter: admit.Never}, 0},
		{10 * s, 2, admit.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 10 * s}, 0},
		{10 * s, 1, admit.Decision{Limit: 2, RetryAfter: 500 * ms, ResetAfter: 10 * s}, 0},
		{10*s + 500*ms, 1, admit.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 9*s + 500*ms}, 0},
	} {
		got, which := c.Allow(state, st.at, st.n)
		if got != st.want || which != st.which {
			t.Errorf("step %d: AllowN(t=%v, %d) = %s, rule %d; want %s, rule %d", i, st.at, st.n, fmtDecision(got), which, fmtDecision(st.want), st.which)
		}
	}
}

// TestCompositeOneRule: a composite of one rule decides as that rule's
// kernel, on generated sequences.
func TestCompositeOneRule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawComposite(t, 1, algorithms)
		r := c.Limits().At(0)
		single := newSubject(r)
		s := make([]PartState, 1)
		now := rapid.Int64Range(-compositeClock, compositeClock).Draw(t, "start")
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			if i > 0 {
				now = compositeMove(t, c, now)
			}
			n := drawCompositeN(t, c)
			got, which := c.Allow(s, time.Duration(now), n)
			if want := single.Allow(time.Duration(now), n); got != want || which != 0 {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s, rule %d; the rule's kernel %s", i, r, now, n, fmtDecision(got), which, fmtDecision(want))
			}
		}
	})
}

// TestCompositeReference compares the kernel with the reference model on
// generated sequences of 1 to 4 rules of any algorithms, with readings
// moving forwards and sometimes stale: the same Decision, the same binding
// rule. A call that admits nothing (a denial, a probe, n out of range)
// must leave every part's state as it was.
func TestCompositeReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawComposite(t, 4, algorithms)
		ref := newCompositeRef(c.Limits())
		s := make([]PartState, c.Len())
		now := rapid.Int64Range(-compositeClock, compositeClock).Draw(t, "start")
		for i := range rapid.IntRange(1, 80).Draw(t, "steps") {
			if i > 0 {
				now = compositeMove(t, c, now)
			}
			n := drawCompositeN(t, c)
			before := cloneParts(s)
			got, which := c.Allow(s, time.Duration(now), n)
			want, wantWhich := ref.Allow(time.Duration(now), n)
			if got != want || which != wantWhich {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s, rule %d; reference model %s, rule %d",
					i, c.Limits(), now, n, fmtDecision(got), which, fmtDecision(want), wantWhich)
			}
			if (!got.Allowed || n == 0) && !equalParts(before, s) {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s admitted nothing but changed the state", i, c.Limits(), now, n, fmtDecision(got))
			}
		}
	})
}

// TestCompositeRetryAfter: a denial's RetryAfter r (short of Never) is the
// earliest reading at which every rule admits the same request if nothing
// else arrives. At now+r every part of a copy of the state admits n; and,
// when no part is a sliding counter, at now+r-1 some part denies it. (A
// sliding counter's own RetryAfter is not always the earliest reading: see
// admit.Decision's RetryAfter.)
func TestCompositeRetryAfter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawComposite(t, 4, algorithms)
		exact := true
		for i := range c.Len() {
			exact = exact && c.SlidingCounter(i) == nil
		}
		s := make([]PartState, c.Len())
		now := rapid.Int64Range(-compositeClock, compositeClock).Draw(t, "start")
		for i := range rapid.IntRange(1, 100).Draw(t, "steps") {
			if i > 0 {
				now = compositeMove(t, c, now)
			}
			n := drawCompositeN(t, c)
			before := cloneParts(s)
			got, which := c.Allow(s, time.Duration(now), n)
			if got.Allowed || got.RetryAfter == admit.Never {
				continue
			}
			retry := now + int64(got.RetryAfter)
			for p := range c.Len() {
				if d := partSubject(c, before, p).Allow(time.Duration(retry), n); !d.Allowed {
					t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s, but on a copy rule %d (%v) denies it at now+RetryAfter = %d: %s",
						i, c.Limits(), now, n, fmtDecision(got), p, c.Limits().At(p), retry, fmtDecision(d))
				}
			}
			if d, _ := c.Allow(cloneParts(before), time.Duration(retry), n); !d.Allowed {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s, but on a copy AllowN(t=%d, %d) = %s", i, c.Limits(), now, n, fmtDecision(got), retry, n, fmtDecision(d))
			}
			if !exact {
				continue
			}
			denies := false
			for p := range c.Len() {
				denies = denies || !partSubject(c, before, p).Allow(time.Duration(retry-1), n).Allowed
			}
			if !denies {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s (rule %d), but on a copy every rule admits it 1ns earlier, at %d",
					i, c.Limits(), now, n, fmtDecision(got), which, retry-1)
			}
		}
	})
}

// TestCompositeAllOrNothing: a denial leaves every part as it was, even a
// sliding log that admitted n on its own (its ring is the key's, not a
// copy: the composite must not write it), and every other kind of part.
func TestCompositeAllOrNothing(t *testing.T) {
	s := time.Second
	for _, rules := range [][]admit.Rule{
		{sl(3, time.Minute), tb(1, s)},
		{tb(1, s), sl(3, time.Minute)},
		{sl(3, time.Minute), fw(5, time.Minute), sc(5, time.Minute), sl(2, s), tb(1, s)},
	} {
		c := NewComposite(limitsOf(t, rules...))
		state := make([]PartState, c.Len())
		got, _ := c.Allow(state, 0, 1)
		require.True(t, got.Allowed, "%v: the first request", c.Limits())
		for _, at := range []time.Duration{0, s / 2} {
			before := cloneParts(state)
			for i := range c.Len() {
				if c.Limits().At(i).Algorithm == admit.SlidingLog {
					require.True(t, partSubject(c, state, i).Allow(at, 1).Allowed, "%v: the log of rule %d alone admits a second request at %v", c.Limits(), i, at)
				}
			}
			got, which := c.Allow(state, at, 1)
			require.False(t, got.Allowed, "%v: a second request at %v", c.Limits(), at)
			assert.True(t, equalParts(before, state), "%v: the denial by rule %d at %v changed the state", c.Limits(), which, at)
			for i := range c.Len() {
				if state[i].Log != nil {
					assert.Equal(t, 1, state[i].Log.Len(), "%v: rule %d's log holds the one admission", c.Limits(), i)
					assert.Equal(t, before[i].Log.ts, state[i].Log.ts, "%v: rule %d's timestamps", c.Limits(), i)
				}
			}
		}
	}
	// On generated sequences: whenever the composite denies while a part
	// alone would admit, that part is unchanged (the reference test checks
	// every part on every denial; this one makes sure such denials happen).
	rapid.Check(t, func(t *rapid.T) {
		c := drawComposite(t, 4, []admit.Algorithm{admit.SlidingLog, admit.SlidingLog, admit.TokenBucket, admit.FixedWindow, admit.SlidingCounter})
		st := make([]PartState, c.Len())
		now := rapid.Int64Range(-compositeClock, compositeClock).Draw(t, "start")
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			if i > 0 {
				now = compositeMove(t, c, now)
			}
			n := drawCompositeN(t, c)
			before := cloneParts(st)
			admitted := make([]bool, c.Len())
			for p := range c.Len() {
				admitted[p] = partSubject(c, before, p).Allow(time.Duration(now), n).Allowed
			}
			got, _ := c.Allow(st, time.Duration(now), n)
			if got.Allowed != !slices.Contains(admitted, false) {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s; the parts alone admit %v", i, c.Limits(), now, n, fmtDecision(got), admitted)
			}
			if !got.Allowed && !equalParts(before, st) {
				t.Fatalf("step %d: %v AllowN(t=%d, %d) = %s changed the state (the parts alone admit %v)", i, c.Limits(), now, n, fmtDecision(got), admitted)
			}
		}
	})
}

// TestCompositeFresh: Fresh holds iff every part is fresh by its own
// kernel; then a probe and a few follow-up requests, at that reading or
// later, decide as on a zero state, and when it does not, a probe already
// tells the two apart.
func TestCompositeFresh(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawComposite(t, 4, algorithms)
		s := make([]PartState, c.Len())
		now := rapid.Int64Range(-compositeClock, compositeClock).Draw(t, "start")
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			if i > 0 {
				now = compositeMove(t, c, now)
			}
			c.Allow(s, time.Duration(now), drawCompositeN(t, c))
			at := time.Duration(now)
			fresh := c.Fresh(s, at)
			every := true
			for p := range c.Len() {
				every = every && partSubject(c, s, p).Fresh(at)
			}
			if fresh != every {
				t.Fatalf("step %d: %v Fresh(t=%d) = %t, but every part fresh: %t", i, c.Limits(), now, fresh, every)
			}
			probe, _ := c.Allow(cloneParts(s), at, 0)
			zeroProbe, _ := c.Allow(make([]PartState, c.Len()), at, 0)
			if fresh != (probe == zeroProbe) {
				t.Fatalf("step %d: %v Fresh(t=%d) = %t, but a probe gets %s from the state and %s from a zero state",
					i, c.Limits(), now, fresh, fmtDecision(probe), fmtDecision(zeroProbe))
			}
			if !fresh {
				continue
			}
			a, z := cloneParts(s), make([]PartState, c.Len())
			when := now
			for j := range rapid.IntRange(0, 3).Draw(t, "follow-ups") {
				w := int64(c.Limits().At(rapid.IntRange(0, c.Len()-1).Draw(t, "follow-up-part")).Window)
				when += rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 3*w)).Draw(t, "follow-up-dt")
				n := drawCompositeN(t, c)
				da, wa := c.Allow(a, time.Duration(when), n)
				dz, wz := c.Allow(z, time.Duration(when), n)
				if da != dz || wa != wz {
					t.Fatalf("step %d: Fresh(t=%d) = true, but follow-up %d AllowN(t=%d, %d) = %s, and %s on a zero state",
						i, now, j, when, n, fmtDecision(da), fmtDecision(dz))
				}
			}
		}
	})
}

// TestCompositeReservable: only a composite of token buckets reserves.
func TestCompositeReservable(t *testing.T) {
	s := time.Second
	assert.True(t, NewComposite(limitsOf(t, tb(1, s))).Reservable())
	assert.True(t, NewComposite(limitsOf(t, tb(1, s), tb(10, time.Minute))).Reservable())
	assert.False(t, NewComposite(limitsOf(t, tb(1, s), fw(10, time.Minute))).Reservable())
	assert.False(t, NewComposite(limitsOf(t, sc(1, s))).Reservable())
}

// compositeKey is one key of a limiter of a composite of token buckets,
// with its hold, kept as the stores keep it: every reading is shown to the
// hold, and a hold that is no longer live is dropped.
type compositeKey struct {
	c *Composite
	s []PartState
	h CompositeHold
}

func newCompositeKey(c *Composite) *compositeKey {
	return &compositeKey{c: c, s: make([]PartState, c.Len())}
}

func (x *compositeKey) allow(now time.Duration, n int) admit.Decision {
	d, _ := x.c.Allow(x.s, now, n)
	if x.h.Ticket != 0 && !x.c.Observe(&x.h, x.s, now) {
		x.h = CompositeHold{}
	}
	return d
}

func (x *compositeKey) reserve(now time.Duration, n int) (time.Duration, uint64) {
	d, ok, t := x.c.ReserveHold(x.s, &x.h, now, n, admit.Never)
	if !ok {
		panic("refused")
	}
	return d, t
}

func (x *compositeKey) cancel(now time.Duration, t uint64) bool {
	ok, drop := x.c.CancelHold(x.s, &x.h, t, now)
	if drop {
		x.h = CompositeHold{}
	}
	return ok
}

// TestCompositeReserveWait: 1 per second and 2 per 4s. A reservation waits
// for the later of the two, and is charged in both.
func TestCompositeReserveWait(t *testing.T) {
	s := time.Second
	x := newCompositeKey(NewComposite(limitsOf(t, tb(1, s), tb(2, 4*s))))
	require.True(t, x.allow(0, 1).Allowed)
	for i, want := range []time.Duration{s, 2 * s, 4 * s, 6 * s} {
		// The first waits for the 1/s bucket, the second for both, and
		// from the third on the 2/4s bucket binds, a token every 2s.
		d, _ := x.reserve(0, 1)
		assert.Equal(t, want, d, "reservation %d", i+1)
	}
	d, ok := x.c.Reserve(x.s, 0, 1, 7*s)
	assert.False(t, ok, "an 8s wait exceeds maxWait 7s")
	assert.Equal(t, 8*s, d)
	d, ok = x.c.Reserve(x.s, 0, 2, admit.Never)
	assert.False(t, ok, "n above the smallest Limit can never be reserved")
	assert.Equal(t, admit.Never, d)
	d, ok = x.c.Reserve(x.s, 0, 0, 0)
	assert.True(t, ok, "n == 0 is free")
	assert.Zero(t, d)
}

// TestCompositeReserveChargesAtDue: 1 per 10ms and 10 per 10ms. A
// reservation waits 10ms for the first bucket; the second, full again by
// then, is charged at 10ms, where the waiter proceeds, not at the reading
// of the reservation: charged at 0 it would hold a token more at 10ms than
// an admission there leaves it.
func TestCompositeReserveChargesAtDue(t *testing.T) {
	ms := time.Millisecond
	x := newCompositeKey(NewComposite(limitsOf(t, tb(1, 10*ms), tb(10, 10*ms))))
	require.True(t, x.allow(0, 1).Allowed)
	d, tr := x.reserve(0, 1)
	require.Equal(t, 10*ms, d)
	require.NotZero(t, tr)
	assert.Equal(t, 9, partSubject(x.c, x.s, 1).Allow(10*ms, 0).Remaining, "the second bucket at 10ms, after the waiter's token")
	assert.Equal(t, 0, partSubject(x.c, x.s, 0).Allow(10*ms, 0).Remaining, "the first bucket at 10ms")
}

// TestCompositeHoldCancelsOnce: a reservation cancelled twice gives back
// once, in every part, even when a later reservation leaves exactly the
// state it left.
func TestCompositeHoldCancelsOnce(t *testing.T) {
	s := time.Second
	x := newCompositeKey(NewComposite(limitsOf(t, tb(1, s), tb(2, 4*s))))
	require.True(t, x.allow(0, 1).Allowed)
	beforeA := cloneParts(x.s)
	dA, tA := x.reserve(0, 1)
	require.Equal(t, s, dA)
	require.NotZero(t, tA)
	afterA := cloneParts(x.s)
	require.False(t, equalParts(beforeA[1:], afterA[1:]), "A is charged in the bucket that did not bind too")
	assert.True(t, x.cancel(0, tA))
	assert.True(t, equalParts(beforeA, x.s), "the cancellation gives back in every part")
	dB, tB := x.reserve(0, 1)
	require.Equal(t, s, dB)
	require.True(t, equalParts(afterA, x.s), "B leaves the state A left")
	assert.False(t, x.cancel(0, tA), "A was cancelled already")
	dC, _ := x.reserve(0, 1)
	assert.Equal(t, 2*s, dC, "C waits behind B")
	assert.NotEqual(t, tA, tB)
}

// TestCompositeHoldStaleCancel: once a reading has seen the tokens due, a
// cancel at an older reading gives nothing back.
func TestCompositeHoldStaleCancel(t *testing.T) {
	s := time.Second
	c := NewComposite(limitsOf(t, tb(1, s), tb(2, 4*s)))
	for _, probe := range []int{0, 1} {
		x := newCompositeKey(c)
		require.True(t, x.allow(0, 1).Allowed)
		_, tr := x.reserve(0, 1) // due at 1s
		x.allow(1500*time.Millisecond, probe)
		assert.False(t, x.cancel(500*time.Millisecond, tr), "AllowN(%d) at 1.5s saw the tokens due", probe)
		assert.False(t, x.allow(1500*time.Millisecond, 1).Allowed, "the reservation's token is spent")
	}
	x := newCompositeKey(c)
	require.True(t, x.allow(0, 1).Allowed)
	before := cloneParts(x.s)
	_, tr := x.reserve(0, 1)
	x.allow(900*time.Millisecond, 0)
	assert.True(t, x.cancel(500*time.Millisecond, tr), "nothing has seen the tokens due")
	assert.True(t, equalParts(before, x.s))
}

// TestCompositeHoldOnlyLatest: only the latest reservation can be
// cancelled; a ticket of another key's reservation, or none, neither
// cancels nor drops the hold.
func TestCompositeHoldOnlyLatest(t *testing.T) {
	s := time.Second
	c := NewComposite(limitsOf(t, tb(2, 2*s), tb(3, 6*s)))
	x, y := newCompositeKey(c), newCompositeKey(c)
	require.True(t, x.allow(0, 2).Allowed)
	require.True(t, y.allow(0, 2).Allowed)
	_, t1 := x.reserve(0, 1)
	_, t2 := x.reserve(0, 1)
	_, ty := y.reserve(0, 1)
	require.NotZero(t, ty)
	assert.False(t, x.cancel(0, t1), "t2 relies on t1's slot")
	assert.False(t, x.cancel(0, ty), "y's reservation, presented to x")
	assert.False(t, x.cancel(0, nextTicket()), "a ticket no reservation carries")
	assert.False(t, x.cancel(0, 0), "the zero ticket")
	assert.True(t, x.cancel(0, t2))
	assert.False(t, x.cancel(0, t1), "t1's hold was replaced by t2's")
	assert.True(t, y.cancel(0, ty), "x's calls left y's hold alone")
	d0, t0 := x.reserve(0, 0)
	assert.Zero(t, d0)
	assert.Zero(t, t0, "n == 0 holds nothing")
}

// TestCompositeObserve: a hold is live while the key's state is the one its
// reservation left and its tokens are not due at the newest reading shown;
// once it is not, it never is again.
func TestCompositeObserve(t *testing.T) {
	s := time.Second
	x := newCompositeKey(NewComposite(limitsOf(t, tb(1, s), tb(2, 4*s))))
	require.True(t, x.allow(0, 1).Allowed)
	_, tr := x.reserve(0, 1) // due at 1s
	require.NotZero(t, tr)
	h := x.h
	assert.True(t, x.c.Observe(&h, x.s, 900*time.Millisecond))
	assert.False(t, x.c.Observe(&h, make([]PartState, x.c.Len()), 900*time.Millisecond), "another state: something was charged or reset since")
	assert.False(t, x.c.Observe(&h, x.s, s), "due at 1s")
	assert.False(t, x.c.Observe(&h, x.s, 500*time.Millisecond), "a reading of 1s was shown to it")
	assert.Equal(t, s, h.Seen)
	assert.False(t, x.c.Observe(&CompositeHold{}, x.s, 0), "the zero hold holds nothing")
}

// TestCompositeHoldImmediate: a reservation due at once holds nothing.
func TestCompositeHoldImmediate(t *testing.T) {
	x := newCompositeKey(NewComposite(limitsOf(t, tb(2, time.Second), tb(5, time.Minute))))
	d, tr := x.reserve(0, 1)
	assert.Zero(t, d)
	assert.Zero(t, tr)
	assert.False(t, x.cancel(0, tr))
}

// liveHold is the test's own account of the reservation a key can still
// cancel.
type liveHold struct {
	ticket uint64
	before []PartState
	due    time.Duration // the reading at which its tokens are due
	seen   time.Duration // the newest reading shown to it
	dues   int           // its entries in each part's dues
}

// TestCompositeReserveProperties drives one key of a composite of 1 to 4
// token buckets with reservations, admissions and cancellations, with the
// clock moving forwards and backwards, and checks:
//   - a reservation's wait is the largest of the parts' own Reserve waits
//     (maxWait 0 decides as Allow, state included); a refused one, and one
//     of n <= 0 or n above the smallest Limit, changes nothing;
//   - where a reservation's waiter proceeds, at now+d, an Allow of n on the
//     state it found admits n in every part, and the tokens are due there;
//   - every part is charged as by an admission at now+d, the binding part
//     included (whose own reservation at now leaves the same state);
//   - each part's interval bound holds over the readings at which tokens
//     were taken: admissions at their reading, waiters at now+d;
//   - a cancellation succeeds only with the ticket of the latest
//     reservation that must wait, once, while nothing has been charged
//     since and its tokens are not due at the newest reading shown to it;
//     and it restores every part.
func TestCompositeReserveProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var rules []admit.Rule
		for i := range rapid.IntRange(1, 4).Draw(t, "parts") {
			limit := rapid.IntRange(1, 12).Draw(t, fmt.Sprintf("rule%d-limit", i))
			window := rapid.Int64Range(int64(limit), int64(10*time.Second)).Draw(t, fmt.Sprintf("rule%d-window", i))
			if r := tb(limit, time.Duration(window)); !slices.Contains(rules, r) {
				rules = append(rules, r)
			}
		}
		c := NewComposite(limitsOf(t, rules...))
		x := newCompositeKey(c)
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(t, "start"))
		dues := make([][]dueTokens, c.Len()) // per part, in order of charge
		taken := func(at time.Duration, n int) {
			for p := range dues {
				dues[p] = append(dues[p], dueTokens{at: new(big.Rat).SetInt64(int64(at)), n: int64(n)})
			}
		}
		var live *liveHold
		var tickets []uint64
		for i := range rapid.IntRange(1, 60).Draw(t, "ops") {
			switch rapid.IntRange(0, 7).Draw(t, "op") {
			case 0:
				now += time.Duration(rapid.Int64Range(0, int64(2*rules[0].Window)).Draw(t, "advance"))
			case 1:
				now -= time.Duration(rapid.Int64Range(0, int64(rules[0].Window)).Draw(t, "back"))
			case 2: // an admission, a denial or a probe
				n := drawCompositeN(t, c)
				before := cloneParts(x.s)
				d := x.allow(now, n)
				if d.Allowed && n > 0 {
					taken(now, n)
					live = nil // the state it left is gone
				} else if !equalParts(before, x.s) {
					t.Fatalf("op %d: AllowN(t=%v, %d) = %s admitted nothing but changed the state", i, now, n, fmtDecision(d))
				}
				if live != nil {
					live.seen = max(live.seen, now)
					if live.due <= live.seen {
						live = nil
					}
				}
			case 3, 4: // a cancellation, with the latest ticket or another
				tk := uint64(0)
				if len(tickets) > 0 {
					tk = rapid.SampledFrom(tickets).Draw(t, "ticket")
				}
				if rapid.IntRange(0, 3).Draw(t, "foreign") == 0 {
					tk = nextTicket()
				}
				want := false
				var before []PartState
				if live != nil && tk == live.ticket {
					want = live.due > max(live.seen, now)
					before = live.before
					if want {
						for p := range dues {
							dues[p] = slices.Delete(dues[p], live.dues, live.dues+1)
						}
					}
					live = nil // cancelled, or dropped
				}
				if got := x.cancel(now, tk); got != want {
					t.Fatalf("op %d: CancelHold(t=%v, ticket %d) = %t, want %t", i, now, tk, got, want)
				}
				if want && !equalParts(before, x.s) {
					t.Fatalf("op %d: a cancellation left %+v, not the state the reservation found, %+v", i, x.s, before)
				}
			default: // a reservation
				n := drawCompositeN(t, c)
				maxWait := rapid.SampledFrom([]time.Duration{0, rules[0].Window / 2, admit.Never}).Draw(t, "maxWait")
				before := cloneParts(x.s)
				want := time.Duration(0)
				switch {
				case n < 0 || n > c.Limit():
					want = admit.Never
				case n > 0:
					for p := range c.Len() {
						st := before[p].TB()
						w, _ := c.TokenBucket(p).Reserve(&st, now, n, admit.Never)
						want = max(want, w)
					}
				}
				probe := cloneParts(before)
				asAllow, _ := c.Allow(probe, now, n)
				seen := now
				if live != nil {
					seen = max(live.seen, now)
				}
				d, ok, tk := c.ReserveHold(x.s, &x.h, now, n, maxWait)
				switch {
				case d != want || ok != (d <= maxWait && want != admit.Never):
					t.Fatalf("op %d: ReserveHold(t=%v, %d, %v) = %v, %t; the parts' largest wait is %v", i, now, n, maxWait, d, ok, want)
				case maxWait == 0 && ok != asAllow.Allowed:
					t.Fatalf("op %d: ReserveHold(t=%v, %d, 0) = %v, %t; AllowN = %s", i, now, n, d, ok, fmtDecision(asAllow))
				case maxWait == 0 && ok && !equalParts(probe, x.s):
					t.Fatalf("op %d: ReserveHold(t=%v, %d, 0) left %+v; AllowN left %+v", i, now, n, x.s, probe)
				case (!ok || n == 0) && !equalParts(before, x.s):
					t.Fatalf("op %d: ReserveHold(t=%v, %d, %v) = %v, %t took nothing but changed the state", i, now, n, maxWait, d, ok)
				case (tk != 0) != (ok && n > 0 && d > 0 && now+d > seen):
					t.Fatalf("op %d: ReserveHold(t=%v, %d, %v) = %v, %t, ticket %d; the newest reading shown is %v", i, now, n, maxWait, d, ok, tk, seen)
				}
				if live != nil {
					live.seen = seen
					if live.due <= live.seen {
						live = nil
					}
				}
				if !ok || n == 0 {
					continue
				}
				at := now + d
				for p := range c.Len() {
					if v := partSubject(c, before, p).Allow(at, n); !v.Allowed {
						t.Fatalf("op %d: ReserveHold(t=%v, %d) waits %v, but on the state it found rule %d (%v) denies AllowN(t=%v, %d): %s",
							i, now, n, d, p, rules[p], at, n, fmtDecision(v))
					}
				}
				for p := range c.Len() {
					st := before[p].TB()
					c.TokenBucket(p).Decide(&st, at, n)
					if x.s[p].TB() != st {
						t.Fatalf("op %d: ReserveHold(t=%v, %d) waits %v and leaves rule %d (%v) at %+v; an admission at %v leaves %+v",
							i, now, n, d, p, rules[p], x.s[p].TB(), at, st)
					}
				}
				if d > 0 && c.Due(x.s) != at {
					t.Fatalf("op %d: ReserveHold(t=%v, %d) waits %v, but its tokens are due at %v", i, now, n, d, c.Due(x.s))
				}
				taken(at, n)
				live = nil
				if tk != 0 {
					tickets = append(tickets, tk)
					live = &liveHold{ticket: tk, before: before, due: at, seen: seen, dues: len(dues[0]) - 1}
				}
			}
		}
		for p := range c.Len() {
			checkDueBound(t, dues[p], int64(rules[p].Limit), int64(rules[p].Window))
		}
	})
}
