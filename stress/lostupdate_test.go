package stress

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/table"
)

// The lost-update cell (TestLostUpdate) hunts the tempting wrong version of
// every compare-and-swap loop: a call that loads a state word, decides on
// it, and publishes the result with a Store, overwriting whatever another
// call published in between. Its one oracle is exact conservation on a
// frozen clock: at a fixed reading a fresh state admits a fixed number of
// equal requests, whatever their order, so G goroutines asking twice that
// many must be admitted exactly as many as one goroutine alone. A lost
// update shows as more.
//
// The phased workloads check the same law, but they spread few admissions
// over many goroutines, mixed weights and paths, so two calls of one path
// rarely sit between the same load and publish on a 2-core machine: a
// Store in the single-key token bucket's Allow passed `go test -race
// -short ./stress` in 3 runs of 6. Here every call of a round takes the
// same path on the same fresh word, the goroutines are released together
// from a spin barrier after all of them are running, GOMAXPROCS is at
// least 2 whatever -cpu says, and each round has thousands of admissions,
// so that the two processors contend for the word through the whole
// round. Rounds are counted in calls, never in time.

// luRound is how many admissions a round's fresh state gives one
// goroutine alone, about: the budgets below are of this size.
const luRound = 1024

// luRule is a rule of the cell: a budget of about luRound (in requests of
// the sizes the cell sends), in each form the variants keep.
type luRule struct {
	name   string
	limits admit.Limits
	// sizes are the request sizes of the cell's AllowN paths; a path
	// through Allow runs too when one is among them.
	sizes []int
}

var luRules = []luRule{
	// A token every millisecond: a packed word in nanoseconds.
	{"tb", mustLimits("token-bucket,1024,1024ms"), []int{1, 2}},
	// A token every 6.8359375ms: a word in scaled units.
	{"tb-frac", mustLimits("token-bucket,1024,7s"), []int{1, 3}},
	{"fw", mustLimits("fixed-window,1024,1s"), []int{1, 2}},
	{"sc", mustLimits("sliding-counter,1024,1s"), []int{1, 2}},
	// Limit >= 2^16: atomic's single-key snapshot counter, and sharded's
	// map store; requests of 64 keep the round at about luRound calls.
	{"sc-wide", mustLimits("sliding-counter,70000,1m"), []int{64, 65}},
	// Two rules: atomic's single-key pair form (one 16-byte CAS),
	// reservable and not, and sharded's map store.
	{"tb+tb", mustLimits("token-bucket,1024,1024ms + token-bucket,2048,1s"), []int{1, 2}},
	{"tb+fw", mustLimits("token-bucket,1024,1024ms + fixed-window,2048,1s"), []int{1, 2}},
	// Three rules: atomic's single-key snapshot composite.
	{"tb+fw+sc", mustLimits("token-bucket,1024,1024ms + fixed-window,2048,1s + sliding-counter,4096,1s"), []int{1, 2}},
}

// luCells are the subjects of a rule's cells: atomic's single-key limiter,
// and the keyed store that holds the rule, atomic's table for one rule
// whose state packs in its word, sharded's map store for the others.
func luCells(limits admit.Limits) []struct {
	v     variant
	shape string
} {
	keyed := variantNamed("sharded")
	if limits.Len() == 1 && table.Packs(limits.At(0)) {
		keyed = variantNamed("atomic")
	}
	return []struct {
		v     variant
		shape string
	}{{variantNamed("atomic"), "single"}, {keyed, "keyed"}}
}

// luSubject is a way to make fresh states of one limiter: fresh returns a
// state no call has touched (a new limiter, or a new key of one store).
type luSubject struct {
	name  string
	fresh func() luState
}

// luState is one fresh state's methods; reserve is nil if the limiter has
// no reservations.
type luState struct {
	allow   func() admit.Decision
	allowN  func(int) admit.Decision
	reserve func(int, time.Duration) (admit.Reservation, bool)
}

// luPath is a calling path: Allow, AllowN(n), ReserveN(n, maxWait), or,
// mixed, every other call (in the order the calls reach the state) a
// ReserveN(1, maxWait) and the others Allow.
type luPath struct {
	name    string
	n       int
	allow   bool
	reserve bool
	mixed   bool
	maxWait time.Duration
}

