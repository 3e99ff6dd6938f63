package stress

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Reservations and cancellations under stress. Token buckets hand out
// reservations (admit.Reserver, admit.Store.ReserveN) that a waiter may
// cancel, and a misbehaving program may cancel them too: twice, on another
// key, with a copy, or at a stale reading. The workload mixes admissions,
// reservations with every kind of maxWait, the owners' cancellations and a
// misbehaving goroutine's, in phases of a frozen clock (stale readings on
// in half of the runs); the oracle counts what really passed:
//
//   - every admitted AllowN, at its reading;
//   - every reservation that took tokens and was not cancelled, at its
//     reading plus its Delay, the reading at which its waiter proceeds;
//
// and checks over them the token bucket's interval bound (at most Limit +
// floor(d·Limit/Window) over any span d of readings). It also checks each
// successful cancellation directly: at most one per reservation, only on
// the key the reservation was made on, and never in a phase after one whose
// call on that key had a reading at or past the tokens' due time (the
// tokens were seen due: the waiter may have gone).

// reserver is a token bucket under test through its reservation methods; a
// single-key limiter ignores the key.
type reserver struct {
	name    string
	allow   func(key string, n int) admit.Decision
	reserve func(key string, n int, maxWait time.Duration) (admit.Reservation, bool)
	cancel  func(key string, r admit.Reservation) bool
	keys    []string
}

// rKind is what a recorded call did.
type rKind uint8

const (
	rAllow rKind = iota
	rReserve
	rCancel
)

// rOp is one recorded call.
type rOp struct {
	kind   rKind
	phase  int
	key    string // the key the call named
	n      int
	lo, hi time.Duration // bounds of the limiter's reading, as op.lo/op.hi
	ok     bool          // admitted, reserved, or cancelled
	delay  time.Duration // a reservation's Delay
	id     int           // a reservation's id; for a cancel, its target's
}

// pooled is a reservation any goroutine may (mis)use.
type pooled struct {
	id  int
	key string
	r   admit.Reservation
}

// reservePlan is one goroutine's calls in one phase: misbehaving goroutines
// cancel reservations of others, copies included, on any key.
type reservePlan struct {
	calls      int
	misbehaves bool
}

