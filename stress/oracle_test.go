package stress

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/admit-go/admit"
)

// The oracles. Each check takes a recorded history and returns an error
// describing every violation it found (nil if none), never calling t.Fatal,
// so that the self-tests can assert that a broken limiter fails them.
//
//   - checkDecisions: every Decision is well formed (Limit, Remaining in
//     [0, Limit], RetryAfter 0 iff admitted, Never iff n is out of range;
//     for a composite, the Limit of one of its rules and Remaining at most
//     the smallest Limit).
//   - checkReplay (exact histories): per object and phase, the admitted
//     requests replayed into the sequential kernel at the phase's reading are
//     all admitted (no over-admission: under a frozen clock, admitted weight
//     never exceeds Limit); every denied request is also denied by the
//     kernel's end state (no lost budget); the smallest Remaining reported
//     by an admission equals the kernel's (no lost update); and a saturated
//     phase admitted exactly its budget (conservation).
//   - checkIntervals (every history): the interval bounds of docs/reliability.md
//     over the admitted requests' readings, allowing for each reading's
//     uncertainty [lo, hi]; for a composite, every rule's bound on its own.
//   - checkLinearizable (exact histories, in porcupine.go): the per-object
//     histories linearize against the kernel.

// maxReported bounds how many violations one check spells out.
const maxReported = 8

// violations collects the failures of one check.
type violations struct {
	check string
	msgs  []string
	count int
}

func (v *violations) addf(format string, args ...any) {
	v.count++
	if len(v.msgs) < maxReported {
		v.msgs = append(v.msgs, fmt.Sprintf(format, args...))
	}
}

func (v *violations) err() error {
	if v.count == 0 {
		return nil
	}
	more := ""
	if v.count > len(v.msgs) {
		more = fmt.Sprintf("\n\t… and %d more", v.count-len(v.msgs))
	}
	return fmt.Errorf("%s: %d violation(s):\n\t%s%s", v.check, v.count, strings.Join(v.msgs, "\n\t"), more)
}

// storeFull reports whether d is the full-store denial of a keyed store with
// WithMaxKeys: a request that would fit a fresh key (1 <= n <= Limit), denied
// with a finite RetryAfter and a ResetAfter of 0. A kernel never denies such
// a request with ResetAfter 0: a state it denies n <= Limit is not fresh.
func storeFull(n int, d admit.Decision) bool {
	return !d.Allowed && n >= 1 && n <= d.Limit && d.ResetAfter == 0 && d.RetryAfter != admit.Never
}

// byObject groups the ops of h by oracle object, keeping their order.
func byObject(h *history) (map[string][]op, []string) {
	m := map[string][]op{}
	var keys []string
	for _, o := range h.ops {
		if _, ok := m[o.key]; !ok {
			keys = append(keys, o.key)
		}
		m[o.key] = append(m[o.key], o)
	}
	slices.Sort(keys)
	return m, keys
}

// checkDecisions checks that every Decision is well formed.
func checkDecisions(h *history, s subject) error {
	v := &violations{check: "decisions"}
	for _, o := range h.ops {
		_, sp, ok := s.classify(o.key, o.d)
		if !ok {
			v.addf("%s: %s: a Decision with Limit %d, which no rule of the subject has", o.key, describe(o), o.d.Limit)
			continue
		}
		ls := sp.limits()
		l := ls.Limit()
		d := o.d
		switch {
		case !hasLimit(ls, d.Limit):
			v.addf("%s: %s: Limit %d, want %s", o.key, describe(o), d.Limit, wantLimit(ls))
		case d.Remaining < 0 || d.Remaining > l:
			v.addf("%s: %s: Remaining outside [0, %d]", o.key, describe(o), l)
		case d.ResetAfter < 0:
			v.addf("%s: %s: negative ResetAfter", o.key, describe(o))
		case o.n < 0 || o.n > l:
			if d.Allowed || d.RetryAfter != admit.Never {
				v.addf("%s: %s: want a denial with RetryAfter Never for n outside [0, %d]", o.key, describe(o), l)
			}
		case o.n == 0:
			if !d.Allowed {
				v.addf("%s: %s: a probe (n == 0) is always allowed", o.key, describe(o))
			}
		case d.Allowed:
			if d.RetryAfter != 0 {
				v.addf("%s: %s: an admission with RetryAfter != 0", o.key, describe(o))
			}
		default:
			if d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter == admit.Never {
				v.addf("%s: %s: a denial of %d <= Limit wants Remaining 0 and 0 < RetryAfter < Never", o.key, describe(o), o.n)
			}
			if storeFull(o.n, d) && s.maxKeys == 0 {
				v.addf("%s: %s: a full-store denial from a store without WithMaxKeys", o.key, describe(o))
			}
		}
	}
	return v.err()
}

