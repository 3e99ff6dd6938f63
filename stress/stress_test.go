package stress

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Widening, per mille: how often a hook site yields, how often a clock
// reading yields before it is returned, and how often a stale-mode reading
// is returned stale.
const (
	hookYield  = 250
	clockYield = 150
	clockStale = 200
)

// goroutines is how many goroutines a burst has: well above GOMAXPROCS,
// so that -cpu 1,2,4,8 sweeps from oversubscribed to parallel.
func goroutines() int {
	p := runtime.GOMAXPROCS(0)
	if testing.Short() {
		return min(max(8*p, 16), 32)
	}
	return min(max(8*p, 16), 64)
}

// porcupineTimeout bounds each linearizability check.
func porcupineTimeout() time.Duration {
	if testing.Short() {
		return 20 * time.Second
	}
	return 60 * time.Second
}

func exactOptions() verifyOptions {
	return verifyOptions{porcupineTimeout: porcupineTimeout(), requireSaturation: true}
}

// steps returns a step function drawing the clock's moves between phases
// from interesting values for rule: none (two bursts at one reading), a
// nanosecond, a fraction of a token or of a window, a window, and the
// horizon after which every key is fresh, exactly at and 1ns short of the
// stores' eviction point (horizon + slack).
func steps(rule admit.Rule) func(*rand.Rand, int) time.Duration {
	token := max(rule.Window/time.Duration(rule.Limit), 1)
	h := horizon(rule)
	choices := []time.Duration{0, 1, token / 2, token, 3 * token, rule.Window / 7, rule.Window / 3, rule.Window - 1, rule.Window, h, h + evictionSlack - 1, h + evictionSlack}
	return func(r *rand.Rand, _ int) time.Duration { return choices[r.IntN(len(choices))] }
}

// hotKeyWorkload: every goroutine on one key, demand about twice the budget
// in every phase, mixed weights, a frozen clock per phase.
func hotKeyWorkload(rule admit.Rule) *workload {
	g := goroutines()
	return &workload{
		name:       "hot-key",
		goroutines: g,
		phases:     budget{full: 40, short: 10}.get(),
		plan: func(r *rand.Rand, _ int) [][]req {
			main, end := demand(r, "hot", rule.Limit, max(1, g/4))
			return deal(r, g, main, end, nil)
		},
		step:          steps(rule),
		yieldPermille: hookYield,
		clockYield:    clockYield,
	}
}

// TestHotKey hammers one key of every variant, algorithm and shape (a
// single-key limiter, and one key of a keyed limiter) from many goroutines
// released together, in phases of a frozen clock, and checks every exact
// oracle: under a frozen clock the admitted weight equals the budget exactly
// (docs/reliability.md C1, C2, C4, C7).
func TestHotKey(t *testing.T) {
	for _, v := range variants {
		for _, shape := range []string{"single", "keyed"} {
			for _, rc := range hotRules {
				t.Run(fmt.Sprintf("variant=%s/shape=%s/rule=%s", v.name, shape, rc.name), func(t *testing.T) {
					runAndVerify(t, hotKeyWorkload(rc.rule), exactOptions(), func(clk *stressClock) subject {
						if shape == "single" {
							return newSingleSubject(t, v, rc.rule, clk)
						}
						return newKeyedSubject(t, v, rc.rule, clk)
					})
				})
			}
		}
	}
}

// manyKeysWorkload: many keys in one shard (all keys collide on one lock,
// one stripe, one ring), plus a batch of new keys in every phase that every
// goroutine requests in the same order at the start of the burst, so that
// they race to create each key.
func manyKeysWorkload(rule admit.Rule, keys, fresh int) *workload {
	g := goroutines()
	return &workload{
		name:       "many-keys",
		goroutines: g,
		phases:     budget{full: 10, short: 6}.get(),
		plan: func(r *rand.Rand, p int) [][]req {
			var mains, tails, first []req
			for i := range keys {
				m, e := demand(r, fmt.Sprintf("k%03d", i), rule.Limit, 2)
				mains, tails = append(mains, m...), append(tails, e...)
			}
			for i := range fresh {
				first = append(first, req{fmt.Sprintf("p%02d-new%02d", p, i), 1})
			}
			return deal(r, g, mains, tails, first)
		},
		step:          steps(rule),
		yieldPermille: hookYield,
		clockYield:    clockYield,
	}
}

// TestManyKeys hammers many keys of every keyed variant with one shard
// (WithShards(1): every key collides) and with a few, including keys
// created during the race, and checks every exact oracle per key.
func TestManyKeys(t *testing.T) {
	keys := budget{full: 48, short: 24}.get()
	for _, v := range variants {
		for _, shards := range []int{1, 4} {
			for _, rc := range manyRules {
				t.Run(fmt.Sprintf("variant=%s/shards=%d/rule=%s", v.name, shards, rc.name), func(t *testing.T) {
					n := keys
					if rc.rule.Limit > 1000 {
						n = 4 // the wide counter: few keys, each with a large budget
					}
					runAndVerify(t, manyKeysWorkload(rc.rule, n, 8), exactOptions(), func(clk *stressClock) subject {
						return newKeyedSubject(t, v, rc.rule, clk, admit.WithShards(shards))
					})
				})
			}
		}
	}
}

