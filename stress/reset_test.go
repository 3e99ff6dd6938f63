package stress

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
)

// The reset workload: one hot key hammered by every goroutine on a frozen
// clock, so that each of its budgets is spent exactly and never refills; a
// resetter that, each time the key's budget is spent, resets it; and
// inserters that create new keys in the same shard (WithShards(1)), so that
// the store grows (atomic's table is rebuilt, freezing and moving the hot
// key) while resets race the hammer. Each reset gives exactly one fresh
// budget, so after R resets exactly (R+1)·Limit admissions pass: more is a
// reset counted twice or an admission lost to one, fewer a reset lost.
// Nothing waits on real time: progress is the hammer's attempts.

// resetRun is one run of the reset workload on lim: it reports the hot
// key's admissions and the resets made, or an error naming what the oracle
// saw.
func resetRun(lim admit.KeyedLimiter, limit, resets, fresh, hammers int) error {
	r, ok := lim.(interface{ Reset(string) })
	if !ok {
		return errSkip
	}
	// attempts[h] counts hammer h's finished calls, each counted after
	// its admission was.
	var admitted atomic.Int64
	attempts := make([]atomic.Int64, hammers)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for h := range hammers {
		wg.Go(func() {
			for !stop.Load() {
				if lim.Allow("hot").Allowed {
					admitted.Add(1)
				}
				attempts[h].Add(1)
			}
		})
	}
	for g := range 2 {
		wg.Go(func() {
			for i := range fresh {
				lim.Allow(fmt.Sprintf("new-%d-%05d", g, i))
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// tried reports whether every hammer has finished at least n calls
	// since from was read.
	read := func() []int64 {
		from := make([]int64, hammers)
		for h := range attempts {
			from[h] = attempts[h].Load()
		}
		return from
	}
	tried := func(from []int64, n int64) bool {
		for h := range attempts {
			if attempts[h].Load()-from[h] < n {
				return false
			}
		}
		return true
	}
	// wait returns once the hot key has admitted want, or an error once
	// every hammer has tried patience times more without getting there: on
	// a frozen clock a budget that is there is spent within a few attempts,
	// so one that does not come is a lost reset. Patience is counted per
	// hammer, not in all the hammers' attempts together: a hammer
	// descheduled between an admission and its count holds that admission
	// back until it runs again, while the others may try many times (the
	// all-hammers count called such a pause a lost reset, about once in 30
	// runs under -race). A hammer that has finished two calls since from
	// has counted any admission it was making then. Progress is counted in
	// attempts, not in time, so a slow machine only waits longer.
	const patience = 5_000
	wait := func(want int64) error {
		from := read()
		for admitted.Load() < want {
			if tried(from, patience) && admitted.Load() < want {
				return fmt.Errorf("a reset was lost: %d admissions, want %d after %d resets", admitted.Load(), want, want/int64(limit)-1)
			}
			runtime.Gosched()
		}
		return nil
	}
	for i := range resets {
		if err := wait(int64((i + 1) * limit)); err != nil {
			return err
		}
		r.Reset("hot")
	}
	if err := wait(int64((resets + 1) * limit)); err != nil {
		return err
	}
	// The budget is spent: let the hammer try again, then count.
	for from := read(); !tried(from, 2); {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if got, want := admitted.Load(), int64((resets+1)*limit); got != want {
		return fmt.Errorf("%d admissions after %d resets of a budget of %d: want exactly %d", got, resets, limit, want)
	}
	return nil
}

// errSkip says that a variant has no Reset.
var errSkip = fmt.Errorf("no Reset")

func resetRules() []ruleCase {
	return []ruleCase{
		{"tb", admit.Rule{Algorithm: admit.TokenBucket, Limit: 50, Window: time.Hour}},
		{"tb-frac", admit.Rule{Algorithm: admit.TokenBucket, Limit: 30, Window: 7 * time.Hour}},
		{"fw", admit.Rule{Algorithm: admit.FixedWindow, Limit: 50, Window: time.Hour}},
		{"sl", admit.Rule{Algorithm: admit.SlidingLog, Limit: 50, Window: time.Hour}},
		{"sc", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 50, Window: time.Hour}},
	}
}

// TestResetMidRace runs the reset workload on every keyed variant that
// offers Reset, full and hashed keys, with the harness's yield points open.
func TestResetMidRace(t *testing.T) {
	resets := budget{full: 12, short: 4}.get()
	fresh := budget{full: 3000, short: 1000}.get()
	for _, v := range variants {
		for _, rc := range resetRules() {
			for _, hashed := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/hashed=%v", v.name, rc.name, hashed)
				t.Run(name, func(t *testing.T) {
					_, done := widen(uint64(len(name)), 20)
					defer done()
					opts := []admit.Option{admit.WithShards(1), admit.WithClock(clock.NewFake())}
					if hashed {
						opts = append(opts, admit.WithHashedKeys())
					}
					if v.keyed == nil {
						t.Skip("no keyed limiter")
					}
					lim, err := v.keyed(rc.rule, opts...)
					if err != nil {
						t.Skipf("%s.New: %v", v.name, err)
					}
					if err := resetRun(lim, rc.rule.Limit, resets, fresh, goroutines()/2); err == errSkip {
						t.Skip("no Reset")
					} else if err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestSelfTestLostReset plants a Reset that does its CAS without the
// shard's mutex and gives up on a tombstone (table.PlantLockFreeReset), and
// requires the reset workload to catch it: a rebuild freezes the hot key's
// slot under the reset, which is lost.
func TestSelfTestLostReset(t *testing.T) {
	if !hook.Enabled {
		t.Skip("the planted bug exists only in builds with -tags admitstress")
	}
	plantLockFreeReset(true)
	t.Cleanup(func() { plantLockFreeReset(false) })
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 20, Window: time.Hour}
	const trials = 20
	for trial := 1; trial <= trials; trial++ {
		_, done := widen(uint64(trial), 200)
		lim, err := admitatomic.New(rule, admit.WithShards(1), admit.WithClock(clock.NewFake()))
		if err != nil {
			done()
			t.Fatal(err)
		}
		err = resetRun(lim, rule.Limit, 40, 20000, 4)
		done()
		if err != nil {
			t.Logf("caught in trial %d: %v", trial, err)
			return
		}
	}
	t.Errorf("the reset workload did not catch a lost reset in %d trials", trials)
}
