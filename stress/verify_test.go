package stress

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-go/admit/internal/hook"
)

// verifyOptions says which oracles verify runs and how.
type verifyOptions struct {
	// porcupineTimeout bounds the linearizability check of one history;
	// 0 skips it.
	porcupineTimeout time.Duration
	// vizDir is where a failing history's visualization goes ("" for
	// os.TempDir(), "-" for nowhere).
	vizDir string
	// requireSaturation makes an exact history in which no budget ran out
	// an error: the workload would then have checked conservation nowhere.
	requireSaturation bool
}

// report is what verify found.
type report struct {
	h         *history
	replay    replayStats
	intervals intervalStats
	lin       linStats
	errs      []error
}

func (r *report) err() error { return errors.Join(r.errs...) }

// caughtBy names the checks that failed, for the self-tests' logs.
func (r *report) caughtBy() string {
	var names []string
	for _, e := range r.errs {
		name, _, _ := strings.Cut(e.Error(), ":")
		names = append(names, name)
	}
	return strings.Join(names, "; ")
}

func (r *report) String() string {
	h := r.h
	s := fmt.Sprintf("%d phases, %d ops by %d goroutines, %d objects, %d admissions (%d unplaced), %v",
		h.stats.phases, h.stats.ops, h.clients, r.replay.objects, r.intervals.admissions, r.intervals.dropped, h.stats.elapsed.Round(time.Millisecond))
	if h.exact {
		s += fmt.Sprintf("; replay: %d saturated phases, %d admitted weight, %d full-store denials; porcupine: %d objects, %d ops, %v",
			r.replay.saturated, r.replay.admitted, r.replay.storeFull, r.lin.objects, r.lin.ops, r.lin.elapsed.Round(time.Millisecond))
	}
	s += fmt.Sprintf("; widening: %d hook yields, %d stale readings, %d ticks", h.stats.yields, h.stats.staleReads, h.stats.ticks)
	if h.stats.sweeps > 0 || h.stats.reloads > 0 {
		s += fmt.Sprintf("; background: %d sweeps evicting %d keys, %d reloads", h.stats.sweeps, h.stats.evicted, h.stats.reloads)
	}
	return s
}

// verify runs every oracle that applies to h.
func verify(h *history, s subject, o verifyOptions) *report {
	r := &report{h: h}
	add := func(err error) {
		if err != nil {
			r.errs = append(r.errs, err)
		}
	}
	add(checkDecisions(h, s))
	var err error
	r.intervals, err = checkIntervals(h, s, h.lagMax+maxCallSpan(h))
	add(err)
	if h.exact {
		r.replay, err = checkReplay(h, s)
		add(err)
		if err == nil && o.requireSaturation && r.replay.saturated == 0 {
			add(errors.New("harness: no budget ran out in any phase, so conservation was checked nowhere; raise the demand"))
		}
		if o.porcupineTimeout > 0 {
			r.lin, err = checkLinearizable(h, s, o.porcupineTimeout, o.vizDir)
			add(err)
		}
	}
	return r
}

// maxCallSpan is the slack the interval bounds allow for the clock moving
// during a call (ticking mode): the largest hi-lo among the calls, capped
// so that the window checks keep some power. Calls beyond the cap are left
// out of the bounds, which is sound.
func maxCallSpan(h *history) time.Duration {
	if h.exact {
		return 0
	}
	var spans []time.Duration
	for _, o := range h.ops {
		spans = append(spans, o.hi-o.lo-h.lagMax)
	}
	if len(spans) == 0 {
		return 0
	}
	// the 99th percentile: a descheduled call or two must not blunt the
	// check for all.
	p := quantile(spans, 0.99)
	return max(p, 0)
}

// quantile returns the q-quantile of xs, which it sorts.
func quantile(xs []time.Duration, q float64) time.Duration {
	slices.Sort(xs)
	return xs[int(q*float64(len(xs)-1))]
}

// rerun returns the command that replays t's operation sequences (the
// schedule, of course, is the machine's).
func rerun(t testing.TB) string {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	tags, short := "", ""
	if hook.Enabled {
		tags = " -tags admitstress"
	}
	if testing.Short() {
		short = " -short"
	}
	return fmt.Sprintf("go test -race%s%s ./stress -run '%s' -cpu %d -stress.seed=%d",
		tags, short, strings.Join(parts, "/"), runtime.GOMAXPROCS(0), baseSeed)
}

// runAndVerify runs w on the subject build makes, verifies the history and
// fails t with the report's errors.
func runAndVerify(t *testing.T, w *workload, o verifyOptions, build func(*stressClock) subject) *report {
	t.Helper()
	seed := seedFor(t)
	h, s := run(w, seed, build)
	rep := verify(h, s, o)
	t.Logf("%s: seed %d: %v", w.name, seed, rep)
	if err := rep.err(); err != nil {
		t.Errorf("%s on %s: FAILED (seed %d; rerun with %s):\n%v", w.name, s.name, seed, rerun(t), err)
	}
	return rep
}
