package stress

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// The churn workloads: keys hammered in one shard (WithShards(1)) while new
// keys are created in that shard among their requests, so that the shard's
// store grows during the race (in atomic's lock-free table, a rebuild that
// freezes and moves every key, hot ones included, while calls on them are
// between their load and their CAS; elsewhere a map's growth); and the same
// with a sweeper evicting the idle keys as fast as it can and the clock
// moved to where the previous phase's new keys are idle, so that the store
// shrinks and grows again in every phase.

// churnHot are the keys the churn workloads hammer: one short enough to
// live inside a table slot (15 bytes or fewer), one longer (kept out of
// line, in a table of full keys).
var churnHot = []string{"hot", "hot/a-key-longer-than-15-bytes"}

// churnKey returns the i-th key created in phase p: one in four is longer
// than 15 bytes.
func churnKey(p, i int) string {
	if i%4 == 3 {
		return fmt.Sprintf("phase-%02d/new-key-%05d", p, i)
	}
	return fmt.Sprintf("p%02d-n%05d", p, i)
}

// churnFresh is how many keys a churn workload creates per phase: 192 (128
// with -short), for which atomic's table, from empty or from its least
// size (8 slots, after a sweep), is rebuilt 13 or 14 times (11 or 12) as it
// grows by about 1.25× a time to hold them.
func churnFresh() int { return budget{full: 192, short: 128}.get() }

// keysMidRaceWorkload: the hot keys, each asked twice its budget per phase
// in unit requests (unitDemand), and fresh new keys per phase, each
// requested twice (n = 1) at random places among the hot keys' requests, so
// that the creations (and the store's growth) are spread over the whole
// burst, while the hot keys' budgets are being spent. The clock moves as in
// the other phased workloads; the keys of earlier phases stay, or become
// idle and are evicted by the insertions' own sweeps.
func keysMidRaceWorkload(rule admit.Rule, fresh int) *workload {
	g := goroutines()
	return &workload{
		name:       "keys-mid-race",
		goroutines: g,
		phases:     budget{full: 5, short: 3}.get(),
		plan: func(r *rand.Rand, p int) [][]req {
			var mains, tails []req
			for _, k := range churnHot {
				m, e := unitDemand(r, k, rule.Limit, max(1, g/8))
				mains, tails = append(mains, m...), append(tails, e...)
			}
			for i := range fresh {
				k := churnKey(p, i)
				mains = append(mains, req{k, 1}, req{k, 1})
			}
			return deal(r, g, mains, tails, nil)
		},
		step:          steps(rule),
		yieldPermille: hookYield,
		clockYield:    clockYield,
	}
}

// resizeWorkload is keysMidRaceWorkload with a sweeper calling s's Sweep
// during every burst and the clock moved between phases to where the keys
// created in the previous phase are idle and the hot keys mostly not
// (resizeSteps): the sweeper evicts the new keys at the start of the burst,
// the store shrinks (atomic's table once it holds fewer keys than an
// eighth of its slots), and grows again as the burst creates more, while
// the hot keys are hammered throughout.
func resizeWorkload(rule admit.Rule, s *subject, fresh int) *workload {
	w := keysMidRaceWorkload(rule, fresh)
	w.name = "resize-mid-race"
	w.step = resizeSteps(rule)
	w.background = append(w.background, sweeper(w, s, 200))
	return w
}

// resizeSteps draws the clock's moves of the resize workload: none (the
// store only grows), to where a key admitted twice at the last reading is
// idle at the stores' eviction reading (three tokens, a fraction of the
// horizon, plus the slack) while a hot key whose budget ran out is not (for
// the token bucket), and to (and 1ns short of) the point where every key is
// idle, hot ones included.
func resizeSteps(rule admit.Rule) func(*rand.Rand, int) time.Duration {
	token := max(rule.Window/time.Duration(rule.Limit), 1)
	h := horizon(rule)
	choices := []time.Duration{0, 3*token + evictionSlack, h/4 + evictionSlack, h/2 + evictionSlack, h + evictionSlack - 1, h + evictionSlack}
	return func(r *rand.Rand, _ int) time.Duration { return choices[r.IntN(len(choices))] }
}