// hasLimit reports whether limit is the Limit of one of ls's rules: the
// Limit a Decision of ls may carry (a composite's Decision carries the
// Limit of the rule that bound it).
func hasLimit(ls admit.Limits, limit int) bool {
	for i := range ls.Len() {
		if ls.At(i).Limit == limit {
			return true
		}
	}
	return false
}

// wantLimit spells out the Limits a Decision of ls may carry.
func wantLimit(ls admit.Limits) string {
	if ls.Len() == 1 {
		return fmt.Sprint(ls.At(0).Limit)
	}
	var b strings.Builder
	b.WriteString("the Limit of one of its rules (")
	for i := range ls.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, ls.At(i).Limit)
	}
	b.WriteString(")")
	return b.String()
}

// replayStats summarises what checkReplay saw.
type replayStats struct {
	objects   int
	saturated int   // (object, phase) pairs whose budget ran out to the last unit
	admitted  int64 // total admitted weight
	storeFull int   // full-store denials
}

// checkReplay is the exact oracle for histories whose phases each ran on a
// frozen clock: see the file comment. It needs h.exact.
func checkReplay(h *history, s subject) (replayStats, error) {
	v := &violations{check: "replay (frozen-clock phases against the sequential kernel)"}
	var st replayStats
	if !h.exact {
		return st, errors.New("checkReplay: the history has stale or moving readings")
	}
	objs, keys := byObject(h)
	st.objects = len(keys)
	for _, key := range keys {
		ops := objs[key]
		_, sp, ok := s.classify(key, ops[0].d)
		if !ok {
			continue // checkDecisions reports it
		}
		byPhase := make([][]op, len(h.phaseAt))
		for _, o := range ops {
			byPhase[o.phase] = append(byPhase[o.phase], o)
		}
		state := sp.init()
	phases:
		for p, pops := range byPhase {
			if len(pops) == 0 {
				continue
			}
			t := h.phaseAt[p]
			probe, _ := sp.step(state, t, 0)
			budget := probe.Remaining
			var admitted int64
			minRemaining := -1
			for _, o := range pops {
				if o.n == 0 && o.d.Allowed && o.d.Remaining > budget {
					v.addf("%s phase %d (t=%v): a probe reported Remaining %d, more than the %d the phase started with",
						key, p, t, o.d.Remaining, budget)
				}
				if !o.d.Allowed || o.n <= 0 {
					continue
				}
				d, next := sp.step(state, t, o.n)
				if !d.Allowed {
					v.addf("%s phase %d (t=%v): over-admission: the limiter admitted %d more after %d of a budget of %d; the sequential kernel denies it",
						key, p, t, o.n, admitted, budget)
					continue phases
				}
				state = next
				admitted += int64(o.n)
				if minRemaining < 0 || o.d.Remaining < minRemaining {
					minRemaining = o.d.Remaining
				}
			}
			st.admitted += admitted
			end, _ := sp.step(state, t, 0)
			if minRemaining >= 0 && minRemaining != end.Remaining {
				v.addf("%s phase %d (t=%v): lost update: the last admission reported Remaining %d, but after the %d admitted the kernel has %d left",
					key, p, t, minRemaining, admitted, end.Remaining)
			}
			saturated := false
			for _, o := range pops {
				if o.d.Allowed || o.n < 1 || o.n > sp.limits().Limit() {
					continue
				}
				if storeFull(o.n, o.d) && s.maxKeys > 0 {
					st.storeFull++
					continue
				}
				if d, _ := sp.step(state, t, o.n); d.Allowed {
					v.addf("%s phase %d (t=%v): budget lost: AllowN(%d) was denied (%+v), but the kernel admits it even after all %d admitted",
						key, p, t, o.n, o.d, admitted)
				}
				if o.n == 1 {
					saturated = true
				}
			}
			if saturated {
				st.saturated++
				if admitted != int64(budget) {
					v.addf("%s phase %d (t=%v): conservation: demand exceeded supply, so admitted weight must equal the budget %d; it is %d",
						key, p, t, budget, admitted)
				}
			}
		}
	}
	return st, v.err()
}

