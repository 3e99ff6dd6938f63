package stress

import (
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/admit-go/admit"
)

// TestSelfTest runs the harness against the broken limiters of broken_test.go
// and requires that it FAILS on each, through the oracle named in want, within
// a bounded number of trials (each a full workload with its own seed). A
// harness that has never caught a bug proves nothing (docs/reliability.md).
//
// The broken limiters are test code, so they reach the harness's yield
// function directly (between), in every build; the library's variants reach
// the same function through internal/hook only when built with -tags
// admitstress. The log says how many trials and how long each catch took.
func TestSelfTest(t *testing.T) {
	trials := budget{full: 20, short: 8}.get()
	if *trialsFlag > 0 {
		trials = *trialsFlag
	}
	tb := manyRules[0].rule // token-bucket,8,80ms: a token every 10ms
	hotTB := hotRules[0].rule
	fw := hotRules[2].rule
	cases := []struct {
		name  string
		want  string // the check that must fail
		w     func() *workload
		opts  func(t *testing.T) verifyOptions
		build func(clk *stressClock) subject
		// after, when set, checks more of the failing report
		after func(t *testing.T, rep *report)
	}{
		{
			name: "lost-update/replay",
			want: "replay",
			w:    func() *workload { return hotKeyWorkload(hotTB) },
			opts: func(*testing.T) verifyOptions { return verifyOptions{} },
			build: func(clk *stressClock) subject {
				l := newLostUpdateTB(hotTB, clk)
				return subject{name: "lostUpdateTB", allow: func(_ string, n int) admit.Decision { return l.AllowN(n) }, classify: classifyOne(newSpec(hotTB))}
			},
		},
		{
			name: "lost-update/porcupine",
			want: "linearizability",
			w:    func() *workload { return hotKeyWorkload(hotTB) },
			opts: func(t *testing.T) verifyOptions {
				return verifyOptions{porcupineTimeout: porcupineTimeout(), vizDir: t.TempDir()}
			},
			build: func(clk *stressClock) subject {
				l := newLostUpdateTB(hotTB, clk)
				return subject{name: "lostUpdateTB", allow: func(_ string, n int) admit.Decision { return l.AllowN(n) }, classify: classifyOne(newSpec(hotTB))}
			},
			after: func(t *testing.T, rep *report) {
				if rep.lin.vizPath == "" {
					t.Errorf("no porcupine visualization was written")
					return
				}
				if fi, err := os.Stat(rep.lin.vizPath); err != nil || fi.Size() == 0 {
					t.Errorf("visualization %s: %v (size %d)", rep.lin.vizPath, err, fi.Size())
				}
			},
		},
		{
			name: "stale-window-reset/intervals",
			want: "interval bounds",
			w:    func() *workload { return staleWorkload(fw, false, 1) },
			opts: func(*testing.T) verifyOptions { return verifyOptions{} },
			build: func(clk *stressClock) subject {
				l := newNoClampFW(fw, clk)
				return subject{name: "noClampFW", allow: func(_ string, n int) admit.Decision { return l.AllowN(n) }, classify: classifyOne(newSpec(fw))}
			},
		},
		{
			name: "naive-sweeper/replay+porcupine",
			want: "replay",
			opts: func(*testing.T) verifyOptions {
				return verifyOptions{porcupineTimeout: porcupineTimeout(), vizDir: "-"}
			},
			build: nil, // set below: it needs the workload's subject pointer
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				s     subject
				w     *workload
				build = c.build
			)
			if c.w != nil {
				w = c.w()
			} else { // the naive sweeper: the eviction workload, sweeping s
				w = evictionWorkload(tb, &s, budget{full: 96, short: 72}.get())
				build = func(clk *stressClock) subject {
					st := newNaiveStore(tb, clk)
					s = subject{name: "naiveStore", allow: st.AllowN, sweep: st.Sweep, classify: classifyOne(newSpec(tb))}
					return s
				}
			}
			began := time.Now()
			base := seedFor(t)
			for trial := range trials {
				seed := mix64(base + uint64(trial))
				h, sub := run(w, seed, build)
				rep := verify(h, sub, c.opts(t))
				if rep.err() == nil {
					t.Logf("trial %d (seed %d): not caught: %v", trial, seed, rep)
					continue
				}
				t.Logf("CAUGHT %s in trial %d of %d (seed %d), %v after the start, by: %s\n%v",
					sub.name, trial+1, trials, seed, time.Since(began).Round(time.Millisecond), rep.caughtBy(), rep.err())
				if !strings.Contains(rep.caughtBy(), c.want) {
					t.Errorf("caught by %q, but not by the %q check this case exercises", rep.caughtBy(), c.want)
				}
				if c.after != nil {
					c.after(t, rep)
				}
				return
			}
			t.Errorf("the harness did not catch the broken limiter in %d trials (%v): it cannot be trusted to catch this bug in the variants",
				trials, time.Since(began).Round(time.Millisecond))
		})
	}
	t.Run("goroutine-leak", func(t *testing.T) {
		// goleak, which TestMain runs over the whole package, must see a
		// goroutine that outlives its test.
		opt := goleak.IgnoreCurrent()
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-release
		}()
		err := goleak.Find(opt)
		close(release)
		<-done
		if err == nil {
			t.Errorf("goleak did not see a goroutine blocked on a channel")
		} else {
			t.Logf("CAUGHT the leaked goroutine: %v", strings.SplitN(err.Error(), "\n", 2)[0])
		}
	})
}
