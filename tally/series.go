package tally

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
)

// series is the instrument of one set of labels: counters striped over
// cache lines, and a histogram when the Tally is timed.
type series struct {
	labels  admit.Labels // guarded by the Tally's mu
	stripes []stripe
	mask    uint32
	hist    *histogram // nil unless timed
}

// stripe is one cache line's share of a series' counters: each outcome's
// count, padded to 128 bytes (two lines: CPUs fetch lines in pairs).
type stripe struct {
	n [admit.NumOutcomes]atomic.Uint64
	_ [128 - 8*admit.NumOutcomes]byte
}

// token remembers the stripe a goroutine used last. Tokens live in a
// sync.Pool, whose fast path hands each processor back the token it put,
// so that goroutines on one processor keep to one stripe and goroutines on
// others to theirs.
type token struct {
	idx uint32
	_   [60]byte // a token per cache line, as tokens are written
}

var tokens sync.Pool

// seed hands out the first stripe of a new token, spreading tokens over the
// stripes.
var seed atomic.Uint32

func (t *Tally) newSeries(l admit.Labels) *series {
	s := &series{labels: l, stripes: make([]stripe, t.stripes), mask: uint32(t.stripes - 1)}
	if t.cfg.timed {
		s.hist = newHistogram(t.cfg.bounds, t.stripes)
	}
	return s
}

// Observe implements [admit.Instrument]: it counts one decision of outcome
// o, and its latency when the series is timed. n is not counted: a series
// counts decisions, whatever number of requests each was about.
func (s *series) Observe(o admit.Outcome, n int, latency time.Duration) {
	if o == 0 || int(o) >= admit.NumOutcomes {
		return // not an outcome admit defines: counted nowhere
	}
	tk, _ := tokens.Get().(*token)
	if tk == nil {
		tk = &token{idx: seed.Add(0x9e3779b9)}
	}
	i := tk.idx & s.mask
	c := &s.stripes[i].n[o]
	if v := c.Load(); !c.CompareAndSwap(v, v+1) {
		// Another processor writes this stripe: count, and move this
		// token to another stripe for next time.
		c.Add(1)
		tk.idx = tk.idx*0x2545f491 + 0x9e3779b9
	}
	if s.hist != nil {
		s.hist.observe(i, latency)
	}
	tokens.Put(tk)
}

// Timed implements [admit.Instrument]: true when the Tally was built with
// WithLatency.
func (s *series) Timed() bool { return s.hist != nil }

// histogram is a latency histogram striped as the counters are.
type histogram struct {
	bounds  []time.Duration
	stripes []histStripe
}

// histStripe is one stripe of a histogram: words[:len(bounds)+1] count the
// buckets, words[len(bounds)+1] sums the latencies in nanoseconds (as an
// int64's bits), and padding follows, so that stripes, each allocated on
// its own, do not share cache lines.
type histStripe struct {
	words []atomic.Uint64
}

func newHistogram(bounds []time.Duration, stripes int) *histogram {
	h := &histogram{bounds: bounds, stripes: make([]histStripe, stripes)}
	for i := range h.stripes {
		h.stripes[i].words = make([]atomic.Uint64, len(bounds)+2+16)
	}
	return h
}

// observe counts latency d in stripe i.
func (h *histogram) observe(i uint32, d time.Duration) {
	b := 0
	for b < len(h.bounds) && d > h.bounds[b] {
		b++
	}
	w := h.stripes[i].words
	w[b].Add(1)
	w[len(h.bounds)+1].Add(uint64(d))
}

// read sums the stripes.
func (h *histogram) read() *Histogram {
	out := &Histogram{Bounds: h.bounds, Counts: make([]uint64, len(h.bounds)+1)}
	for i := range h.stripes {
		w := h.stripes[i].words
		for b := range out.Counts {
			c := w[b].Load()
			out.Counts[b] += c
			out.Count += c
		}
		out.Sum += time.Duration(int64(w[len(h.bounds)+1].Load()))
	}
	return out
}
