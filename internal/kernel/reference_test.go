package kernel

// This file holds the test harness shared by every kernel test: a uniform
// wrapper around the four kernels (subject), plain reference models of the four
// algorithms written from DESIGN.md's "Exact semantics" and independently of
// the kernels (model), and the step-table runner.
//
// The models favour obviousness over speed: exact rationals and big integers,
// a map of every window's count, a slice of every admission. Each follows the
// same conventions as the kernels:
//
//   - the effective time of a reading is max(now, newest admission so far):
//     a stale reading is treated as the newest time the state has seen (a
//     denial or a probe leaves no trace, so only admissions move that time).
//     The sliding counter is the exception: its state keeps no time finer than
//     its window index, so a reading in an older window counts as the start
//     of the newest window, and a stale reading within the newest window is
//     taken as it is (see refSlidingCounter.eff). Both are harsher than the
//     newest time, never kinder; checkStaleCounter (property_test.go)
//     checks that against the kernel evaluated at the newest time;
//   - RetryAfter is 0 when allowed; when denied it is the smallest d >= 0 such
//     that the same request at reading now+d would be admitted, measured from
//     the caller's reading now; admit.Never for n < 0 or n > Limit;
//   - ResetAfter is the wait from now until the state is equivalent to a fresh
//     one (full bucket, empty window); 0 when it already is;
//   - Remaining is how many more single requests would pass now; 0 when denied.

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// subject is one kernel together with one key's state, so that the tests can
// drive the four kernels uniformly.
type subject interface {
	Allow(now time.Duration, n int) admit.Decision
	Fresh(now time.Duration) bool
	// Clone returns an independent deep copy: the copy and the original never
	// share memory.
	Clone() subject
	// State returns a deep copy of the kernel state, for byte-for-byte
	// comparisons of the state before and after a call.
	State() any
}

type kstate[S any, K Kernel[S]] struct {
	k     K
	s     S
	clone func(S) S
}

func (x *kstate[S, K]) Allow(now time.Duration, n int) admit.Decision { return x.k.Allow(&x.s, now, n) }
func (x *kstate[S, K]) Fresh(now time.Duration) bool                  { return x.k.Fresh(&x.s, now) }
func (x *kstate[S, K]) Clone() subject                                { return &kstate[S, K]{k: x.k, s: x.clone(x.s), clone: x.clone} }
func (x *kstate[S, K]) State() any                                    { return x.clone(x.s) }

func same[S any](s S) S { return s }

// cloneLog deep-copies a sliding log: the ring is copied, and a nil ring stays
// nil (the kernel allocates the ring when it finds it nil).
func cloneLog(l Log) Log {
	c := l
	if l.ts != nil {
		c.ts = slices.Clone(l.ts)
	}
	return c
}

// newSubject returns a fresh key (the zero state) under rule r's kernel.
func newSubject(r admit.Rule) subject {
	switch r.Algorithm {
	case admit.TokenBucket:
		return &kstate[TokenBucketState, *TokenBucket]{k: NewTokenBucket(r), clone: same[TokenBucketState]}
	case admit.FixedWindow:
		return &kstate[FixedWindowState, *FixedWindow]{k: NewFixedWindow(r), clone: same[FixedWindowState]}
	case admit.SlidingLog:
		return &kstate[Log, *SlidingLog]{k: NewSlidingLog(r), clone: cloneLog}
	case admit.SlidingCounter:
		return &kstate[SlidingCounterState, *SlidingCounter]{k: NewSlidingCounter(r), clone: same[SlidingCounterState]}
	}
	panic(fmt.Sprintf("newSubject: unknown algorithm %v", r.Algorithm))
}

// model is a reference implementation of one algorithm for one key.
type model interface {
	Allow(now time.Duration, n int) admit.Decision
}

