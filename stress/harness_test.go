package stress

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
)

// subject is one limiter under test, seen through one calling convention.
type subject struct {
	name string
	// allow is the limiter's AllowN; a single-key limiter ignores the key.
	allow func(key string, n int) admit.Decision
	// sweep, when not nil, evicts the idle keys of a keyed store; the
	// eviction workloads call it concurrently with the requests.
	sweep func() int
	// maxKeys is the store's WithMaxKeys bound, 0 for none. Only a store with
	// a bound may deny a fresh key (the full-store policy).
	maxKeys int
	// classify names the oracle object an operation acted on and returns
	// that object's spec. For a plain limiter the object is the key and the
	// spec the limiter's rule; a policy.Service keeps one budget per (pair,
	// rule), and its Decision's Limit tells which rule decided.
	classify func(key string, d admit.Decision) (object string, sp spec, ok bool)
}

// classifyOne is the classify of a limiter with one rule.
func classifyOne(sp spec) func(string, admit.Decision) (string, spec, bool) {
	return func(key string, _ admit.Decision) (string, spec, bool) { return key, sp, true }
}

// req is one request of a plan.
type req struct {
	key string
	n   int
}

// op is one recorded call.
type op struct {
	client int
	phase  int
	key    string // the oracle object (see subject.classify)
	n      int
	// call and ret are logical timestamps from one atomic counter, taken
	// just before the call and just after it returned (porcupine's interval).
	call, ret int64
	// lo and hi bound the clock reading the limiter used: the base clock
	// before the call minus the clock's lag, and the base clock after it.
	// In an exact phase lo == hi == the phase's time.
	lo, hi time.Duration
	d      admit.Decision
}

// history is what one run of a workload recorded.
type history struct {
	ops     []op
	phaseAt []time.Duration // the clock at the start of each phase
	clients int
	exact   bool // every phase ran on a frozen clock with fresh readings
	start   time.Duration
	lagMax  time.Duration // the largest lo/hi slack a stale reading adds
	stats   runStats
}

type runStats struct {
	phases, ops, reloads, sweeps, evicted int
	staleReads, yields, ticks             int64
	elapsed                               time.Duration
}

// workload says how to drive a subject.
type workload struct {
	name       string
	goroutines int
	phases     int
	// plan returns each goroutine's requests for phase p.
	plan func(r *rand.Rand, p int) [][]req
	// step returns the clock's move before phase p >= 1 (0: none).
	step func(r *rand.Rand, p int) time.Duration
	// background runs during every phase alongside the requests, until
	// stop is closed; it must bound its own iterations.
	background []func(stop <-chan struct{}, r *rand.Rand)
	// tick, when positive, makes a ticker goroutine advance the clock by
	// tick during every burst, at most maxTicks times per phase.
	tick     time.Duration
	maxTicks int
	// settle makes the move between phases leave no stale reading behind:
	// no reading from before the move can reach a limiter after it (in the
	// stale modes, readings then go stale only by the ticks), so the moves
	// can be long while the interval bounds' slack stays one tick.
	settle bool
	// sweeps, evicted and reloads count what the background tasks did.
	sweeps, evicted, reloads atomic.Int64
	// yieldPermille is the probability (per mille) of a yield at a hook
	// site; clockYield and clockStale those of the clock's yields and
	// stale readings.
	yieldPermille, clockYield, clockStale int
}

// exact reports whether w's histories support the exact oracles (replay,
// conservation, porcupine): a frozen clock in every phase and no stale
// readings.
func (w *workload) exact() bool { return w.tick == 0 && w.clockStale == 0 }

// clockStart is where every run's fake clock starts: well away from 0, so
// that no kernel's zero-value sentinel is in play, and not window-aligned.
const clockStart = time.Hour + 123456789*time.Nanosecond

