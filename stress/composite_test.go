package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// The composite cell: composite limits (admit.Limits, several rules on one
// key, all or nothing) in every variant that builds them, single-key and
// keyed. The oracle object is still the key; its spec is compositeSpec,
// composed from the rules' own specs, so every oracle applies unchanged:
// replay and porcupine against the composite (an admission must fit every
// rule at its reading, a denial must be one that some rule makes, and a
// denied request must not have charged any rule: a rule charged for a
// denial shows as budget lost), and each rule's own interval bound over all
// the key's admissions, whichever rule bound them.

// limitsCase is a composite the stress tests use, named for subtests.
type limitsCase struct {
	name   string
	limits admit.Limits
}

// mustLimits parses the text form of Limits, which must be valid.
func mustLimits(text string) admit.Limits {
	ls, err := admit.ParseLimits(text)
	if err != nil {
		panic(fmt.Sprintf("stress: %q: %v", text, err))
	}
	return ls
}

// compositeCases are the composites of the composite cell. Their budgets are
// small, so that every phase spends them, and their rules take turns binding
// as the clock moves: a short rule (a burst of a few, refilled or reset
// within 10 to 100ms) under a long one (a second), in both orders, since a
// composite decides its rules in order (with the short rule last it binds
// in almost every phase; first, the long rule binds only once a second's
// budget is spent). In the atomic variant, which has single-key composites
// only, the two-rule composites take the pair form (two words, one 16-byte
// CAS) and three rules the snapshot; the composite with a sliding log runs
// in the other variants only.
var compositeCases = []limitsCase{
	{"tb+fw", mustLimits("token-bucket,5,100ms + fixed-window,12,1s")},
	{"fw+tb", mustLimits("fixed-window,12,1s + token-bucket,5,100ms")},
	{"fw+sc", mustLimits("fixed-window,4,50ms + sliding-counter,20,1s")},
	{"tb+tb", mustLimits("token-bucket,3,10ms + token-bucket,20,1s")},
	{"tb+fw+sc", mustLimits("token-bucket,4,40ms + fixed-window,10,250ms + sliding-counter,30,1s")},
	{"fw+sl+tb", mustLimits("fixed-window,30,1s + sliding-log,10,250ms + token-bucket,4,40ms")},
}

// compositeSteps draws the clock's moves between phases from the moves
// steps draws for each rule of ls: within a short rule's token or window,
// across it, across a long rule's window, and to (and 1ns short of) the
// moment a key idle since the last phase becomes evictable.
func compositeSteps(ls admit.Limits) func(*rand.Rand, int) time.Duration {
	var choices []time.Duration
	for i := range ls.Len() {
		rule := ls.At(i)
		token := max(rule.Window/time.Duration(rule.Limit), 1)
		h := horizon(rule)
		choices = append(choices, 0, 1, token/2, token, 3*token, rule.Window/7, rule.Window/3, rule.Window-1, rule.Window, h, h+evictionSlack-1, h+evictionSlack)
	}
	return func(r *rand.Rand, _ int) time.Duration { return choices[r.IntN(len(choices))] }
}

// compositeDemand returns the requests for one key in one phase: AllowN
// with n from 0 to 3 (mostly 1) until they ask about three times the
// smallest Limit l, and copies of the tail of requests for 1 that spends
// the budget to the last unit.
func compositeDemand(r *rand.Rand, key string, l int, copies int) (main, end []req) {
	weights := [...]int{0, 1, 1, 1, 1, 2, 2, 3}
	for asked := 0; asked < 3*l; {
		n := min(weights[r.IntN(len(weights))], l)
		main = append(main, req{key, n})
		asked += max(n, 1)
	}
	for range copies {
		for _, n := range tail(l) {
			end = append(end, req{key, n})
		}
	}
	return main, end
}