// call returns p's call on st, which reports whether it was admitted; nil
// if p reserves and st cannot.
func (p luPath) call(st luState) func() bool {
	switch {
	case (p.reserve || p.mixed) && st.reserve == nil:
		return nil
	case p.mixed:
		var calls atomic.Uint64
		return func() bool {
			if calls.Add(1)%2 == 0 {
				return st.allow().Allowed
			}
			_, ok := st.reserve(1, p.maxWait)
			return ok
		}
	case p.reserve:
		return func() bool { _, ok := st.reserve(p.n, p.maxWait); return ok }
	case p.allow:
		return func() bool { return st.allow().Allowed }
	default:
		return func() bool { return st.allowN(p.n).Allowed }
	}
}

// TestLostUpdate hammers one fresh state per round from goroutines released
// together on a frozen clock, through one path at a time, in every variant,
// shape, rule form and path, and requires exact conservation (see above).
func TestLostUpdate(t *testing.T) {
	procs := max(runtime.GOMAXPROCS(0), 2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	// Two goroutines: a lost update needs two calls at once, and more
	// goroutines than the machine has cores would spin at the barrier and
	// at the lag bound waiting for each other's threads (-cpu 4 and 8 on
	// 2 cores).
	const g = 2

	// The variants that publish states by compare-and-swap (luCells):
	// locked decides under a mutex, whose goroutines the lag bound below
	// would make wait for each other's wake-ups; the phased workloads
	// cover it.
	for _, rc := range luRules {
		for _, c := range luCells(rc.limits) {
			t.Run(fmt.Sprintf("variant=%s/shape=%s/rule=%s", c.v.name, c.shape, rc.name), func(t *testing.T) {
				s := luBuild(t, c.v, c.shape, rc.limits)
				luRun(t, s, rc, g)
			})
		}
	}
	// The first calls on a fresh state: small budgets, many rounds. In a
	// keyed store both goroutines' first calls find the key missing and
	// go to the store's slow path, where the second finds the key the
	// first stored and publishes on it under the shard's mutex while the
	// first's next calls publish lock-free; a single-key limiter's first
	// calls race on its initial word. Each round has one such race, so it
	// takes many rounds to see it.
	for _, rc := range luFirstRules {
		for _, c := range luCells(rc.limits) {
			t.Run(fmt.Sprintf("variant=%s/shape=%s/rule=%s/first", c.v.name, c.shape, rc.name), func(t *testing.T) {
				luFirst(t, luBuild(t, c.v, c.shape, rc.limits), rc, g)
			})
		}
	}
	// atomic's snapshot token bucket, which no constructor of the variants
	// table returns.
	for _, tb := range luRules[:2] {
		t.Run(fmt.Sprintf("variant=atomic/shape=single/rule=%s-snapshot", tb.name), func(t *testing.T) {
			s := luSubject{name: "atomic.NewTokenBucketSnapshot", fresh: func() luState {
				l, err := admitatomic.NewTokenBucketSnapshot(tb.limits.At(0), admit.WithClock(luClock()))
				if err != nil {
					t.Fatal(err)
				}
				return luState{l.Allow, l.AllowN, l.ReserveN}
			}}
			luRun(t, s, tb, g)
		})
	}
}

// luClock is a fake clock frozen at an hour, the reading of every round.
func luClock() *clock.Fake {
	c := clock.NewFake()
	c.Set(time.Hour)
	return c
}

// luBuild returns v's limiter of limits in shape as a luSubject, or skips t
// if v does not offer it (admit.ErrUnsupported, or no constructor).
func luBuild(t *testing.T, v variant, shape string, limits admit.Limits) luSubject {
	t.Helper()
	one := limits.Len() == 1
	skipOrFatal := func(err error) {
		t.Helper()
		if errors.Is(err, admit.ErrUnsupported) {
			t.Skipf("%s: %v", v.name, err)
		}
		if err != nil {
			t.Fatalf("%s(%v): %v", v.name, limits, err)
		}
	}
	if shape == "single" {
		ctor := v.singleLimits
		if one && v.single != nil {
			ctor = func(ls admit.Limits, opts ...admit.Option) (admit.Limiter, error) { return v.single(ls.At(0), opts...) }
		}
		if ctor == nil {
			t.Skipf("%s has no single-key limiter", v.name)
		}
		_, err := ctor(limits, admit.WithClock(luClock()))
		skipOrFatal(err)
		return luSubject{name: v.name, fresh: func() luState {
			l, _ := ctor(limits, admit.WithClock(luClock()))
			st := luState{allow: l.Allow, allowN: l.AllowN}
			if r, ok := l.(admit.Reserver); ok {
				st.reserve = r.ReserveN
			}
			return st
		}}
	}
	ctor := v.keyedLimits
	if one && v.keyed != nil {
		ctor = func(ls admit.Limits, opts ...admit.Option) (admit.CompositeStore, error) {
			return v.keyed(ls.At(0), opts...)
		}
	}
	if ctor == nil {
		t.Skipf("%s has no keyed limiter", v.name)
	}
	// One store for the subtest; each fresh state is a new key in it.
	l, err := ctor(limits, admit.WithClock(luClock()))
	skipOrFatal(err)
	var keys atomic.Int64
	return luSubject{name: v.name, fresh: func() luState {
		key := fmt.Sprintf("key-%d", keys.Add(1))
		st := luState{
			allow:  func() admit.Decision { return l.Allow(key) },
			allowN: func(n int) admit.Decision { return l.AllowN(key, n) },
		}
		if r := l; buckets(limits) { // the others reserve nothing ahead
			st.reserve = func(n int, maxWait time.Duration) (admit.Reservation, bool) { return r.ReserveN(key, n, maxWait) }
		}
		return st
	}}
}

// luPaths are rc's paths: Allow if 1 is among its sizes, AllowN of each
// size, ReserveN of each size waiting up to a quarter of the first rule's
// window, and the two mixed paths: reservations that take the burst's
// tokens (maxWait 0: decided under the store's mutex, published by CAS)
// and reservations that wait (the first that waits holds the state, by
// CAS to the held value), each racing with Allow's lock-free admissions.
func luPaths(rc luRule) []luPath {
	var ps []luPath
	for _, n := range rc.sizes {
		if n == 1 {
			ps = append(ps, luPath{name: "Allow", n: 1, allow: true})
		}
	}
	for _, n := range rc.sizes {
		ps = append(ps, luPath{name: fmt.Sprintf("AllowN(%d)", n), n: n})
	}
	w := rc.limits.At(0).Window
	for _, n := range rc.sizes {
		ps = append(ps, luPath{name: fmt.Sprintf("ReserveN(%d,window/4)", n), n: n, reserve: true, maxWait: w / 4})
	}
	return append(ps,
		luPath{name: "ReserveN(1,0)|Allow", n: 1, mixed: true},
		luPath{name: "ReserveN(1,window)|Allow", n: 1, mixed: true, maxWait: w})
}

// luRun runs every path of rc on s with g goroutines, in rounds of a fresh
// state each, and checks each round's conservation: what the goroutines
// were admitted, plus what one goroutine is admitted after them until its
// first denial, must be what one goroutine alone is admitted on a fresh
// state. A lost update leaves budget behind that the drain then finds.
//
// Two calls overlap only while their goroutines run at once; on a machine
// busy with other work the operating system often runs them in turn, so
// the rounds go on, up to luRounds.max, until luRounds.overlaps calls have
// overlapped another (another goroutine's call ended while it was under
// way) in all. Every bound is a count of calls, never a time.
func luRun(t *testing.T, s luSubject, rc luRule, g int) {
	minRounds, maxRounds, target := luRounds.min.get(), luRounds.max.get(), luRounds.overlaps.get()
	for _, p := range luPaths(rc) {
		ref := p.call(s.fresh())
		if ref == nil {
			continue // the limiter has no reservations
		}
		// One goroutine alone on a fresh state: calls until the first
		// denial (at a frozen reading, equal requests are admitted up to a
		// count and then never again).
		want := luDrain(ref, 1<<20)
		if want == 0 || want == 1<<20 {
			t.Fatalf("%s %s: a fresh state admitted %d requests at a frozen reading", s.name, p.name, want)
		}
		overlaps, round := 0, 0
		for ; round < minRounds || (overlaps < target && round < maxRounds); round++ {
			st := s.fresh()
			got, ov := luHammer(p.call(st), g, target)
			overlaps += ov
			if p.mixed {
				if err := luCheckDebt(s, st, got); err != nil {
					t.Fatalf("%s %s, round %d: %d goroutines: %v", s.name, p.name, round+1, g, err)
				}
				continue
			}
			left := luDrain(p.call(st), 2*want)
			if got+left != want {
				what := "lost update (an admission published over a state it was not decided on)"
				if got+left < want {
					what = "budget lost"
				}
				t.Fatalf("%s %s, round %d: %d goroutines were admitted %d times on a fresh state at a frozen reading, and one goroutine after them %d more, where one goroutine alone is admitted %d times: %s",
					s.name, p.name, round+1, g, got, left, want, what)
			}
		}
		if overlaps < target {
			t.Logf("%s: only %d calls overlapped another in %d rounds (the machine ran the goroutines in turn): a lost update may have gone unseen", p.name, overlaps, round)
		}
	}
}

// luCheckDebt checks a token bucket's state st after got admissions and
// reservations of one token each (which may have waited, so that the
// bucket is in debt and a drain would find nothing): a reservation that
// may wait as long as it needs must then wait exactly as long as on a
// fresh state after got such reservations. A lost update shows as a
// shorter wait.
func luCheckDebt(s luSubject, st luState, got int) error {
	const forever = 1000 * time.Hour
	r, ok := st.reserve(1, forever)
	ref := s.fresh()
	for i := range got {
		if _, ok := ref.reserve(1, forever); !ok {
			return fmt.Errorf("reservation %d of %d on a fresh state was refused", i+1, got)
		}
	}
	want, _ := ref.reserve(1, forever)
	if !ok || r.Delay != want.Delay {
		what := "lost update (an admission published over a state it was not decided on)"
		if r.Delay > want.Delay {
			what = "budget lost"
		}
		return fmt.Errorf("after %d admissions and reservations of one token at a frozen reading, a reservation waits %v (admitted: %v), where after as many on a fresh state it waits %v: %s", got, r.Delay, ok, want.Delay, what)
	}
	return nil
}

// luFirstRules are the small budgets of the first-call rounds: 6 requests
// of one, so that two goroutines calling a state luFirstCalls times each
// are denied some calls.
var luFirstRules = []luRule{
	{"tb", mustLimits("token-bucket,6,6ms"), []int{1, 2}},
	{"fw", mustLimits("fixed-window,6,1s"), []int{1, 2}},
	{"sc", mustLimits("sliding-counter,6,1s"), []int{1, 2}},
}

// luFirstRounds is how many rounds each Allow and AllowN path of a
// first-call rule runs, luFirstStates how many fresh states a round walks,
// and luFirstCalls how many calls each goroutine makes on each.
var luFirstRounds = budget{full: 16, short: 4}

// luStep is how many calls one goroutine may be ahead of another: 2, so
// that a goroutine whose first call on a state stored it may make its
// second, lock-free, while the other's first call waits on the store's
// slow path (with 1 it would wait for that call to end).
const (
	luFirstStates = 256
	luFirstCalls  = 4
	luStep        = 2
)

// luFirst runs the first-call rounds of every Allow and AllowN path of rc
// on s: in each, g goroutines walk luFirstStates fresh states in the same
// order, in step (less than luStep calls apart), calling each luFirstCalls
// times, so that their first calls on a state meet. Each state's conservation is
// checked as luRun checks a round's.
func luFirst(t *testing.T, s luSubject, rc luRule, g int) {
	for _, p := range luPaths(rc) {
		if p.reserve || p.mixed {
			continue
		}
		want := luDrain(p.call(s.fresh()), 1<<20)
		if want >= g*luFirstCalls {
			t.Fatalf("%s %s: a fresh state admits %d requests, more than %d goroutines' %d calls each", s.name, p.name, want, g, luFirstCalls)
		}
		for round := range luFirstRounds.get() {
			calls := make([]func() bool, luFirstStates)
			for i := range calls {
				calls[i] = p.call(s.fresh())
			}
			got := luLockstep(calls, g)
			for i, call := range calls {
				left := luDrain(call, 2*want)
				if got[i]+left != want {
					t.Fatalf("%s %s, round %d, state %d: %d goroutines were admitted %d times on a fresh state at a frozen reading, and one goroutine after them %d more, where one goroutine alone is admitted %d times",
						s.name, p.name, round+1, i+1, g, got[i], left, want)
				}
			}
		}
	}
}

// luLockstep has g goroutines, released together from a spin barrier and
// pinned to CPUs of their own, call each of calls luFirstCalls times, in
// order, none luStep calls ahead of another, and returns how many calls of
// each were admitted.
func luLockstep(calls []func() bool, g int) []int {
	got := make([]atomic.Int64, len(calls))
	progress := newLuProgress(g)
	ahead := func(i int) bool { return progress.ahead(i, luStep) }
	luGo(g, 0, func(i int) {
		for k, call := range calls {
			for range luFirstCalls {
				for ahead(i) {
				}
				if call() {
					got[k].Add(1)
				}
				progress[i].n.Add(1)
			}
		}
	})
	n := make([]int, len(calls))
	for i := range got {
		n[i] = int(got[i].Load())
	}
	return n
}

// luRounds bounds the rounds of a path, and says how many overlapping
// calls end them.
var luRounds = struct{ min, max, overlaps budget }{
	min:      budget{full: 2, short: 1},
	max:      budget{full: 32, short: 8},
	overlaps: budget{full: 1024, short: 256},
}

// luDrain calls call until it is denied, at most limit times, and returns
// how many calls were admitted.
func luDrain(call func() bool, limit int) int {
	n := 0
	for n < limit && call() {
		n++
	}
	return n
}

// luHammer calls call from g goroutines until each has been denied once
// or has made overlaps/g calls that overlapped another, and returns how
// many calls were admitted and how many overlapped another.
//
// The goroutines are pinned to CPUs of their own (pinThread), spin at a
// barrier until all are running, and then keep within luLag calls of each
// other: one that is luLag calls ahead of another spins until the other
// has made a call (or is done). On a busy machine the operating system
// often runs one goroutine while another's CPU runs other work; without
// the lag bound the running one would spend the round's budget alone, and
// with it the calls are made while both run.
func luHammer(call func() bool, g, overlaps int) (admitted, overlapped int) {
	var total, over atomic.Int64
	progress := newLuProgress(g)
	ahead := func(i int) bool { return progress.ahead(i, luLag) }
	luGo(g, 0, func(i int) {
		var n, ov int64
		for ov < int64(overlaps/g) {
			for ahead(i) {
			}
			before := progress.others(i)
			if !call() {
				break
			}
			n++
			progress[i].n.Add(1)
			if progress.others(i) != before {
				ov++ // another goroutine's call ended during this one
			}
		}
		progress[i].n.Store(math.MaxInt64 / 2) // done: nobody waits for it
		total.Add(n)
		over.Add(ov)
	})
	return int(total.Load()), int(over.Load())
}

// luLag is how many calls one goroutine of luHammer may be ahead of
// another, and luSpin how many times a barrier of the retirement cell
// (rtRace) checks before it yields between checks.
const (
	luLag  = 4
	luSpin = 1 << 12
)

// luGo runs body(i) for each i below g in a goroutine of its own, pinned
// to a CPU of its own (pinThread), all released together from a spin
// barrier (yieldAfter as spinBarrier's), and waits for all.
func luGo(g, yieldAfter int, body func(i int)) {
	var done sync.WaitGroup
	b := spinBarrier{n: int32(g), yieldAfter: yieldAfter}
	done.Add(g)
	for i := range g {
		go func() {
			defer done.Done()
			defer pinThread(i)()
			b.wait()
			body(i)
		}()
	}
	done.Wait()
}

// luProgress counts each goroutine's calls, a cache line each.
type luProgress []struct {
	n atomic.Int64
	_ [56]byte
}

func newLuProgress(g int) luProgress { return make(luProgress, g) }

// ahead reports whether goroutine i has made lag calls more than another.
func (p luProgress) ahead(i int, lag int64) bool {
	mine := p[i].n.Load()
	for j := range p {
		if j != i && mine-p[j].n.Load() >= lag {
			return true
		}
	}
	return false
}

// others returns how many calls the goroutines but i have made.
func (p luProgress) others(i int) (sum int64) {
	for j := range p {
		if j != i {
			sum += p[j].n.Load()
		}
	}
	return sum
}

// spinBarrier is a barrier for n goroutines that spin while they wait,
// without yielding: the goroutines of a round are made on one processor
// (P), and one that yielded would let the next run there, so that the
// round ran on one processor while the others' threads had not yet been
// scheduled. A goroutine that spins keeps its processor, and the others
// have to be taken by other processors. n must not exceed GOMAXPROCS, or
// the last arrival waits for the runtime to preempt a spinner.
//
// With yieldAfter > 0, a goroutine that has checked yieldAfter times yields
// (runtime.Gosched) between its further checks (see rtRace).
type spinBarrier struct {
	n          int32
	yieldAfter int
	count      atomic.Int32
	open       atomic.Bool
}

// wait returns once n goroutines have called it.
func (b *spinBarrier) wait() {
	if b.count.Add(1) == b.n {
		b.open.Store(true)
		return
	}
	for i := 0; !b.open.Load(); i++ {
		if b.yieldAfter > 0 && i >= b.yieldAfter {
			runtime.Gosched()
		}
	}
}

// TestLostUpdateHeld hunts the Load+Store mutant of the compare-and-swap
// that holds a token bucket for a reservation that must wait (the cell's
// value swapped for the held value, under the record's mutex, while
// lock-free admissions may publish). TestLostUpdate cannot: its
// reservations wait only once the bucket is empty, and then no lock-free
// call publishes anything. Here, per round, one goroutine calls Allow and
// the other ReserveN(luHeldN, luHeldN tokens' wait) on a fresh bucket of
// luHeldBurst tokens at a frozen reading: the reservations take luHeldN
// tokens each until fewer are left, and the first that must wait then
// holds the bucket while the Allow goroutine may still be taking the last
// tokens. A hold published over such an admission forgets it.
//
// The oracle is exact: at a frozen reading a token bucket's state after
// admissions and reservations (refused calls change nothing) is a function
// of how many tokens they took, so a reservation that may wait as long as
// it needs must then wait exactly as long as after as many one-token
// reservations on a fresh state (luCheckDebt). Rounds are short and many,
// counted in rounds, never in time.
func TestLostUpdateHeld(t *testing.T) {
	procs := max(runtime.GOMAXPROCS(0), 2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	limits := mustLimits(fmt.Sprintf("token-bucket,%d,%dms", luHeldBurst, luHeldBurst))
	for _, c := range luCells(limits) {
		t.Run(fmt.Sprintf("variant=%s/shape=%s", c.v.name, c.shape), func(t *testing.T) {
			luHeldRun(t, luBuild(t, c.v, c.shape, limits))
		})
	}
	t.Run("variant=atomic/shape=snapshot", func(t *testing.T) {
		luHeldRun(t, luSubject{name: "atomic.NewTokenBucketSnapshot", fresh: func() luState {
			l, err := admitatomic.NewTokenBucketSnapshot(limits.At(0), admit.WithClock(luClock()))
			if err != nil {
				t.Fatal(err)
			}
			return luState{l.Allow, l.AllowN, l.ReserveN}
		}})
	})
}

// luHeldBurst is the bucket of TestLostUpdateHeld's rounds, a token a
// millisecond, and luHeldN the size of its reservations.
const (
	luHeldBurst = 16
	luHeldN     = 5
)

// luHeldRounds is how many rounds each subject of TestLostUpdateHeld runs.
var luHeldRounds = budget{full: 2048, short: 512}

// luHeldRun runs TestLostUpdateHeld's rounds on s.
func luHeldRun(t *testing.T, s luSubject) {
	if s.fresh().reserve == nil {
		t.Skipf("%s has no reservations", s.name)
	}
	maxWait := luHeldN * time.Millisecond
	for round := range luHeldRounds.get() {
		st := s.fresh()
		var tokens atomic.Int64
		calls := []func() bool{
			func() bool {
				ok := st.allow().Allowed
				if ok {
					tokens.Add(1)
				}
				return ok
			},
			func() bool {
				_, ok := st.reserve(luHeldN, maxWait)
				if ok {
					tokens.Add(luHeldN)
				}
				return ok
			},
		}
		luUntilDenied(calls)
		if err := luCheckDebt(s, st, int(tokens.Load())); err != nil {
			t.Fatalf("%s, round %d: one goroutine calling Allow and one ReserveN(%d, %v) on a fresh bucket of %d tokens: %v",
				s.name, round+1, luHeldN, maxWait, luHeldBurst, err)
		}
	}
}

// luUntilDenied runs each of calls in a goroutine of its own, released
// together from a spin barrier, until it reports false, and waits for all.
// Each call is made at most 4*luHeldBurst times (a bound, should a state
// never deny). The goroutines are pinned to CPUs of their own, and one
// that has made more calls than another spins until the other has made a
// call (or is done): on a busy machine the operating system may have
// descheduled the other's thread, and the round would otherwise run on
// one processor.
func luUntilDenied(calls []func() bool) {
	progress := newLuProgress(len(calls))
	ahead := func(i int) bool { return progress.ahead(i, 1) }
	luGo(len(calls), 0, func(i int) {
		defer progress[i].n.Store(math.MaxInt64 / 2) // done: nobody waits for it
		for n := 0; n < 4*luHeldBurst; n++ {
			for ahead(i) {
			}
			if !calls[i]() {
				return
			}
			progress[i].n.Add(1)
		}
	})
}