func newModel(r admit.Rule) model {
	l, w := int64(r.Limit), int64(r.Window)
	switch r.Algorithm {
	case admit.TokenBucket:
		return &refTokenBucket{limit: l, window: w}
	case admit.FixedWindow:
		return &refFixedWindow{limit: l, window: w, counts: map[int64]int64{}}
	case admit.SlidingLog:
		return &refSlidingLog{limit: l, window: w}
	case admit.SlidingCounter:
		return &refSlidingCounter{limit: l, window: w, counts: map[int64]int64{}}
	}
	panic(fmt.Sprintf("newModel: unknown algorithm %v", r.Algorithm))
}

// --- exact arithmetic helpers ---------------------------------------------

func bi(v int64) *big.Int { return big.NewInt(v) }

func bAdd(a, b *big.Int) *big.Int { return new(big.Int).Add(a, b) }
func bSub(a, b *big.Int) *big.Int { return new(big.Int).Sub(a, b) }
func bMul(a, b *big.Int) *big.Int { return new(big.Int).Mul(a, b) }

// bFloorDiv is floor(a/b) for b > 0 (big.Int.Div is Euclidean division, which
// for a positive divisor is floor division).
func bFloorDiv(a, b *big.Int) *big.Int { return new(big.Int).Div(a, b) }

// ratCeil is the smallest integer >= r.
func ratCeil(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int)) // Euclidean: m >= 0
	if m.Sign() != 0 {
		q.Add(q, bi(1))
	}
	return q
}

// ratFloor is the largest integer <= r.
func ratFloor(r *big.Rat) *big.Int { return new(big.Int).Div(r.Num(), r.Denom()) }

// duration converts an exact non-negative wait to a Duration, saturating at
// admit.Never (a wait that does not fit an int64 is "never").
func duration(d *big.Int) time.Duration {
	if d.Sign() < 0 {
		panic(fmt.Sprintf("reference model computed a negative wait %v", d))
	}
	if !d.IsInt64() {
		return admit.Never
	}
	return time.Duration(d.Int64())
}

// waitUntil is max(0, t-now) as a Duration.
func waitUntil(t *big.Int, now int64) time.Duration {
	d := bSub(t, bi(now))
	if d.Sign() < 0 {
		return 0
	}
	return duration(d)
}

// --- token bucket -----------------------------------------------------------

// refTokenBucket is GCRA in exact rationals: tat is the theoretical arrival
// time, the instant the bucket is full again, nil for a bucket that has always
// been full. At reading t the bucket holds L − max(0, tat − t)·L/W tokens: a
// stale reading (t before an admission already made) sees the debt it has at
// that reading, which may exceed a full bucket; it is denied more, never less.
type refTokenBucket struct {
	limit, window int64
	tat           *big.Rat
}

// debt is max(0, tat − t) in nanoseconds.
func (m *refTokenBucket) debt(t int64) *big.Rat {
	if m.tat == nil {
		return new(big.Rat)
	}
	d := new(big.Rat).Sub(m.tat, new(big.Rat).SetInt64(t))
	if d.Sign() < 0 {
		return new(big.Rat)
	}
	return d
}

// tokensAt is the bucket's content at reading t, negative when a stale reading
// sees more debt than a full bucket's worth.
func (m *refTokenBucket) tokensAt(t int64) *big.Rat {
	perNs := new(big.Rat).SetFrac(bi(m.limit), bi(m.window))
	return new(big.Rat).Sub(new(big.Rat).SetInt64(m.limit), new(big.Rat).Mul(m.debt(t), perNs))
}

// costOf is the time n tokens take to refill: n·W/L.
func (m *refTokenBucket) costOf(n int64) *big.Rat {
	return new(big.Rat).SetFrac(bMul(bi(n), bi(m.window)), bi(m.limit))
}

// resetAfter is the wait from now until the bucket is full: ceil(tat) − now.
func (m *refTokenBucket) resetAfter(now int64) time.Duration {
	if m.debt(now).Sign() == 0 {
		return 0
	}
	return waitUntil(ratCeil(m.tat), now)
}