// compositeWorkload hammers keys keys ("hot" alone when keys is 1; else a
// random nonempty subset of them in each phase, so that the others fall
// idle) with compositeDemand, the clock moved between bursts by
// compositeSteps. Phased: the clock frozen during each burst, for the exact
// oracles. Ticking: the clock also moved during the bursts, by a quarter of
// the shortest rule's token, with stale readings on purpose (at most one
// tick old: the moves between bursts settle), for the interval bounds.
func compositeWorkload(ls admit.Limits, keys int, ticking bool) *workload {
	g := goroutines()
	l := ls.Limit()
	w := &workload{
		name:       "composite",
		goroutines: g,
		phases:     budget{full: 120, short: 40}.get(),
		plan: func(r *rand.Rand, _ int) [][]req {
			if keys == 1 {
				main, end := compositeDemand(r, "hot", l, max(1, g/4))
				return deal(r, g, main, end, nil)
			}
			var mains, tails []req
			active := 1 + r.IntN(keys)
			for _, i := range r.Perm(keys)[:active] {
				m, e := compositeDemand(r, fmt.Sprintf("k%d", i), l, max(1, g/(4*active)))
				mains, tails = append(mains, m...), append(tails, e...)
			}
			return deal(r, g, mains, tails, nil)
		},
		step:          compositeSteps(ls),
		yieldPermille: hookYield,
		clockYield:    clockYield,
	}
	if ticking {
		w.name = "composite-ticking"
		w.phases = budget{full: 60, short: 24}.get()
		w.clockStale = clockStale
		w.settle = true
		w.tick = time.Duration(1<<63 - 1)
		for i := range ls.Len() {
			rule := ls.At(i)
			w.tick = min(w.tick, max(rule.Window/time.Duration(4*rule.Limit), 1))
		}
		w.maxTicks = 4 * ls.At(0).Limit
	}
	return w
}

// compositeKeys is how many keys the keyed shape hammers, in one shard.
const compositeKeys = 4

// TestComposite hammers composite limits (admit.Limits) in every variant
// that builds them, single-key and keyed (four keys in one shard, with a
// sweeper evicting idle keys as fast as it can), with AllowN(0..3) from many
// goroutines released together: on a clock frozen during each burst, checked
// by every exact oracle against the composite's spec and by each rule's
// interval bound; and on a clock ticking during the bursts with stale
// readings, checked by each rule's interval bound.
func TestComposite(t *testing.T) {
	for _, v := range variants {
		for _, shape := range []string{"single", "keyed"} {
			for _, mode := range []string{"phased", "ticking"} {
				for _, lc := range compositeCases {
					t.Run(fmt.Sprintf("variant=%s/shape=%s/clock=%s/limits=%s", v.name, shape, mode, lc.name), func(t *testing.T) {
						keys, opts := 1, verifyOptions{}
						if shape == "keyed" {
							keys = compositeKeys
						}
						if mode == "phased" {
							opts = exactOptions()
						}
						var s subject
						w := compositeWorkload(lc.limits, keys, mode == "ticking")
						if shape == "keyed" {
							w.background = append(w.background, sweeper(w, &s, 2000))
						}
						var which whichCheck
						runAndVerify(t, w, opts, func(clk *stressClock) subject {
							if shape == "single" {
								s = newCompositeSingleSubject(t, v, lc.limits, clk, &which)
							} else {
								s = newCompositeKeyedSubject(t, v, lc.limits, clk, &which, admit.WithShards(1))
							}
							return s
						})
						if err := which.err(); err != nil {
							t.Error(err)
						}
					})
				}
			}
		}
	}
}

// whichCheck records the AllowNWhich calls whose index does not name a
// rule with the Decision's Limit.
type whichCheck struct {
	mu    sync.Mutex
	bad   int
	first string
}

func (c *whichCheck) record(ls admit.Limits, key string, n int, d admit.Decision, which int) {
	if which >= 0 && which < ls.Len() && ls.At(which).Limit == d.Limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bad == 0 {
		c.first = fmt.Sprintf("AllowNWhich(%q, %d) = %+v, %d", key, n, d, which)
	}
	c.bad++
}

func (c *whichCheck) err() error {
	if c.bad == 0 {
		return nil
	}
	return fmt.Errorf("AllowNWhich: %d call(s) returned an index whose rule's Limit is not the Decision's; the first: %s", c.bad, c.first)
}