// run drives subject s, built by build over clk, through workload w with
// seed, and returns what it recorded. build is called once, after the
// clock exists, so that the limiter reads it.
func run(w *workload, seed uint64, build func(clk *stressClock) subject) (*history, subject) {
	began := time.Now()
	clk := newStressClock(clockStart, seed, w.clockYield, w.clockStale)
	s := build(clk)
	permille := w.yieldPermille
	if *yieldFlag >= 0 {
		permille = *yieldFlag
	}
	y, undo := widen(mix64(seed+1), permille)
	defer undo()
	r := newRand(seed, 0)
	h := &history{clients: w.goroutines, exact: w.exact()}
	var ts atomic.Int64 // logical time for porcupine
	for p := range w.phases {
		if p > 0 {
			clk.advance(w.step(r, p))
			if w.settle {
				clk.advance(0) // the reading before the move is no longer held
			}
		}
		h.phaseAt = append(h.phaseAt, clk.now())
		h.lagMax = max(h.lagMax, clk.lag())
		if w.tick > 0 {
			h.lagMax = max(h.lagMax, w.tick)
		}
		plans := w.plan(r, p)
		logs := make([][]op, len(plans))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g, plan := range plans {
			logs[g] = make([]op, 0, len(plan))
			wg.Go(func() {
				<-start
				for _, q := range plan {
					lo := clk.now() - clk.lag()
					call := ts.Add(1)
					d := s.allow(q.key, q.n)
					ret := ts.Add(1)
					hi := clk.now()
					logs[g] = append(logs[g], op{client: g, phase: p, key: q.key, n: q.n, call: call, ret: ret, lo: lo, hi: hi, d: d})
				}
			})
		}
		stop := make(chan struct{})
		var bg sync.WaitGroup
		for i, f := range w.background {
			br := newRand(seed, uint64(1000*(p+1)+i))
			bg.Go(func() {
				<-start
				f(stop, br)
			})
		}
		var ticks atomic.Int64
		if w.tick > 0 {
			bg.Go(func() {
				<-start
				for range w.maxTicks {
					select {
					case <-stop:
						return
					default:
					}
					clk.advance(w.tick)
					ticks.Add(1)
					runtime.Gosched()
				}
			})
		}
		close(start)
		wg.Wait()
		close(stop)
		bg.Wait()
		h.stats.ticks += ticks.Load()
		for _, l := range logs {
			h.ops = append(h.ops, l...)
		}
	}
	for i := range h.ops {
		o := &h.ops[i]
		if obj, _, ok := s.classify(o.key, o.d); ok {
			o.key = obj
		}
	}
	h.stats.sweeps, h.stats.evicted, h.stats.reloads = int(w.sweeps.Load()), int(w.evicted.Load()), int(w.reloads.Load())
	h.stats.phases = w.phases
	h.stats.ops = len(h.ops)
	h.stats.staleReads = clk.stale.Load()
	h.stats.yields = y.yields.Load()
	h.stats.elapsed = time.Since(began)
	return h, s
}

// sweeper returns a background task that sweeps s's store as fast as it
// can, yielding between sweeps, at most limit times per phase. s is read
// when the task runs, after run has built the subject.
func sweeper(w *workload, s *subject, limit int) func(<-chan struct{}, *rand.Rand) {
	return func(stop <-chan struct{}, _ *rand.Rand) {
		for range limit {
			select {
			case <-stop:
				return
			default:
			}
			w.evicted.Add(int64(s.sweep()))
			w.sweeps.Add(1)
			runtime.Gosched()
		}
	}
}

// Plans. Demand is saturating by design: a key's requests in a phase ask for
// about twice its whole budget, so the budget runs out mid-phase (a high
// admit ratio first, where lost updates show, then denials), and each
// goroutine ends with a tail of decreasing weights down to single requests,
// so that the budget is spent to the last unit and the exact oracles can
// check conservation.

// weights returns the request weights a plan draws from for Limit l: mostly
// small, some large, and rarely a probe (0), a request that can never pass
// (l+1) or a negative one.
func weights(l int) []int {
	w := []int{1, 1, 1, 2, 3, max(1, l/64), max(1, l/16), max(1, l/4)}
	if l <= 64 {
		w = append(w, l)
	}
	return w
}

// tail returns the weights that end a key's demand: three each of l/4,
// l/16, ... and three 1s. Run in order, it spends any budget below l to the
// last unit: if less than 4w is left before the three requests for w, less
// than w is left after them. (Budgets are additive at a fixed reading in
// every algorithm, so the order of the other requests does not matter.)
func tail(l int) []int {
	var t []int
	for w := l / 4; w > 1; w /= 4 {
		t = append(t, w, w, w)
	}
	return append(t, 1, 1, 1)
}

// draw returns one request weight for Limit l.
func draw(r *rand.Rand, l int) int {
	switch x := r.IntN(100); {
	case x < 2:
		return 0
	case x < 4:
		return l + 1
	case x < 5:
		return -1
	case x < 60:
		return 1
	}
	ws := weights(l)
	return ws[r.IntN(len(ws))]
}

// demand returns the requests for one key in one phase: random weights until
// they ask for about twice the budget, and copies of the tail, which deal
// puts last.
func demand(r *rand.Rand, key string, l int, copies int) (main, end []req) {
	for asked := 0; asked < 2*l; {
		n := draw(r, l)
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

// deal spreads the requests of every key over g goroutines at random, each
// goroutine's share of mains before its share of tails; first, when not
// empty, is prepended to every goroutine's plan in the same order (so that
// all goroutines race on the same keys at once: keys created during the race).
func deal(r *rand.Rand, g int, mains, tails []req, first []req) [][]req {
	plans := make([][]req, g)
	for i := range plans {
		plans[i] = slices.Clone(first)
	}
	r.Shuffle(len(mains), func(i, j int) { mains[i], mains[j] = mains[j], mains[i] })
	for i, q := range mains {
		plans[i%g] = append(plans[i%g], q)
	}
	r.Shuffle(len(tails), func(i, j int) { tails[i], tails[j] = tails[j], tails[i] })
	for i, q := range tails {
		plans[(i+len(mains))%g] = append(plans[(i+len(mains))%g], q)
	}
	return plans
}