// evictionWorkload: more keys than the store may hold, in one shard, each
// phase using a random subset of them, with the clock moved to (and 1ns
// short of) the moment the idle ones become evictable, while a sweeper
// evicts as fast as it can. Eviction must change no decision: the exact
// oracles and porcupine have no eviction in their model.
func evictionWorkload(rule admit.Rule, s *subject, keys int) *workload {
	g := goroutines()
	w := &workload{
		name:       "eviction",
		goroutines: g,
		phases:     budget{full: 12, short: 8}.get(),
		plan: func(r *rand.Rand, p int) [][]req {
			var mains, tails []req
			active := keys/3 + r.IntN(keys-keys/3+1)
			for _, i := range r.Perm(keys)[:active] {
				m, e := demand(r, fmt.Sprintf("k%03d", i), rule.Limit, 2)
				mains, tails = append(mains, m...), append(tails, e...)
			}
			return deal(r, g, mains, tails, nil)
		},
		step:          evictionSteps(rule),
		yieldPermille: hookYield,
		clockYield:    clockYield,
	}
	w.background = append(w.background, sweeper(w, s, 2000))
	return w
}

// evictionSteps draws the clock's moves of the eviction workload: mostly to
// the eviction point of keys idle since the last phase (horizon + slack),
// 1ns short of it, or further.
func evictionSteps(rule admit.Rule) func(*rand.Rand, int) time.Duration {
	h := horizon(rule)
	choices := []time.Duration{0, rule.Window / 4, h + evictionSlack - 1, h + evictionSlack, h + evictionSlack, 3 * h}
	return func(r *rand.Rand, _ int) time.Duration { return choices[r.IntN(len(choices))] }
}

// TestEviction runs the eviction workload on every keyed variant, with and
// without a WithMaxKeys bound below the number of keys (docs/reliability.md C13,
// E2, E3, E7).
func TestEviction(t *testing.T) {
	keys := budget{full: 96, short: 72}.get()
	for _, v := range variants {
		for _, bound := range []int{0, 64} {
			for _, rc := range manyRules {
				t.Run(fmt.Sprintf("variant=%s/maxkeys=%d/rule=%s", v.name, bound, rc.name), func(t *testing.T) {
					n := keys
					if rc.rule.Limit > 1000 {
						t.Skip("the wide counter's budget is too large for many keys")
					}
					var s subject
					opts := []admit.Option{admit.WithShards(1)}
					if bound > 0 {
						opts = append(opts, admit.WithMaxKeys(bound))
					}
					w := evictionWorkload(rc.rule, &s, n)
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

// staleWorkload: the clock moves by a quarter window between phases
// ("phased") or in small ticks during the bursts ("ticking"), and readings
// go stale on purpose: a clock reading may be returned after a yield, or be
// swapped for the reading before the clock's latest move. Stale readings
// make the decisions legitimately differ from a fresh reading's, so only the
// interval bounds (which allow for each reading's uncertainty) and the
// Decision checks apply.
func staleWorkload(rule admit.Rule, ticking bool, keys int) *workload {
	g := goroutines()
	w := &workload{
		name:       "stale-clock",
		goroutines: g,
		phases:     budget{full: 24, short: 16}.get(),
		plan: func(r *rand.Rand, _ int) [][]req {
			var mains, tails []req
			for i := range keys {
				m, e := demand(r, fmt.Sprintf("k%03d", i), rule.Limit, max(1, g/(4*keys)))
				mains, tails = append(mains, m...), append(tails, e...)
			}
			return deal(r, g, mains, tails, nil)
		},
		step:          func(*rand.Rand, int) time.Duration { return rule.Window / 4 },
		yieldPermille: hookYield,
		clockYield:    clockYield,
		clockStale:    clockStale,
	}
	if ticking {
		w.name = "ticking-clock"
		w.step = func(*rand.Rand, int) time.Duration { return 0 }
		w.tick = max(rule.Window/time.Duration(4*rule.Limit), 1)
		w.maxTicks = 4 * rule.Limit
	}
	return w
}

// TestStaleClock runs every variant, algorithm and shape under stale and
// moving clock readings (docs/reliability.md K1, K2) and checks the interval
// bounds.
func TestStaleClock(t *testing.T) {
	for _, v := range variants {
		for _, shape := range []string{"single", "keyed"} {
			for _, mode := range []string{"phased", "ticking"} {
				for _, rc := range hotRules {
					t.Run(fmt.Sprintf("variant=%s/shape=%s/clock=%s/rule=%s", v.name, shape, mode, rc.name), func(t *testing.T) {
						keys := 1
						if shape == "keyed" && rc.rule.Limit <= 1000 {
							keys = 4
						}
						w := staleWorkload(rc.rule, mode == "ticking", keys)
						runAndVerify(t, w, verifyOptions{}, func(clk *stressClock) subject {
							if shape == "single" {
								return newSingleSubject(t, v, rc.rule, clk)
							}
							return newKeyedSubject(t, v, rc.rule, clk, admit.WithShards(1))
						})
					})
				}
			}
		}
	}
}
