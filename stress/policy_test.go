package stress

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/policy"
)

// The policy workload: a policy.Service built on each keyed variant (through
// policy.WithFactory) serves (user, API) pairs while a reloader swaps between
// two rule books as fast as it can (docs/reliability.md C8, E4).
//
// The books differ, but most pairs have the same rule in both: such a pair
// must keep one budget across every reload (a reload never hands out a fresh
// bucket). The pairs on /toggle change rule with every reload (fixed-window
// 5 in book A, the default token-bucket 12 in book B); both rules stay in use
// in both books (user.keep holds the first), so the pair keeps one budget
// per rule and resumes each when its rule comes back. Every rule has its own
// Limit, so a Decision's Limit names the budget that decided it: the oracle
// object is (pair, rule), and every exact oracle applies to it.

// policyBooks returns the two books, with the sliding log replaced by a
// token bucket of the same Limit if factory cannot build a sliding log (nil
// is the Service's default choice of variants, which can).
func policyBooks(t *testing.T, factory func(admit.Rule, ...admit.Option) (admit.Store, error)) (a, b string) {
	sl := "sliding-log"
	if factory != nil {
		_, err := factory(admit.Rule{Algorithm: admit.SlidingLog, Limit: 7, Window: time.Second})
		if errors.Is(err, admit.ErrUnsupported) {
			sl = "token-bucket"
		} else if err != nil {
			t.Fatal(err)
		}
	}
	common := "default = token-bucket,12,1s\n" +
		"api./fw = fixed-window,9,1s\n" +
		"api./sl = " + sl + ",7,1s\n" +
		"user.vip = sliding-counter,11,1s\n" +
		"user.keep = fixed-window,5,1s\n"
	a = common + "api./toggle = fixed-window,5,1s\n"
	b = common + "api./extra = token-bucket,13,1s\n"
	return a, b
}

var (
	policyUsers = []string{"u0", "u1", "u2", "u3", "u4", "vip"}
	policyAPIs  = []string{"/fw", "/sl", "/toggle", "/x"}
)

// TestPolicyReload runs the policy workload on a Service built by each keyed
// variant (WithFactory) and on the Service's own default choice. Its model
// keeps one budget per (pair, rule), fresh when a pair's rule changes, so
// the reloads pass policy.CarryNothing; carrying budgets across a change is
// checked exactly by policy's TestReloadCarryRace.
func TestPolicyReload(t *testing.T) {
	for _, fc := range serviceFactories() {
		t.Run("variant="+fc.name, func(t *testing.T) {
			textA, textB := policyBooks(t, fc.f)
			bookA, err := policy.Parse(strings.NewReader(textA))
			if err != nil {
				t.Fatal(err)
			}
			bookB, err := policy.Parse(strings.NewReader(textB))
			if err != nil {
				t.Fatal(err)
			}
			specs := map[int]spec{}
			for _, bk := range []*policy.Book{bookA, bookB} {
				for _, e := range bk.Rules() {
					specs[e.Rule.Limit] = newSpec(e.Rule)
				}
			}
			var svc *policy.Service
			g := goroutines()
			w := &workload{
				name:       "policy-reload",
				goroutines: g,
				phases:     budget{full: 12, short: 8}.get(),
				plan: func(r *rand.Rand, _ int) [][]req {
					var mains, tails []req
					for _, u := range policyUsers {
						for _, api := range policyAPIs {
							// 12 + 5 covers both budgets of a /toggle pair.
							m, e := demand(r, u+"|"+api, 17, 2)
							mains, tails = append(mains, m...), append(tails, e...)
						}
					}
					return deal(r, g, mains, tails, nil)
				},
				step:          steps(admit.Rule{Algorithm: admit.TokenBucket, Limit: 12, Window: time.Second}),
				yieldPermille: hookYield,
				clockYield:    clockYield,
			}
			w.background = append(w.background, func(stop <-chan struct{}, _ *rand.Rand) {
				for i := range 400 {
					select {
					case <-stop:
						return
					default:
					}
					book := bookA
					if i%2 == 0 {
						book = bookB
					}
					if err := svc.Reload(book, policy.WithCarry(policy.CarryNothing)); err != nil {
						panic(err) // both books built once already: cannot fail
					}
					w.reloads.Add(1)
					runtime.Gosched()
				}
			})
			runAndVerify(t, w, exactOptions(), func(clk *stressClock) subject {
				opts := []admit.Option{admit.WithClock(clk)}
				if fc.f != nil {
					opts = append(opts, policy.WithFactory(fc.f))
				}
				svc, err = policy.NewService(bookA, opts...)
				if err != nil {
					t.Fatalf("policy.NewService on %s: %v", fc.name, err)
				}
				if err := svc.Reload(bookB, policy.WithCarry(policy.CarryNothing)); err != nil { // every limiter of B built once
					t.Fatal(err)
				}
				if err := svc.Reload(bookA, policy.WithCarry(policy.CarryNothing)); err != nil {
					t.Fatal(err)
				}
				return subject{
					name: "policy.Service on " + fc.name,
					allow: func(key string, n int) admit.Decision {
						user, api, _ := strings.Cut(key, "|")
						return svc.CheckN(user, api, n)
					},
					classify: func(key string, d admit.Decision) (string, spec, bool) {
						pair, _, _ := strings.Cut(key, "#")
						sp, ok := specs[d.Limit]
						return pair + "#" + strconv.Itoa(d.Limit), sp, ok
					},
				}
			})
		})
	}
}

// serviceFactory is a Service's limiter factory, named for a subtest.
type serviceFactory struct {
	name string
	f    func(admit.Rule, ...admit.Option) (admit.Store, error) // nil: the Service's default
}

// serviceFactories returns the factory of each keyed variant (WithFactory)
// and the Service's own default choice, for the cells that run a Service
// on every variant.
func serviceFactories() []serviceFactory {
	out := []serviceFactory{{name: "default"}}
	for _, v := range variants {
		if v.keyed != nil {
			out = append(out, serviceFactory{v.name, v.keyed})
		}
	}
	return out
}