// interval is an admitted request of weight n whose reading lies in [lo, hi].
type interval struct {
	lo, hi time.Duration
	n      int64
}

// intervalStats summarises what checkIntervals saw.
type intervalStats struct {
	admissions int
	dropped    int // admissions whose reading was too uncertain to place
}

// checkIntervals checks the interval bounds of docs/reliability.md on the
// admitted requests of every object. A request's reading is only known to
// lie in [lo, hi]; the checks are sound for every placement of the readings
// within their bounds (they only count requests whose placement cannot
// matter), and requests with hi-lo > slack are left out (leaving requests
// out can only hide an excess, never invent one).
//
//   - token bucket: for requests with lo in [a, b], Σn·W <= L·W + (b-a+slack)·L,
//     the bound "admitted <= L + floor(d·L/W) over any span d of readings"
//     widened by the slack;
//   - fixed window and sliding counter: for requests whose [lo, hi] lies in
//     one window [kW, (k+1)W), Σn <= L (the window's effective index is
//     between those of lo and hi, whichever reading the limiter used);
//     and in any span of length W, Σn <= 2L;
//   - sliding log: for requests with lo in [a, a+W-1-slack], so that every
//     effective time is in [a, a+W-1], Σn <= L.
//
// An object under a composite (admit.Limits) is held to each of its rules'
// bounds in turn, over all of its admissions: every admission charged every
// rule, so none of the rules may have let through more than its own bound.
func checkIntervals(h *history, s subject, slack time.Duration) (intervalStats, error) {
	v := &violations{check: "interval bounds (docs/reliability.md)"}
	var st intervalStats
	objs, keys := byObject(h)
	for _, key := range keys {
		ops := objs[key]
		_, sp, ok := s.classify(key, ops[0].d)
		if !ok {
			continue
		}
		var ivs []interval
		for _, o := range ops {
			if !o.d.Allowed || o.n <= 0 {
				continue
			}
			st.admissions++
			if o.hi-o.lo > slack {
				st.dropped++
				continue
			}
			ivs = append(ivs, interval{lo: o.lo, hi: o.hi, n: int64(o.n)})
		}
		slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.lo, b.lo) })
		// A composite charges every rule with every admission, so each
		// rule's bound holds over all of them, on its own.
		ls := sp.limits()
		for i := range ls.Len() {
			r, name := ls.At(i), key
			if ls.Len() > 1 {
				name = fmt.Sprintf("%s, rule %d of %d", key, i+1, ls.Len())
			}
			switch r.Algorithm {
			case admit.TokenBucket:
				tokenBucketBound(v, name, r, ivs, slack)
			case admit.FixedWindow, admit.SlidingCounter:
				alignedBound(v, name, r, ivs)
				spanBound(v, name, r, ivs, slack, 2*int64(r.Limit), "any span of one window admits at most 2×Limit")
			case admit.SlidingLog:
				spanBound(v, name, r, ivs, slack, int64(r.Limit), "any span of one window admits at most Limit")
			}
		}
	}
	return st, v.err()
}