func (m *refTokenBucket) Allow(now time.Duration, n int) admit.Decision {
	now = clampTime(now) // the kernels\' clock range: beyond it time stands still
	t := int64(now)
	d := admit.Decision{Limit: int(m.limit)}
	if n < 0 || int64(n) > m.limit {
		d.RetryAfter, d.ResetAfter = admit.Never, m.resetAfter(t)
		return d
	}
	tokens := m.tokensAt(t)
	left := new(big.Rat).Sub(tokens, new(big.Rat).SetInt64(int64(n)))
	if n > 0 && left.Sign() < 0 {
		// The bucket holds n tokens from the reading tat − (L−n)·W/L on.
		at := new(big.Rat).Sub(m.tat, m.costOf(m.limit-int64(n)))
		d.RetryAfter, d.ResetAfter = waitUntil(ratCeil(at), t), m.resetAfter(t)
		return d
	}
	if n > 0 {
		from := new(big.Rat).SetInt64(t)
		if m.tat != nil && m.tat.Cmp(from) > 0 {
			from = m.tat
		}
		m.tat = new(big.Rat).Add(from, m.costOf(int64(n)))
	}
	d.Allowed = true
	if left.Sign() > 0 {
		d.Remaining = int(ratFloor(left).Int64())
	}
	d.ResetAfter = m.resetAfter(t)
	return d
}

// --- fixed window -----------------------------------------------------------

// refFixedWindow keeps the count of every window it ever admitted in, by
// window index floor(t/W).
type refFixedWindow struct {
	limit, window int64
	counts        map[int64]int64
	admitted      bool
	newest        int64 // effective time of the newest admission
}

func (m *refFixedWindow) Allow(now time.Duration, n int) admit.Decision {
	now = clampTime(now) // the kernels\' clock range: beyond it time stands still
	eff := int64(now)
	if m.admitted && m.newest > eff {
		eff = m.newest
	}
	k := bFloorDiv(bi(eff), bi(m.window)).Int64()
	end := bMul(bAdd(bi(k), bi(1)), bi(m.window)) // (k+1)W, exactly
	resetAfter := func() time.Duration {
		if m.counts[k] == 0 {
			return 0
		}
		return waitUntil(end, int64(now))
	}
	d := admit.Decision{Limit: int(m.limit)}
	if n < 0 || int64(n) > m.limit {
		d.RetryAfter, d.ResetAfter = admit.Never, resetAfter()
		return d
	}
	if m.counts[k]+int64(n) > m.limit {
		// Every reading before the end of window k counts against window k;
		// the next window is empty and n <= Limit fits it.
		d.RetryAfter, d.ResetAfter = waitUntil(end, int64(now)), resetAfter()
		return d
	}
	if n > 0 {
		m.counts[k] += int64(n)
		m.admitted, m.newest = true, eff
	}
	d.Allowed = true
	d.Remaining = int(m.limit - m.counts[k])
	d.ResetAfter = resetAfter()
	return d
}

// --- sliding log ------------------------------------------------------------

// refSlidingLog keeps the effective time of every admission ever made, one
// entry per admitted request, and never forgets any.
type refSlidingLog struct {
	limit, window int64
	times         []int64
}

