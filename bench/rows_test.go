package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// TestRows checks every row of the tables before any benchmark trusts it:
// each builds in each mode it claims, admits every call in Admit mode and
// denies every call in Deny mode. A row that denied in Admit mode would
// benchmark the wrong path.
func TestRows(t *testing.T) {
	const calls = 100
	for _, row := range Singles() {
		for _, mode := range []Mode{Admit, Deny} {
			if mode == Deny && row.AdmitOnly {
				continue
			}
			l, stop, err := row.New(Env{Mode: mode, Keys: 1})
			if err != nil {
				t.Errorf("single %s/%s mode %d: %v", row.Impl, row.Algo, mode, err)
				continue
			}
			for i := range calls {
				if got := l.Allow().Allowed; got != (mode == Admit) {
					t.Errorf("single %s/%s mode %d: call %d Allowed = %v", row.Impl, row.Algo, mode, i, got)
					break
				}
			}
			stop()
		}
	}
	keys := Keys(calls)
	for _, row := range Keyeds() {
		for _, use := range []Use{Steady, Churn, Memory} {
			if !row.Runs(use) {
				continue
			}
			for _, evict := range []bool{false, true} {
				if evict && (!row.Evicts || use != Steady) {
					continue
				}
				name := fmt.Sprintf("keyed %s/%s use %d evict=%v", row.Impl, row.Algo, use, evict)
				l, stop, err := row.New(Env{Mode: Admit, Keys: len(keys), Evict: evict, Use: use})
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				for _, k := range keys {
					if use != Churn {
						row.PrimeKey(l, k)
					}
					for range 3 {
						if !l.Allow(k).Allowed {
							t.Errorf("%s: Allow(%q) denied in Admit mode", name, k)
						}
					}
					if kn, ok := l.(KeyedN); ok && !kn.AllowN(k, 8).Allowed {
						t.Errorf("%s: AllowN(%q, 8) denied in Admit mode", name, k)
					}
				}
				stop()
			}
		}
	}
}

// steadySpan is how long TestSteadyKeysStay lets the clock run: far longer
// than any of admit's limiters lives in BenchmarkKeyed, AllowN or Eviction
// (its setup and both distributions take seconds), and within the 225 s a
// primed token bucket stays in debt.
const steadySpan = 3 * time.Minute

// TestSteadyKeysStay checks the claim of the Steady rules (see Use): no
// primed key of admit's rows becomes idle, and so evictable, while a keyed
// workload runs, so the workloads measure existing keys, never their
// eviction and re-creation. The sliding log's rows are the exception the
// rules document: their keys fall idle between requests.
func TestSteadyKeysStay(t *testing.T) {
	keys := Keys(1000)
	for _, row := range Keyeds() {
		if row.Family != FamilyAdmit || !row.Runs(Steady) || row.Algo == admit.SlidingLog.String() {
			continue
		}
		fake := clock.NewFake()
		l, stop, err := row.New(Env{Mode: Admit, Keys: len(keys), Use: Steady, Clock: fake})
		if err != nil {
			t.Errorf("%s/%s: %v", row.Impl, row.Algo, err)
			continue
		}
		for _, k := range keys {
			row.PrimeKey(l, k)
		}
		fake.Advance(steadySpan)
		store, ok := l.(admit.Store)
		if !ok {
			t.Errorf("%s/%s: %T is not an admit.Store", row.Impl, row.Algo, l)
			stop()
			continue
		}
		if n := store.Sweep(); n != 0 || store.Len() != len(keys) {
			t.Errorf("%s/%s: %v after priming %d keys, Sweep evicted %d and Len = %d; want 0 evicted, %d stored",
				row.Impl, row.Algo, steadySpan, len(keys), n, store.Len(), len(keys))
		}
		for _, k := range keys {
			if !l.Allow(k).Allowed {
				t.Errorf("%s/%s: Allow(%q) denied %v after priming", row.Impl, row.Algo, k, steadySpan)
				break
			}
		}
		stop()
	}
}

// TestWorkloads checks the key sets and sequences the workloads share.
func TestWorkloads(t *testing.T) {
	keys := Keys(70_000)
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("Keys(70000) repeats %q", k)
		}
		seen[k] = true
	}
	for _, dist := range []Distribution{Uniform, Zipf} {
		seq := Sequence(1000, dist)
		counts := make([]int, 1000)
		for _, i := range seq {
			if i < 0 || i >= 1000 {
				t.Fatalf("Sequence(1000, %s) has index %d", dist, i)
			}
			counts[i]++
		}
		if dist == Zipf && counts[0] < 10*counts[500] {
			t.Errorf("Sequence(1000, zipf): key 0 drawn %d times, key 500 %d: not skewed", counts[0], counts[500])
		}
		if dist == Uniform && (counts[0] < SeqLen/1000/2 || counts[0] > SeqLen/1000*2) {
			t.Errorf("Sequence(1000, uniform): key 0 drawn %d times, want about %d", counts[0], SeqLen/1000)
		}
	}
}