// churnRules are the rules of the churn workloads: one of each whose states
// sharded keeps in its lock-free table (every token bucket, the fixed
// window, the sliding counter of Limit < 2^16), the store these workloads
// are for, with budgets small enough for unit requests to spend them (see
// unitDemand). The sliding log and the wide counter live in map stores in
// every variant, whose growth is Go's map's; the hot-key, many-key and
// eviction workloads cover them.
var churnRules = []ruleCase{
	{"tb", admit.Rule{Algorithm: admit.TokenBucket, Limit: 200, Window: time.Second}},
	{"tb-frac", admit.Rule{Algorithm: admit.TokenBucket, Limit: 120, Window: 7 * time.Second}},
	{"fw", admit.Rule{Algorithm: admit.FixedWindow, Limit: 200, Window: time.Second}},
	{"sc", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 200, Window: time.Second}},
}

// unitDemand returns the requests for one hot key in one phase of the
// churn workloads: twice the budget in requests, almost all for 1 (a few
// for 2 or 3, probes, requests that can never pass and negative ones), so
// that the budget is spent by about Limit admissions, each one a CAS that a
// rebuild can race; and copies of the tail, which deal puts last.
func unitDemand(r *rand.Rand, key string, l, copies int) (main, end []req) {
	for range 2 * l {
		n := 1
		switch x := r.IntN(100); {
		case x < 2:
			n = 0
		case x < 4:
			n = l + 1
		case x < 5:
			n = -1
		case x < 10:
			n = 2 + r.IntN(2)
		}
		main = append(main, req{key, n})
	}
	for range copies {
		for _, n := range tail(l) {
			end = append(end, req{key, n})
		}
	}
	return main, end
}

// keyModes are the ways a keyed store may keep its keys: the keys
// themselves, and admit.WithHashedKeys (a seeded 64-bit hash; only sharded
// offers it, the others return an error wrapping admit.ErrUnsupported and
// the subtest is skipped).
var keyModes = []struct {
	name string
	opts []admit.Option
}{
	{"full", nil},
	{"hashed", []admit.Option{admit.WithHashedKeys()}},
}

// TestKeysMidRace runs the keys-mid-race workload on every keyed variant,
// with one shard, with full and hashed keys, and checks every exact oracle
// per key: the hot keys' admissions must stay within their budgets while
// the store grows under them.
func TestKeysMidRace(t *testing.T) {
	for _, v := range variants {
		for _, km := range keyModes {
			for _, rc := range churnRules {
				t.Run(fmt.Sprintf("variant=%s/keys=%s/rule=%s", v.name, km.name, rc.name), func(t *testing.T) {
					w := keysMidRaceWorkload(rc.rule, churnFresh())
					runAndVerify(t, w, exactOptions(), func(clk *stressClock) subject {
						return newKeyedSubject(t, v, rc.rule, clk, append([]admit.Option{admit.WithShards(1)}, km.opts...)...)
					})
				})
			}
		}
	}
}

// TestResizeMidRace runs the resize workload on every keyed variant with a
// Sweep, with one shard, with full and hashed keys, with no key bound and
// with a WithMaxKeys bound far below the keys each phase creates (a flood:
// most new keys are denied while the store is full, and each new key first
// makes room by evicting idle ones), and checks every exact oracle per key
// (the model has no eviction and no resizing).
func TestResizeMidRace(t *testing.T) {
	for _, v := range variants {
		for _, km := range keyModes {
			for _, bound := range []int{0, 64} {
				for _, rc := range churnRules {
					t.Run(fmt.Sprintf("variant=%s/keys=%s/maxkeys=%d/rule=%s", v.name, km.name, bound, rc.name), func(t *testing.T) {
						opts := append([]admit.Option{admit.WithShards(1)}, km.opts...)
						if bound > 0 {
							opts = append(opts, admit.WithMaxKeys(bound))
						}
						var s subject
						w := resizeWorkload(rc.rule, &s, churnFresh())
						runAndVerify(t, w, exactOptions(), func(clk *stressClock) subject {
							s = newKeyedSubject(t, v, rc.rule, clk, opts...)
							if s.sweep == nil {
								t.Skipf("%s's keyed limiter has no Sweep", v.name)
							}
							return s
						})
					})
				}
			}
		}
	}
}
