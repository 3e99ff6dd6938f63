package stress

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/policy"
)

// The retirement cell (TestLostUpdateRetire) hunts the Load+Store mutant of
// the compare-and-swaps that retire a state rather than publish a
// decision: an eviction that turns a fresh state into a tombstone, a Take
// that freezes a key's state to move it to another limiter (a Reload), and
// a table rebuild that freezes each slot to copy it. Each such CAS goes
// from the exact word it judged (fresh, or the state it copies) to the
// tombstone; a Store in its place erases an admission published in
// between, and the key then starts afresh (eviction) or goes on from a
// state without it (Take, rebuild). TestLostUpdate cannot catch them: on
// its frozen clock no state is ever fresh, and it neither moves keys nor
// grows a table.
//
// The oracle is TestLostUpdate's, exact conservation on a frozen clock: at
// one reading, what a key is admitted in a round, plus what one goroutine
// is admitted after it until its first denial, must be the budget a fresh
// key has, whether or not the key was evicted, moved or copied meanwhile
// (an evicted key comes back fresh, which is the state it was evicted in;
// a moved or copied state carries every admission published before the
// freeze). A lost admission shows as one request more.
//
// Each race is between two goroutines released together from a spin
// barrier, one retiring and one admitting; rounds are counted, never timed.

// rtRule is a rule of the cell with the request size its calls use: a
// budget of rtBudget requests of n (or, for the moves, of luRound).
type rtRule struct {
	name  string
	rule  admit.Rule
	n     int
	cells string // the cells it reaches, for failure messages
}

// rtBudget is how many requests a fresh key of the eviction rules admits
// at a frozen reading.
const rtBudget = 4

// rtEvictRules reach each state word of atomic's table.
var rtEvictRules = []rtRule{
	{"tb", admit.Rule{Algorithm: admit.TokenBucket, Limit: rtBudget, Window: time.Second}, 1, "packed token bucket"},
	{"fw", admit.Rule{Algorithm: admit.FixedWindow, Limit: rtBudget, Window: time.Second}, 1, "packed fixed window"},
	{"sc", admit.Rule{Algorithm: admit.SlidingCounter, Limit: rtBudget, Window: time.Second}, 1, "packed sliding counter"},
}