// runReservations drives s through phases of a frozen (or stale-reading)
// clock and returns every call it recorded.
func runReservations(seed uint64, rule admit.Rule, stale bool, build func(clk *stressClock) reserver) ([]rOp, reserver) {
	stalePermille := 0
	if stale {
		stalePermille = clockStale
	}
	clk := newStressClock(clockStart, seed, clockYield, stalePermille)
	s := build(clk)
	_, undo := widen(mix64(seed+1), hookYield)
	defer undo()
	r := newRand(seed, 0)
	token := max(rule.Window/time.Duration(rule.Limit), 1)
	stepChoices := []time.Duration{0, 1, token / 2, token, 2 * token, rule.Window / 3, rule.Window}
	waits := []time.Duration{0, token, rule.Window / 2, 2 * rule.Window}
	g := min(goroutines(), 24)
	var (
		mu     sync.Mutex
		pool   []pooled
		nextID atomic.Int64
		ops    []rOp
	)
	phases := budget{full: 24, short: 10}.get()
	for p := range phases {
		if p > 0 {
			clk.advance(stepChoices[r.IntN(len(stepChoices))])
		}
		start := make(chan struct{})
		logs := make([][]rOp, g)
		var wg sync.WaitGroup
		for i := range g {
			gr := newRand(seed, uint64(1+p*1000+i))
			plan := reservePlan{calls: 6 + gr.IntN(10), misbehaves: i%4 == 3}
			wg.Go(func() {
				<-start
				var mine []pooled
				for range plan.calls {
					key := s.keys[gr.IntN(len(s.keys))]
					n := 1 + gr.IntN(max(1, rule.Limit/2))
					lo := clk.now() - clk.lag()
					switch x := gr.IntN(10); {
					case plan.misbehaves && x < 6:
						mu.Lock()
						if len(pool) == 0 {
							mu.Unlock()
							continue
						}
						target := pool[gr.IntN(len(pool))]
						mu.Unlock()
						onKey := target.key
						if gr.IntN(3) == 0 {
							onKey = s.keys[gr.IntN(len(s.keys))]
						}
						ok := s.cancel(onKey, target.r)
						logs[i] = append(logs[i], rOp{kind: rCancel, phase: p, key: onKey, lo: lo, hi: clk.now(), ok: ok, id: target.id})
					case x < 4:
						d := s.allow(key, n)
						logs[i] = append(logs[i], rOp{kind: rAllow, phase: p, key: key, n: n, lo: lo, hi: clk.now(), ok: d.Allowed})
					case x < 8 || len(mine) == 0:
						res, ok := s.reserve(key, n, waits[gr.IntN(len(waits))])
						id := int(nextID.Add(1))
						logs[i] = append(logs[i], rOp{kind: rReserve, phase: p, key: key, n: n, lo: lo, hi: clk.now(), ok: ok, delay: res.Delay, id: id})
						if ok && res.Delay > 0 {
							mine = append(mine, pooled{id: id, key: key, r: res})
							mu.Lock()
							pool = append(pool, pooled{id: id, key: key, r: res})
							mu.Unlock()
						}
					default: // the owner cancels its latest reservation
						target := mine[len(mine)-1]
						mine = mine[:len(mine)-1]
						ok := s.cancel(target.key, target.r)
						logs[i] = append(logs[i], rOp{kind: rCancel, phase: p, key: target.key, lo: lo, hi: clk.now(), ok: ok, id: target.id})
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for _, l := range logs {
			ops = append(ops, l...)
		}
		if len(pool) > 256 { // keep the misuse on recent reservations
			pool = slices.Clone(pool[len(pool)-128:])
		}
	}
	return ops, s
}

// checkReservations is the oracle described at the top of this file. slack
// bounds the uncertainty of a reading (the stale clock's lag).
func checkReservations(ops []rOp, rule admit.Rule, slack time.Duration) error {
	v := &violations{check: "reservations"}
	byID := map[int]rOp{}
	for _, o := range ops {
		if o.kind == rReserve {
			byID[o.id] = o
		}
	}
	cancelled := map[int]int{}
	// maxLo[key][p] is the largest lo of phase p's calls on key: the call it
	// came from read at least that.
	maxLo := map[string][]time.Duration{}
	for _, o := range ops {
		m := maxLo[o.key]
		for len(m) <= o.phase {
			m = append(m, time.Duration(-1<<63))
		}
		m[o.phase] = max(m[o.phase], o.lo)
		maxLo[o.key] = m
	}
	for _, o := range ops {
		if o.kind != rCancel || !o.ok {
			continue
		}
		t := byID[o.id]
		cancelled[o.id]++
		switch {
		case o.key != t.key:
			v.addf("reservation %d of %q (n=%d, delay %v) was cancelled on key %q", o.id, t.key, t.n, t.delay, o.key)
		case cancelled[o.id] > 1:
			v.addf("reservation %d of %q (n=%d, delay %v) was cancelled %d times", o.id, t.key, t.n, t.delay, cancelled[o.id])
		}
		due := t.hi + t.delay // every reading at or past this saw the tokens due
		for p, lo := range maxLo[t.key] {
			if p >= o.phase {
				break
			}
			if p >= t.phase && lo >= due {
				v.addf("reservation %d of %q (delay %v, due by %v) was cancelled in phase %d, after a call of phase %d read %v", o.id, t.key, t.delay, due, o.phase, p, lo)
				break
			}
		}
	}
	ivs := map[string][]interval{}
	for _, o := range ops {
		switch {
		case o.kind == rAllow && o.ok:
			ivs[o.key] = append(ivs[o.key], interval{lo: o.lo, hi: o.hi, n: int64(o.n)})
		case o.kind == rReserve && o.ok && cancelled[o.id] == 0:
			ivs[o.key] = append(ivs[o.key], interval{lo: o.lo + o.delay, hi: o.hi + o.delay, n: int64(o.n)})
		}
	}
	keys := make([]string, 0, len(ivs))
	for k := range ivs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		list := ivs[k]
		slices.SortFunc(list, func(a, b interval) int { return cmp.Compare(a.lo, b.lo) })
		tokenBucketBound(v, k, rule, list, slack)
	}
	return v.err()
}

// reserverOf builds v's keyed (or single-key) token bucket of rule over clk
// as a reserver, or skips.
func reserverOf(t *testing.T, v variant, keyed bool, rule admit.Rule, clk *stressClock) reserver {
	t.Helper()
	if keyed {
		if v.keyed == nil {
			t.Skipf("%s has no keyed limiter", v.name)
		}
		lim, err := v.keyed(rule, admit.WithClock(clk), admit.WithShards(1))
		if err != nil {
			t.Fatal(err)
		}
		kr := lim
		return reserver{name: v.name, allow: kr.AllowN, reserve: kr.ReserveN, cancel: kr.CancelReservation, keys: []string{"a", "b", "c"}}
	}
	if v.single == nil {
		t.Skipf("%s has no single-key limiter", v.name)
	}
	lim, err := v.single(rule, admit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := lim.(admit.Reserver)
	if !ok {
		t.Fatalf("%s.NewLimiter(%v) is not an admit.Reserver", v.name, rule)
	}
	return reserver{
		name:    v.name,
		allow:   func(_ string, n int) admit.Decision { return r.AllowN(n) },
		reserve: func(_ string, n int, maxWait time.Duration) (admit.Reservation, bool) { return r.ReserveN(n, maxWait) },
		cancel:  func(_ string, res admit.Reservation) bool { return r.CancelReservation(res) },
		keys:    []string{"k"},
	}
}

// reserveRules: a token every 10ms, and one every 166.67ms (a fraction of a
// nanosecond: scaled units in a packed word).
var reserveRules = []ruleCase{manyRules[0], manyRules[1]}

// TestReservations runs the workload above over every variant, both shapes
// and both forms of the token bucket, with and without stale readings.
func TestReservations(t *testing.T) {
	trials := budget{full: 4, short: 1}.get()
	for _, v := range variants {
		for _, shape := range []string{"keyed", "single"} {
			for _, rc := range reserveRules {
				for _, stale := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/%s/stale=%v", v.name, shape, rc.name, stale)
					t.Run(name, func(t *testing.T) {
						for trial := range trials {
							seed := mix64(seedFor(t) + uint64(trial))
							ops, _ := runReservations(seed, rc.rule, stale, func(clk *stressClock) reserver {
								return reserverOf(t, v, shape == "keyed", rc.rule, clk)
							})
							slack := time.Duration(0)
							if stale {
								slack = rc.rule.Window
							}
							if err := checkReservations(ops, rc.rule, slack); err != nil {
								t.Fatalf("trial %d, seed %d (%s): %v", trial, seed, rerun(t), err)
							}
						}
					})
				}
			}
		}
	}
}

// errNotCaught is the self-test's failure: the oracle passed a broken
// reserver.
var errNotCaught = errors.New("the reservation oracle did not catch the broken reserver")

// catchBrokenReserver runs the workload on the broken reserver of
// broken_test.go until the oracle fails, for up to trials runs; it returns
// the oracle's error and the trial that caught it.
func catchBrokenReserver(t *testing.T, trials int) (error, int) {
	rule := reserveRules[0].rule
	for trial := range trials {
		seed := mix64(seedFor(t) + uint64(trial))
		ops, _ := runReservations(seed, rule, false, func(clk *stressClock) reserver {
			b := newIdentitylessReserver(rule, clk)
			return reserver{name: "identityless", allow: b.AllowN, reserve: b.ReserveN, cancel: b.CancelReservation, keys: []string{"a", "b", "c"}}
		})
		if err := checkReservations(ops, rule, 0); err != nil {
			return err, trial
		}
	}
	return errNotCaught, trials
}

// TestReservationSelfTest: a store whose cancellation checks only the state,
// not which reservation is presented (the bug of reservations that could be
// cancelled twice or on another key), must be caught.
func TestReservationSelfTest(t *testing.T) {
	trials := budget{full: 20, short: 8}.get()
	if *trialsFlag > 0 {
		trials = *trialsFlag
	}
	began := time.Now()
	err, trial := catchBrokenReserver(t, trials)
	if errors.Is(err, errNotCaught) {
		t.Fatalf("%v in %d trials", err, trials)
	}
	t.Logf("caught on trial %d in %v: %v", trial+1, time.Since(began).Round(time.Millisecond), err)
}

// TestReservationPlanCoverage: the random plan reaches every kind of call.
func TestReservationPlanCoverage(t *testing.T) {
	rule := reserveRules[0].rule
	ops, _ := runReservations(mix64(seedFor(t)), rule, false, func(clk *stressClock) reserver {
		return reserverOf(t, variants[0], true, rule, clk)
	})
	var kinds [3]int
	var cancelled, refusedCancels, delayed int
	for _, o := range ops {
		kinds[o.kind]++
		switch {
		case o.kind == rCancel && o.ok:
			cancelled++
		case o.kind == rCancel:
			refusedCancels++
		case o.kind == rReserve && o.ok && o.delay > 0:
			delayed++
		}
	}
	if kinds[rAllow] == 0 || kinds[rReserve] == 0 || cancelled == 0 || refusedCancels == 0 || delayed == 0 {
		t.Fatalf("the plan missed a kind of call: %v calls, %d cancelled, %d cancels refused, %d delayed reservations", kinds, cancelled, refusedCancels, delayed)
	}
}
