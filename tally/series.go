package tally

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/admit-go/admit/observe"
)

// series is the instrument of one set of labels: counters striped over
// cache lines, and a histogram when the Tally is timed.
type series struct {
	labels  observe.Labels // guarded by the Tally's mu
	stripes []stripe
	mask    uint32
	hist    *histogram // nil unless timed

	// salt moves every goroutine counting in this series to another stripe
	// when two of them met on one (see Observe). It changes only on such a
	// meeting, so it stays in every processor's cache, read, and costs a
	// count no write to shared memory. It has cache lines of its own: a
	// variable written beside it would make every count read it from
	// memory, and the fields above are read by every count.
	_    [cacheLine]byte
	salt atomic.Uint64
	_    [cacheLine - unsafe.Sizeof(atomic.Uint64{})]byte
}

// cacheLine is the size of a cache line on the processors admit runs on
// (amd64, arm64 servers): 64 bytes. The salt needs only that no other
// variable share its line, whatever the series' alignment: a line holding
// it holds only padding beside it. (The stripes pad to 128: processors
// fetch lines in pairs, and every count writes one.) TestSaltLine pins it.
const cacheLine = 64

// stripe is one cache line's share of a series' counters: each outcome's
// count, padded to 128 bytes (two lines: CPUs fetch lines in pairs).
type stripe struct {
	n [observe.NumOutcomes]atomic.Uint64
	_ [128 - 8*observe.NumOutcomes]byte
}

// stripeHint returns a number that stays the same for one goroutine from
// one call to the next and differs between goroutines: the address of a
// variable on the calling goroutine's stack (stacks of running goroutines
// never overlap), mixed with salt. A goroutine's stack may move when it
// grows, which only moves it to another stripe. It costs a multiplication,
// where asking a sync.Pool for a per-processor token cost two of its calls
// (about two thirds of a count's time, measured by BenchmarkObserve).
func stripeHint(salt uint64) uint32 {
	var anchor byte
	a := uint64(uintptr(unsafe.Pointer(&anchor)))
	return uint32(((a >> 4) ^ salt) * 0x9e3779b97f4a7c15 >> 32)
}

func (t *Tally) newSeries(l observe.Labels) *series {
	s := &series{labels: l, stripes: make([]stripe, t.stripes), mask: uint32(t.stripes - 1)}
	if t.cfg.timed {
		s.hist = newHistogram(t.cfg.bounds, t.stripes)
	}
	return s
}

// Observe implements [observe.Instrument]: it counts one decision of outcome
// o, and its latency when the series is timed. n is not counted: a series
// counts decisions, whatever number of requests each was about.
func (s *series) Observe(o observe.Outcome, n int, latency time.Duration) {
	if o == 0 || int(o) >= observe.NumOutcomes {
		return // not an outcome admit defines: counted nowhere
	}
	salt := s.salt.Load()
	i := stripeHint(salt) & s.mask
	c := &s.stripes[i].n[o]
	if v := c.Load(); !c.CompareAndSwap(v, v+1) {
		// Another goroutine, running at this instant, writes this stripe:
		// count, and move every goroutine of the series to another stripe,
		// so that the goroutines that run at once spread out again. The
		// salt moves from the value this call read, once: goroutines that
		// met on a stripe under the same salt move it one step, not one
		// each, and a salt another meeting moved already stays.
		c.Add(1)
		s.salt.CompareAndSwap(salt, salt+1)
	}
	if s.hist != nil {
		s.hist.observe(i, latency)
	}
}

// Timed implements [observe.Instrument]: true when the Tally was built with
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