// live returns, in ascending order, the admissions that still count at
// effective time eff: those at t with eff-t < W (an entry expires at t+W).
func (m *refSlidingLog) live(eff int64) []int64 {
	var out []int64
	for _, t := range m.times {
		if bSub(bi(eff), bi(t)).Cmp(bi(m.window)) < 0 {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

func (m *refSlidingLog) Allow(now time.Duration, n int) admit.Decision {
	now = clampTime(now) // the kernels\' clock range: beyond it time stands still
	eff := int64(now)
	if len(m.times) > 0 {
		eff = max(eff, slices.Max(m.times))
	}
	live := m.live(eff)
	resetAfter := func(live []int64) time.Duration {
		if len(live) == 0 {
			return 0
		}
		return waitUntil(bAdd(bi(live[len(live)-1]), bi(m.window)), int64(now))
	}
	d := admit.Decision{Limit: int(m.limit)}
	if n < 0 || int64(n) > m.limit {
		d.RetryAfter, d.ResetAfter = admit.Never, resetAfter(live)
		return d
	}
	if excess := int64(len(live)) + int64(n) - m.limit; excess > 0 {
		// The excess oldest live entries must expire first; the last of them
		// expires at its time plus W.
		d.RetryAfter = waitUntil(bAdd(bi(live[excess-1]), bi(m.window)), int64(now))
		d.ResetAfter = resetAfter(live)
		return d
	}
	for range n {
		m.times = append(m.times, eff)
		live = append(live, eff)
	}
	d.Allowed = true
	d.Remaining = int(m.limit) - len(live)
	d.ResetAfter = resetAfter(live)
	return d
}

// --- sliding counter --------------------------------------------------------

// refSlidingCounter keeps the count of every window, by index floor(t/W), and
// decides with the weighted formula in exact integers:
//
//	prev×(W−elapsed) + (curr+n)×W <= Limit×W
//
// where curr is the count of the window holding the effective time, prev the
// count of the window before it and elapsed the time since the window began.
type refSlidingCounter struct {
	limit, window int64
	counts        map[int64]int64
	admitted      bool
	top           int64 // index of the newest window with an admission
}

// eff is the sliding counter's effective time of reading now: a reading in a
// window older than the newest one admitted in counts as the start of that
// newest window (the previous window then weighs fully); any other reading is
// taken as it is.
func (m *refSlidingCounter) eff(now int64) int64 {
	if m.admitted && bFloorDiv(bi(now), bi(m.window)).Int64() < m.top {
		return bMul(bi(m.top), bi(m.window)).Int64()
	}
	return now
}

// at returns, for effective time eff, the window index, the elapsed time in
// that window and the two counts.
func (m *refSlidingCounter) at(eff int64) (k, elapsed, prev, curr int64) {
	kb := bFloorDiv(bi(eff), bi(m.window))
	k = kb.Int64()
	elapsed = bSub(bi(eff), bMul(kb, bi(m.window))).Int64()
	return k, elapsed, m.counts[k-1], m.counts[k]
}

// fits reports whether n more pass at effective time eff.
func (m *refSlidingCounter) fits(eff int64, n int64) bool {
	_, el, prev, curr := m.at(eff)
	w := bi(m.window)
	lhs := bAdd(bMul(bi(prev), bSub(w, bi(el))), bMul(bi(curr+n), w))
	return lhs.Cmp(bMul(bi(m.limit), w)) <= 0
}

// resetAt is the time at which both counts in effect at eff have rolled out,
// or nil if they already have.
func (m *refSlidingCounter) resetAt(eff int64) *big.Int {
	k, _, prev, curr := m.at(eff)
	switch {
	case curr > 0:
		return bMul(bi(k+2), bi(m.window))
	case prev > 0:
		return bMul(bi(k+1), bi(m.window))
	}
	return nil
}

func (m *refSlidingCounter) Allow(now time.Duration, n int) admit.Decision {
	now = clampTime(now) // the kernels\' clock range: beyond it time stands still
	eff := m.eff(int64(now))
	resetAfter := func() time.Duration {
		if t := m.resetAt(eff); t != nil {
			return waitUntil(t, int64(now))
		}
		return 0
	}
	d := admit.Decision{Limit: int(m.limit)}
	if n < 0 || int64(n) > m.limit {
		d.RetryAfter, d.ResetAfter = admit.Never, resetAfter()
		return d
	}
	if n > 0 && !m.fits(eff, int64(n)) { // n == 0 is a free probe: always allowed
		// The estimate only falls as time passes (the previous window's weight
		// shrinks, then the windows roll), so the earliest reading at which the
		// request fits is found by bisection. Two windows after eff's window
		// began, both counts have rolled out and any n <= Limit fits.
		k, _, _, _ := m.at(eff)
		lo, hi := int64(now), bMul(bi(k+2), bi(m.window)).Int64() // fits(m.eff(lo)) is false, fits(m.eff(hi)) true
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if m.fits(m.eff(mid), int64(n)) {
				hi = mid
			} else {
				lo = mid
			}
		}
		d.RetryAfter, d.ResetAfter = time.Duration(hi-int64(now)), resetAfter()
		return d
	}
	if n > 0 {
		k, _, _, _ := m.at(eff)
		m.counts[k] += int64(n)
		m.admitted, m.top = true, k
	}
	// Remaining: the largest m with prev×(W−el) + (curr+m)×W <= Limit×W.
	_, el, prev, curr := m.at(eff)
	w := bi(m.window)
	room := bFloorDiv(bSub(bMul(bi(m.limit), w), bMul(bi(prev), bSub(w, bi(el)))), w)
	d.Allowed = true
	d.Remaining = int(max(0, bSub(room, bi(curr)).Int64())) // a probe at a stale reading may find none
	d.ResetAfter = resetAfter()
	return d
}

// --- step tables ------------------------------------------------------------

// step is one call in a scripted table: AllowN(n) at clock reading at, and the
// Decision it must return. want.Limit may be left 0: the runner fills it in.
type step struct {
	at   time.Duration
	n    int
	want admit.Decision
}

func allowed(remaining int, resetAfter time.Duration) admit.Decision {
	return admit.Decision{Allowed: true, Remaining: remaining, ResetAfter: resetAfter}
}

func denied(retryAfter, resetAfter time.Duration) admit.Decision {
	return admit.Decision{RetryAfter: retryAfter, ResetAfter: resetAfter}
}

// impossible is the decision for n < 0 or n > Limit.
func impossible(resetAfter time.Duration) admit.Decision {
	return admit.Decision{RetryAfter: admit.Never, ResetAfter: resetAfter}
}

func fmtDecision(d admit.Decision) string {
	retry := d.RetryAfter.String()
	if d.RetryAfter == admit.Never {
		retry = "Never"
	}
	return fmt.Sprintf("{Allowed:%t Limit:%d Remaining:%d RetryAfter:%s ResetAfter:%v}",
		d.Allowed, d.Limit, d.Remaining, retry, d.ResetAfter)
}

// runSteps runs steps in order against one fresh key under rule r, on the
// kernel and on the reference model, and checks both against the table. A
// denial, a probe and an impossible request must leave the state untouched.
func runSteps(t *testing.T, r admit.Rule, steps []step) subject {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatalf("rule %v: %v", r, err)
	}
	sub, ref := newSubject(r), newModel(r)
	for i, st := range steps {
		want := st.want
		if want.Limit == 0 {
			want.Limit = r.Limit
		}
		before := sub.State()
		got := sub.Allow(st.at, st.n)
		if got != want {
			t.Errorf("step %d: AllowN(t=%v, %d) = %s, want %s", i, st.at, st.n, fmtDecision(got), fmtDecision(want))
		}
		if !got.Allowed || st.n == 0 {
			if after := sub.State(); !equalState(before, after) {
				t.Errorf("step %d: AllowN(t=%v, %d) was not an admission but changed the state from %+v to %+v",
					i, st.at, st.n, before, after)
			}
		}
		if rd := ref.Allow(st.at, st.n); rd != want {
			t.Errorf("step %d: reference model AllowN(t=%v, %d) = %s, want %s", i, st.at, st.n, fmtDecision(rd), fmtDecision(want))
		}
	}
	return sub
}

// equalState compares two state snapshots field by field (slices by content).
func equalState(a, b any) bool {
	if la, ok := a.(Log); ok {
		lb := b.(Log)
		return la.head == lb.head && la.size == lb.size && (la.ts == nil) == (lb.ts == nil) && slices.Equal(la.ts, lb.ts)
	}
	return a == b
}

// at is a clock reading written in seconds and nanoseconds, for tables.
func at(sec int64, ns int64) time.Duration { return time.Duration(sec)*time.Second + time.Duration(ns) }

func rule(alg admit.Algorithm, limit int, window time.Duration) admit.Rule {
	return admit.Rule{Algorithm: alg, Limit: limit, Window: window}
}

var algorithms = []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter}

const maxInt64 = math.MaxInt64