// TestLostUpdateRetire runs the three retirements' rounds on atomic's
// table, where a slot is retired by a CAS to the tombstone: eviction by
// Sweep, a Reload's Take, and the table's rebuild (freeze). (sharded's map
// store retires a key under its shard's mutex, which every call on the key
// holds too.)
func TestLostUpdateRetire(t *testing.T) {
	procs := max(runtime.GOMAXPROCS(0), 2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	for _, rc := range rtEvictRules {
		t.Run(fmt.Sprintf("evict/variant=atomic/rule=%s", rc.name), func(t *testing.T) {
			rtEvictRun(t, variantNamed("atomic"), rc)
		})
	}
	t.Run("freeze/variant=atomic", rtFreezeRun)
	// The table's Take is one CAS for every algorithm.
	t.Run("take/variant=atomic/alg=fixed-window", func(t *testing.T) {
		rtTakeRun(t, serviceFactory{"atomic", admitatomic.New}, "fixed-window")
	})
}

// rtEvictRounds is how many rounds each eviction subject runs, and
// rtEvictKeys how many keys each round races on.
var rtEvictRounds = budget{full: 1024, short: 384}

const rtEvictKeys = 16

// rtEvictStoreRounds is how many rounds use one store before the next is
// built: a new store has new seeds, a new order of its keys (the table's
// slots) and new addresses, so that one unlucky layout cannot hide the
// race for a whole run.
const rtEvictStoreRounds = 32

// rtEvictRun runs the eviction rounds of rc on v's keyed store. In each
// round, on one store of one shard, rtEvictKeys new keys are
// admitted once at a reading, and the clock is moved past two windows and
// the eviction's slack, so that every key's state is fresh (full) but not
// the zero word. Then one goroutine Sweeps while the other calls AllowN
// once on each key, in the reverse of the order the keys were stored (a
// sweep's order), so that the two meet at some key whatever their speeds;
// they are released from a spin barrier, one of them after a delay that
// changes from round to round. A key's admission in the round plus a drain
// must be its budget: an admission the sweep's tombstone overwrote is
// forgotten, and the key is admitted a budget more.
func rtEvictRun(t *testing.T, v variant, rc rtRule) {
	c := clock.NewFake()
	c.Set(time.Hour)
	var l admit.KeyedLimiter
	var store admit.Store
	build := func() {
		var err error
		l, err = v.keyed(rc.rule, admit.WithClock(c), admit.WithShards(1))
		if errors.Is(err, admit.ErrUnsupported) {
			t.Skipf("%s(%v): %v", v.name, rc.rule, err) // atomic's table holds no wide sliding counter
		}
		if err != nil {
			t.Fatalf("%s(%v): %v", v.name, rc.rule, err)
		}
		var ok bool
		if store, ok = l.(admit.Store); !ok {
			t.Fatalf("%s(%v) is not an admit.Store", v.name, rc.rule)
		}
	}
	past := 2*rc.rule.Window + keyed.Slack + time.Millisecond
	var got [rtEvictKeys]atomic.Int64
	keys := make([]string, rtEvictKeys)
	for round := range rtEvictRounds.get() {
		if round%rtEvictStoreRounds == 0 {
			build()
		}
		c.Advance(past)
		store.Sweep() // the keys of the last round, fresh now
		for i := range keys {
			keys[i] = fmt.Sprintf("r%d-%d", round, i)
			if !l.AllowN(keys[i], rc.n).Allowed {
				t.Fatalf("%s %s: a new key was denied", v.name, rc.name)
			}
			got[i].Store(0)
		}
		c.Advance(past)
		rtRace(round, func() { store.Sweep() }, func() {
			for i := len(keys) - 1; i >= 0; i-- {
				if l.AllowN(keys[i], rc.n).Allowed {
					got[i].Add(1)
				}
			}
		})
		for i, k := range keys {
			left := luDrain(func() bool { return l.AllowN(k, rc.n).Allowed }, 4*rtBudget)
			if n := int(got[i].Load()) + left; n != rtBudget {
				what := "an admission the eviction overwrote (the tombstone published with a Store)"
				if n < rtBudget {
					what = "budget lost"
				}
				t.Fatalf("%s %s (%s), round %d: key %q, fresh at a frozen reading, was admitted %d requests of %d by AllowN while a Sweep ran and %d after it, where a fresh key admits %d: %s",
					v.name, rc.name, rc.cells, round+1, k, got[i].Load(), rc.n, left, rtBudget, what)
			}
		}
	}
}

// rtJitter is how many delays rtRace cycles through, and rtJitterStep
// the spins of one.
const (
	rtJitter     = 32
	rtJitterStep = 6
)

// rtRace runs a and b in goroutines of their own, released together from
// a spin barrier, one of them (alternately) after a delay of spins that
// grows with round and wraps, and waits for both. A goroutine that has
// checked the barrier luSpin times yields between its further checks: the
// other goroutine may be queued on this one's processor (a preempted
// goroutine goes to a run queue, and an idle processor does not always
// take it at once), and a goroutine that only spins keeps it there until
// the runtime preempts the spinner, 10ms later.
func rtRace(round int, a, b func()) {
	d := (round / 2 % rtJitter) * rtJitterStep
	delays := [2]int{d, 0}
	if round%2 == 1 {
		delays = [2]int{0, d}
	}
	fs := [2]func(){a, b}
	var spin atomic.Bool // read to spin
	luGo(2, luSpin, func(i int) {
		for range delays[i] {
			spin.Load()
		}
		fs[i]()
	})
}

// rtFreezeRounds is how many rounds the rebuild subject runs, and
// rtFreezeKeys how many keys each round inserts.
var rtFreezeRounds = budget{full: 64, short: 24}

const rtFreezeKeys = 128

// rtFreezeRun races admissions on one key of atomic's table with the
// rebuilds that insertions of new keys into the same shard cause: each
// rebuild freezes every slot by a CAS to the tombstone and copies the state
// it held into the new table. Per round, on a new store of one shard at a
// frozen reading, one goroutine calls Allow on one key, whose budget
// outlasts the round, while the other inserts rtFreezeKeys new keys, each
// once the first has made an admission since the last (so that it admits
// while the table is rebuilt: the table grows by a quarter at each
// rebuild, and every rebuild freezes the key). An admission published
// between a freeze's load and a Store of the tombstone is not in the copy:
// the key is admitted once more.
func rtFreezeRun(t *testing.T) {
	const limit = 1 << 20
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: time.Second}
	for round := range rtFreezeRounds.get() {
		l, err := admitatomic.New(rule, admit.WithClock(luClock()), admit.WithShards(1))
		if err != nil {
			t.Fatal(err)
		}
		const key = "hot"
		var got int
		var calls atomic.Int64
		var done, denied atomic.Bool
		rtRace(round,
			func() {
				for !done.Load() {
					if !l.Allow(key).Allowed {
						denied.Store(true)
						return
					}
					got++
					if calls.Add(1)%64 == 0 {
						runtime.Gosched() // the inserts may be queued behind this goroutine
					}
				}
			},
			func() {
				defer done.Store(true)
				for i := range rtFreezeKeys {
					for from := calls.Load(); calls.Load() == from && !denied.Load(); {
						runtime.Gosched() // it may be queued behind this goroutine
					}
					l.Allow(fmt.Sprintf("k%d", i))
				}
			},
		)
		left := rtDrain(func(k int) bool { return l.AllowN(key, k).Allowed }, 1)
		if got+left != limit {
			what := "an admission a rebuild's freeze overwrote (the tombstone published with a Store)"
			if got+left < limit {
				what = "budget lost"
			}
			t.Fatalf("atomic's table, round %d: a key of budget %d at a frozen reading was admitted %d times while %d other keys were inserted into its shard (growing its table), and %d after, where a fresh key admits %d: %s",
				round+1, limit, got, rtFreezeKeys, left, limit, what)
		}
	}
}