// viaWhich is viaAllow for a composite limiter: of the requests viaAllow
// sends to AllowN, every third goes to allowWhich, its AllowNWhich, whose
// index is checked against the Decision's Limit.
func viaWhich(ls admit.Limits, c *whichCheck, allow1 func(string) admit.Decision, allowN func(string, int) admit.Decision,
	allowWhich func(string, int) (admit.Decision, int)) func(string, int) admit.Decision {
	var calls atomic.Uint64
	return viaAllow(allow1, func(key string, n int) admit.Decision {
		if calls.Add(1)%3 != 0 {
			return allowN(key, n)
		}
		d, which := allowWhich(key, n)
		c.record(ls, key, n, d, which)
		return d
	})
}

// newCompositeKeyedSubject builds v's keyed limiter for ls over clk, or
// skips t if v builds none (no constructor, or admit.ErrUnsupported).
func newCompositeKeyedSubject(t *testing.T, v variant, ls admit.Limits, clk *stressClock, which *whichCheck, opts ...admit.Option) subject {
	t.Helper()
	if v.keyedLimits == nil {
		t.Skipf("%s has no keyed limiter for composite limits", v.name)
	}
	lim, err := v.keyedLimits(ls, append(opts, admit.WithClock(clk))...)
	if errors.Is(err, admit.ErrUnsupported) {
		t.Skipf("%s.NewLimits(%v): %v", v.name, ls, err)
	}
	if err != nil {
		t.Fatalf("%s.NewLimits(%v): %v", v.name, ls, err)
	}
	cs := lim
	if got := cs.Limits(); got != ls {
		t.Fatalf("%s.NewLimits(%v).Limits() = %v", v.name, ls, got)
	}
	return subject{
		name:     v.name + ".NewLimits",
		allow:    viaWhich(ls, which, cs.Allow, cs.AllowN, cs.AllowNWhich),
		sweep:    cs.Sweep,
		classify: classifyOne(newCompositeSpec(ls)),
	}
}

// newCompositeSingleSubject builds v's single-key limiter for ls over clk,
// or skips t if v builds none.
func newCompositeSingleSubject(t *testing.T, v variant, ls admit.Limits, clk *stressClock, which *whichCheck) subject {
	t.Helper()
	if v.singleLimits == nil {
		t.Skipf("%s has no single-key limiter for composite limits", v.name)
	}
	lim, err := v.singleLimits(ls, admit.WithClock(clk))
	if errors.Is(err, admit.ErrUnsupported) {
		t.Skipf("%s.NewLimitsLimiter(%v): %v", v.name, ls, err)
	}
	if err != nil {
		t.Fatalf("%s.NewLimitsLimiter(%v): %v", v.name, ls, err)
	}
	cl, ok := lim.(admit.CompositeLimiter)
	if !ok {
		t.Fatalf("%s.NewLimitsLimiter(%v) returned a %T, which is not an admit.CompositeLimiter", v.name, ls, lim)
	}
	if got := cl.Limits(); got != ls {
		t.Fatalf("%s.NewLimitsLimiter(%v).Limits() = %v", v.name, ls, got)
	}
	return subject{
		name: v.name + ".NewLimitsLimiter",
		allow: viaWhich(ls, which,
			func(string) admit.Decision { return cl.Allow() },
			func(_ string, n int) admit.Decision { return cl.AllowN(n) },
			func(_ string, n int) (admit.Decision, int) { return cl.AllowNWhich(n) }),
		classify: classifyOne(newCompositeSpec(ls)),
	}
}