// tokenBucketBound checks max over a <= b of Σ_{lo in [a,b]} n·W − (b−a)·L
// <= L·W + slack·L with one prefix/minimum scan, in exact big integers.
func tokenBucketBound(v *violations, key string, r admit.Rule, ivs []interval, slack time.Duration) {
	if len(ivs) == 0 {
		return
	}
	W, L := big.NewInt(int64(r.Window)), big.NewInt(int64(r.Limit))
	bound := new(big.Int).Mul(L, W)
	bound.Add(bound, new(big.Int).Mul(big.NewInt(int64(slack)), L))
	var (
		prefix = new(big.Int) // Σ n·W over ivs[:j]
		best   *big.Int       // min over i <= j of prefix_i − lo_i·L
		bestAt int
		tmp    = new(big.Int)
		val    = new(big.Int)
	)
	for j, iv := range ivs {
		// candidate start i = j: prefix_j − lo_j·L
		tmp.Mul(big.NewInt(int64(iv.lo)), L)
		start := new(big.Int).Sub(prefix, tmp)
		if best == nil || start.Cmp(best) < 0 {
			best, bestAt = start, j
		}
		prefix.Add(prefix, tmp.Mul(big.NewInt(iv.n), W))
		// value of [best .. j]: prefix_{j+1} − lo_j·L − best
		val.Mul(big.NewInt(int64(iv.lo)), L)
		val.Sub(prefix, val)
		val.Sub(val, best)
		if val.Cmp(bound) > 0 {
			var sum int64
			for _, x := range ivs[bestAt : j+1] {
				sum += x.n
			}
			span := iv.lo - ivs[bestAt].lo
			v.addf("%s: token bucket %v admitted %d with readings in [%v, %v] (span %v, slack %v); the bound is %d + floor(%v·%d/%v)",
				key, r, sum, ivs[bestAt].lo, iv.hi, span, slack, r.Limit, span+slack, r.Limit, r.Window)
			return // one report per object
		}
	}
}

// floorDiv is floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// alignedBound checks that the requests certainly in one aligned window
// [kW, (k+1)W) admitted at most L.
func alignedBound(v *violations, key string, r admit.Rule, ivs []interval) {
	w := int64(r.Window)
	sums := map[int64]int64{}
	for _, iv := range ivs {
		k := floorDiv(int64(iv.lo), w)
		if floorDiv(int64(iv.hi), w) != k {
			continue // straddles a boundary: either window could hold it
		}
		sums[k] += iv.n
	}
	for k, sum := range sums {
		if sum > int64(r.Limit) {
			v.addf("%s: %v admitted %d in the window [%v, %v), more than its Limit", key, r, sum, time.Duration(k*w), time.Duration((k+1)*w))
		}
	}
}

// spanBound checks that the requests with lo in any [a, a+W-1-slack] (so
// with every reading in [a, a+W-1]) admitted at most limit, by two pointers
// over ivs sorted by lo.
func spanBound(v *violations, key string, r admit.Rule, ivs []interval, slack time.Duration, limit int64, what string) {
	width := r.Window - 1 - slack
	if width < 0 {
		return // too uncertain to say anything
	}
	var sum int64
	i := 0
	for j, iv := range ivs {
		sum += iv.n
		for ivs[i].lo < iv.lo-width {
			sum -= ivs[i].n
			i++
		}
		if sum > limit {
			v.addf("%s: %v admitted %d with readings in [%v, %v]: %s (%d)", key, r, sum, ivs[i].lo, ivs[j].hi, what, limit)
			return
		}
	}
}

// describe spells out one recorded call.
func describe(o op) string {
	return fmt.Sprintf("client %d phase %d AllowN(%d) at [%v, %v] = %+v", o.client, o.phase, o.n, o.lo, o.hi, o.d)
}