// rtTakeRounds is how many Services each move subject runs, and
// rtTakeReloads how many Reloads each makes.
var rtTakeRounds = budget{full: 24, short: 8}

const rtTakeReloads = 16

// rtTakeBooks returns two books whose default limits for alg differ in the
// window only, so that each Reload moves every pair to a limiter built for
// it, with the same Limit (CarryConsumed then carries each admission
// exactly), and the request size of the cell's calls and the budget in
// such requests. The budget outlasts the Reloads (under the race detector
// a Reload takes as long as a thousand admissions or more), and Window/Limit
// is whole nanoseconds, so that a token bucket's carried debt rounds
// nothing.
func rtTakeBooks(t *testing.T, alg string) (a, b *policy.Book, n, want int) {
	limit, n, w1, w2 := 1<<20, 1, "1s", "2s"
	switch alg {
	case "token-bucket":
		limit = 1e6
	case "sliding-counter":
		limit, w1, w2 = 60000, "1m", "2m" // packed: Limit < 2^16, a long enough window
	}
	parse := func(window string) *policy.Book {
		bk, err := policy.Parse(strings.NewReader(fmt.Sprintf("default = %s,%d,%s\n", alg, limit, window)))
		if err != nil {
			t.Fatal(err)
		}
		return bk
	}
	return parse(w1), parse(w2), n, limit / n
}

// rtDrain admits requests of unit·k through call, for k from 2^20 down
// to 1, each size until it is denied, and returns how many units it was
// admitted: at a frozen reading a request is admitted exactly when it fits
// what is left, so this is what one goroutine would be admitted in
// requests of unit, in a few calls.
func rtDrain(call func(n int) bool, unit int) int {
	total := 0
	for k := 1 << 20; k >= 1; k /= 2 {
		for call(unit * k) {
			total += k
		}
	}
	return total
}

// rtTakePairs is how many pairs each Reload moves.
const rtTakePairs = 32