// TestCompositeSpec checks the composite spec, which the oracles trust,
// against kernel.Composite, which the variants run: the same Decision for
// every request of random sequences, with the clock moved by the composite
// cell's steps and requests from -1 to one past the smallest Limit.
func TestCompositeSpec(t *testing.T) {
	ops := budget{full: 20000, short: 4000}.get()
	for _, lc := range compositeCases {
		t.Run("limits="+lc.name, func(t *testing.T) {
			r := newRand(seedFor(t), 0)
			sp := newCompositeSpec(lc.limits)
			k := kernel.NewComposite(lc.limits)
			ks := make([]kernel.PartState, k.Len())
			st := sp.init()
			step := compositeSteps(lc.limits)
			now := clockStart
			admitted := 0
			for i := range ops {
				if r.IntN(4) == 0 {
					now += step(r, i)
				}
				n := r.IntN(lc.limits.Limit()+3) - 1
				want, which := k.Allow(ks, now, n)
				got, next := sp.step(st, now, n)
				if got != want {
					t.Fatalf("op %d: AllowN(%d) at %v: spec %+v, kernel.Composite %+v (rule %d)", i, n, now, got, want, which)
				}
				if want.Limit != lc.limits.At(which).Limit {
					t.Fatalf("op %d: AllowN(%d) at %v: kernel.Composite names rule %d for a Decision with Limit %d", i, n, now, which, want.Limit)
				}
				if got.Allowed && n > 0 {
					admitted++
				}
				st = next
			}
			if admitted == 0 || admitted == ops {
				t.Fatalf("%d of %d requests admitted: the sequence tested only one side", admitted, ops)
			}
		})
	}
}

// compositeSelfTestCases are TestSelfTest's cases for the composite cell:
// perRuleCAS in each of its modes, single-key, on the composite workloads.
// Charging the rules one at a time only ever under-admits (every charge is
// a CAS, so no rule lets through more than its own bound): the exact
// oracles catch it, as budget lost and conservation in the replay and as a
// history the composite's spec cannot produce in porcupine; the interval
// bounds cannot. Publishing the later rules' words without a CAS
// over-admits on those rules, and their own interval bounds catch it, with
// the clock ticking and readings stale, where the exact oracles do not run.
func compositeSelfTestCases() []selfTestCase {
	broken := func(ls admit.Limits, mode perRuleMode, name string) func(*testing.T, *subject) func(*stressClock) subject {
		return func(*testing.T, *subject) func(*stressClock) subject {
			return func(clk *stressClock) subject {
				l := newPerRuleCAS(ls, clk, mode)
				return subject{name: name, allow: func(_ string, n int) admit.Decision { return l.AllowN(n) }, classify: classifyOne(newCompositeSpec(ls))}
			}
		}
	}
	fwtb := compositeCases[1].limits
	noPorcupine := func(*testing.T) verifyOptions { return verifyOptions{} }
	return []selfTestCase{
		{
			name:  "composite-charge-in-turn/replay",
			want:  "replay",
			w:     func(*subject) *workload { return compositeWorkload(fwtb, 1, false) },
			opts:  noPorcupine,
			build: broken(fwtb, chargeInTurn, "perRuleCAS charging each rule in turn"),
			after: wantViolation("budget lost"),
		},
		{
			name: "composite-charge-in-turn/porcupine",
			want: "linearizability",
			w:    func(*subject) *workload { return compositeWorkload(fwtb, 1, false) },
			opts: func(*testing.T) verifyOptions {
				return verifyOptions{porcupineTimeout: porcupineTimeout(), vizDir: "-"}
			},
			build: broken(fwtb, chargeInTurn, "perRuleCAS charging each rule in turn"),
		},
		{
			name:  "composite-check-then-charge/replay",
			want:  "replay",
			w:     func(*subject) *workload { return compositeWorkload(fwtb, 1, false) },
			opts:  noPorcupine,
			build: broken(fwtb, checkThenCharge, "perRuleCAS checking every rule, then charging each in turn"),
		},
		{
			name:  "composite-first-word-cas/intervals",
			want:  "interval bounds",
			w:     func(*subject) *workload { return compositeWorkload(fwtb, 1, true) },
			opts:  noPorcupine,
			build: broken(fwtb, firstWordCAS, "perRuleCAS publishing the later rules' words by Store"),
			after: wantViolation("rule 2 of 2"),
		},
	}
}

// wantViolation returns a self-test's after that requires the failing
// report to mention what.
func wantViolation(what string) func(*testing.T, *report) {
	return func(t *testing.T, rep *report) {
		if err := rep.err(); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("caught, but with no %q among the violations", what)
		}
	}
}
