package stress

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// The flip-flop workload: a policy.Service whose default limit goes from
// 10 per hour to 5 and back, again and again (a rollout and its rollback),
// while checkers Check a few pairs on a frozen clock. No book ever allows a
// pair more than 10 in the hour, and a Reload carries what a pair consumed
// (docs/configuration.md, "Changing limits"), so whatever the
// interleaving, each pair is admitted at most 10: more is a Reload that
// handed budget out (a carry clamped to the new Limit, forgetting what was
// spent above it), or a Check counted under both limits of a move. With
// CarryConsumed the count is exact: once the reloads end, the pairs are
// spent to exactly 10 (fewer is budget lost). With CarryProportional a
// carry rounds up, so only the bound holds. Nothing waits on real time:
// the reloader waits for the checkers' attempts.

// flipRun is one run of the flip-flop workload on svc, whose book is hi:
// it alternates lo and hi reloads times (ending on hi) with the strategy
// carry while checkers Check the pairs, then spends every pair, and
// returns an error naming each pair admitted more than 10 (or, with
// CarryConsumed, fewer).
func flipRun(svc *policy.Service, hi, lo *policy.Book, carry policy.Carry, pairs, checkers, reloads int) error {
	admitted := make([]atomic.Int64, pairs)
	var attempts atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range checkers {
		wg.Go(func() {
			for i := g; !stop.Load(); i++ {
				p := i % pairs
				n := 1 + i%3/2 // 1, 1, 2: weights of one and two
				if svc.CheckN(fmt.Sprintf("u%d", p), "/x", n).Allowed {
					admitted[p].Add(int64(n))
				}
				attempts.Add(1)
				runtime.Gosched() // let the reloader in: it waits on these attempts
			}
		})
	}
	// tried waits until the checkers have finished n more calls, so that
	// between two reloads the pairs are checked (each checker takes them
	// in turn).
	tried := func(n int64) {
		for from := attempts.Load(); attempts.Load()-from < n; {
			runtime.Gosched()
		}
	}
	var reloadErr error
	for i := range reloads {
		book := lo
		if i%2 == 1 {
			book = hi
		}
		if err := svc.Reload(book, policy.WithCarry(carry)); err != nil {
			reloadErr = err
			break
		}
		tried(int64(4 * pairs))
	}
	if reloadErr == nil && reloads%2 == 1 {
		reloadErr = svc.Reload(hi, policy.WithCarry(carry))
	}
	stop.Store(true)
	wg.Wait() // every checker has counted its admissions
	if reloadErr != nil {
		return reloadErr
	}
	var bad []string
	for p := range pairs {
		user := fmt.Sprintf("u%d", p)
		total := admitted[p].Load()
		for svc.Check(user, "/x").Allowed { // spend what is left under hi
			total++
			if total > 1000 {
				break
			}
		}
		if total > 10 || (carry == policy.CarryConsumed && total != 10) {
			bad = append(bad, fmt.Sprintf("pair (%s, /x): %d admitted on a frozen clock where no book allowed more than 10 (want exactly 10 with CarryConsumed, at most 10 with CarryProportional)", user, total))
		}
	}
	if bad != nil {
		return fmt.Errorf("%d reloads between 10 and 5 per hour, carry %v:\n\t%s", reloads, carry, strings.Join(bad, "\n\t"))
	}
	return nil
}

// flipBooks returns the books of 10 and of 5 per hour of alg.
func flipBooks(t *testing.T, alg string) (hi, lo *policy.Book) {
	parse := func(limit int) *policy.Book {
		b, err := policy.Parse(strings.NewReader(fmt.Sprintf("default = %s,%d,1h\n", alg, limit)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return parse(10), parse(5)
}

// TestFlipFlopReload runs the flip-flop workload on a Service built by each
// keyed variant (WithFactory) and on the Service's own default choice, for
// every algorithm the variant builds and both strategies that carry.
func TestFlipFlopReload(t *testing.T) {
	reloads := budget{full: 40, short: 16}.get()
	for _, fc := range serviceFactories() {
		for _, alg := range []string{"token-bucket", "fixed-window", "sliding-log", "sliding-counter"} {
			for _, carry := range []policy.Carry{policy.CarryConsumed, policy.CarryProportional} {
				t.Run(fmt.Sprintf("variant=%s/alg=%s/carry=%v", fc.name, alg, carry), func(t *testing.T) {
					hi, lo := flipBooks(t, alg)
					opts := []admit.Option{admit.WithClock(clock.NewFake())}
					if fc.f != nil {
						opts = append(opts, policy.WithFactory(fc.f))
					}
					svc, err := policy.NewService(hi, opts...)
					if err != nil {
						if strings.Contains(err.Error(), "unsupported") {
							t.Skip(err) // this variant builds no such limiter
						}
						t.Fatal(err)
					}
					if err := flipRun(svc, hi, lo, carry, 4, goroutines(), reloads); err != nil {
						t.Error(err)
					}
				})
			}
		}
	}
}

// TestSelfTestFlipFlopClamp plants the old rule in kernel.Convert (carry at
// most the new Limit: kernel.PlantClampedCarry, admitstress builds only)
// and requires the flip-flop workload to catch the budget each raise hands
// back.
func TestSelfTestFlipFlopClamp(t *testing.T) {
	if !hook.Enabled {
		t.Skip("the planted bug exists only in builds with -tags admitstress")
	}
	plantClampedCarry(true)
	t.Cleanup(func() { plantClampedCarry(false) })
	hi, lo := flipBooks(t, "fixed-window")
	const trials = 5
	for trial := 1; trial <= trials; trial++ {
		svc, err := policy.NewService(hi, admit.WithClock(clock.NewFake()), policy.WithFactory(sharded.New))
		if err != nil {
			t.Fatal(err)
		}
		if err := flipRun(svc, hi, lo, policy.CarryConsumed, 4, goroutines(), 16); err != nil {
			t.Logf("caught in trial %d: %v", trial, err)
			return
		}
	}
	t.Errorf("the flip-flop workload did not catch a carry clamped to the new Limit in %d trials", trials)
}