// rtTakeRun races a Reload's Takes with admissions on the keys they take.
// Per round, a Service of fc's limiters at a frozen reading alternates
// between two books rtTakeReloads times (each Reload builds a new limiter
// for the pairs and moves their states there with CarryConsumed, key by
// key, in the order the old limiter's Keys lists them) while one goroutine
// admits the pairs on the limiter that holds them, called directly, in
// that same order: it admits a pair in a tight loop until the limiter
// answers that the pair moved away (its Decide reports it moved),
// then goes on to the next, so that the Take of each pair finds it being
// admitted. Once all have moved it finds the limiter that holds them now
// and starts over. Each pair's admissions plus a drain through the
// Service must be its budget: an admission that a Take's Store of the
// tombstone overwrote is not carried, and the pair is admitted once more.
func rtTakeRun(t *testing.T, fc serviceFactory, alg string) {
	a, b, n, want := rtTakeBooks(t, alg)
	const api = "/x"
	users := make([]string, rtTakePairs)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
	}
	for round := range rtTakeRounds.get() {
		var mu sync.Mutex
		var built []admit.KeyedLimiter // newest last
		factory := func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
			l, err := fc.f(r, opts...)
			if err == nil {
				mu.Lock()
				built = append(built, l)
				mu.Unlock()
			}
			return l, err
		}
		// holder returns the limiter that holds the pairs' states (a
		// probe there shows what the first pair consumed) and its keys in
		// the order of its Keys, which a Reload moves them in, or nil if
		// none does right now (the states are moving). The Service also
		// builds limiters it only inspects, which hold nothing.
		holder := func() (admit.KeyedLimiter, []string) {
			mu.Lock()
			ls := slices.Clone(built)
			mu.Unlock()
			for _, l := range slices.Backward(ls) {
				if d, _, moved := l.(keyed.Mover).Decide(users[0], 0); !moved && d.Remaining < want*n {
					var keys []string
					l.(keyed.Mover).Keys(func(k string) bool { keys = append(keys, k); return true })
					if len(keys) == 0 {
						return nil, nil // a Reload took them since the probe
					}
					return l, keys
				}
			}
			return nil, nil
		}
		svc, err := policy.NewService(a, admit.WithClock(luClock()), admit.WithShards(1), policy.WithFactory(factory))
		if errors.Is(err, admit.ErrUnsupported) {
			t.Skip(err) // atomic's table holds no wide sliding counter
		}
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, u := range users {
			if svc.CheckN(u, api, n).Allowed { // stores the pair
				got[u]++
			}
		}
		var calls, reloads atomic.Int64
		var denied atomic.Bool
		var reloadErr error
		rtRace(round,
			func() {
				var lim admit.KeyedLimiter
				var order []string
				for reloads.Load() < rtTakeReloads {
					if len(order) == 0 {
						if lim, order = holder(); lim == nil {
							runtime.Gosched() // moving: look again
							continue
						}
					}
					d, _, moved := lim.(keyed.Mover).Decide(order[0], n)
					if moved { // taken: chase the next
						order = order[1:]
						continue
					}
					if !d.Allowed {
						denied.Store(true)
						return
					}
					got[order[0]]++
					if calls.Add(1)%64 == 0 {
						runtime.Gosched() // the Reload may be queued behind this goroutine
					}
				}
			},
			func() {
				for i := range rtTakeReloads {
					// Wait for an admission since the last Reload, so that
					// the Reload runs while the other goroutine admits:
					// on a busy machine its thread may be waiting for a
					// processor. It stops only when denied, and a Reload
					// moves the states, never denies.
					for from := calls.Load(); calls.Load() == from && !denied.Load(); {
						runtime.Gosched() // it may be queued behind this goroutine
					}
					book := b
					if i%2 == 1 {
						book = a
					}
					if reloadErr = svc.Reload(book, policy.WithCarry(policy.CarryConsumed)); reloadErr != nil {
						break
					}
					reloads.Add(1)
				}
				reloads.Store(rtTakeReloads) // done, or failed: stop the admissions
			},
		)
		if reloadErr != nil {
			t.Fatal(reloadErr)
		}
		for _, u := range users {
			left := rtDrain(func(k int) bool { return svc.CheckN(u, api, k).Allowed }, n)
			if got[u]+left != want {
				what := "an admission a Take overwrote (the tombstone published with a Store), not carried"
				if got[u]+left < want {
					what = "budget lost"
				}
				t.Fatalf("%s %s, round %d: pair (%s, %s) of budget %d requests of %d at a frozen reading was admitted %d times during %d Reloads that moved it (CarryConsumed, equal limits), and %d after, where a fresh pair admits %d: %s",
					fc.name, alg, round+1, u, api, want, n, got[u], reloads.Load(), left, want, what)
			}
		}
	}
}
