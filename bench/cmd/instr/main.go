// Command instr counts the instructions one serial Allow executes, for admit's
// one-key limiters and the best-known peers, under valgrind's callgrind.
// Instruction counts do not depend on the machine's load or clock speed, so
// they compare implementations where nanoseconds on a shared 2-core machine
// are noisy.
//
// The clock is taken out of the count: valgrind turns the vDSO clock read into
// a system call, so every limiter here reads a step clock instead (a plain
// field advanced 1µs per reading, never a system call), and the instructions
// of a loop that only reads that same clock through the same interface are
// subtracted (the "net" column). The "-sysclock" rows run the limiters on
// the real clock, each library's default, and subtract a loop that reads the
// real clock the same way (time.Since of an origin for admit's
// clock.System(), time.Now() for the peers): the system call's kernel
// instructions are counted in neither, its user-space ones in both, so their
// net is what a limiter adds to one clock read, the dispatch to the clock
// included.
//
// Each measurement runs the limiter twice under callgrind, for N1 and N2
// calls, collecting only inside the measured loop (--toggle-collect), and
// divides the difference by N2-N1, so start-up and the loop's entry cancel out.
//
//	go build -o /tmp/instr ./cmd/instr && /tmp/instr measure -o results/instr.txt
//
// "instr run -impl NAME -n N" is what callgrind runs.
//
// measure then counts the instructions of a keyed decision, Allow(key) on an
// existing key, of admit's keyed stores and go-limiter on 100,000 primed
// keys (instr.txt's lines that start with "keyed"), and "instr cache"
// simulates the cache misses of the same decisions on 1,000,000 keys
// (make bench-cache, results/cache.txt); keyed.go has how.
//
//	/tmp/instr cache -o results/cache.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/juju/ratelimit"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/tally"
)

// step is the time a step clock advances per reading.
const step = time.Microsecond

// durClock is a step clock for admit (a clock.Clock).
type durClock struct{ t time.Duration }

func (c *durClock) Now() time.Duration { c.t += step; return c.t }

// timeClock is a step clock for the peers that take one (uber's and juju's
// Clock interfaces: Now and Sleep).
type timeClock struct{ t time.Time }

func (c *timeClock) Now() time.Time      { c.t = c.t.Add(step); return c.t }
func (c *timeClock) Sleep(time.Duration) {}

// limiter is what the measured loop calls: one dynamic call per Allow, as in
// the benchmarks.
type limiter interface{ Allow() admit.Decision }

// baseline names the clock-only loop whose count is subtracted from an impl's.
type baseline string

const (
	viaClock     baseline = "base-clock"     // admit: a clock.Clock read through its interface
	viaTimeClock baseline = "base-timeclock" // uber, juju: a Now() time.Time read through an interface
	viaTimeAdd   baseline = "base-timeadd"   // x/time/rate: the caller advances a time.Time and passes it
	viaNothing   baseline = "base-call"      // the floor: the loop and the dynamic call alone
	viaSince     baseline = "base-since"     // admit on clock.System(): time.Since of a fixed origin, the real clock
	viaNow       baseline = "base-now"       // peers on their default clock: time.Now(), the real clock
)

type impl struct {
	name, algo string
	base       baseline
	note       string
	new        func() limiter
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The rules and rates are the benchmarks' Admit mode: 10^6 per millisecond,
// burst 10^6, so every call is admitted.
var (
	tbRule = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Millisecond}
	fwRule = admit.Rule{Algorithm: admit.FixedWindow, Limit: 1_000_000_000, Window: time.Second}
	scRule = admit.Rule{Algorithm: admit.SlidingCounter, Limit: 15, Window: 128 * time.Nanosecond} // packs: Limit < 2^16, Window >= 2^(2·4−1) ns
	slRule = admit.Rule{Algorithm: admit.SlidingLog, Limit: 4096, Window: time.Millisecond}
	// scaledRule's emission interval, 1000/999,999 ns, is not whole
	// nanoseconds: its word is kept in units of 1/999,999 ns (L' = 999,999).
	scaledRule = admit.Rule{Algorithm: admit.TokenBucket, Limit: 999_999, Window: time.Millisecond}
)

func withStep() admit.Option { return admit.WithClock(new(durClock)) }

var impls = []impl{
	{"atomic-packed", "token-bucket", viaClock, "admitatomic.NewTokenBucket", func() limiter {
		return must(admitatomic.NewTokenBucket(tbRule, withStep()))
	}},
	{"atomic-packed-scaled", "token-bucket", viaClock, "admitatomic.NewTokenBucket, 999,999 per ms: the word in units of 1/999,999 ns", func() limiter {
		return must(admitatomic.NewTokenBucket(scaledRule, withStep()))
	}},
	{"atomic-snapshot", "token-bucket", viaClock, "admitatomic.NewTokenBucketSnapshot (allocates 16 B per admission)", func() limiter {
		return must(admitatomic.NewTokenBucketSnapshot(tbRule, withStep()))
	}},
	{"locked", "token-bucket", viaClock, "locked.NewLimiter", func() limiter {
		return must(locked.NewLimiter(tbRule, withStep()))
	}},
	{"atomic-packed", "fixed-window", viaClock, "admitatomic.NewFixedWindow", func() limiter {
		return must(admitatomic.NewFixedWindow(fwRule, withStep()))
	}},
	{"locked", "fixed-window", viaClock, "locked.NewLimiter", func() limiter {
		return must(locked.NewLimiter(fwRule, withStep()))
	}},
	{"atomic-packed", "sliding-counter", viaClock, "admitatomic.NewLimiter, a rule that packs", func() limiter {
		return must(admitatomic.NewLimiter(scRule, withStep()))
	}},
	{"locked", "sliding-counter", viaClock, "locked.NewLimiter", func() limiter {
		return must(locked.NewLimiter(scRule, withStep()))
	}},
	{"locked", "sliding-log", viaClock, "locked.NewLimiter", func() limiter {
		return must(locked.NewLimiter(slRule, withStep()))
	}},
	{"xtime-rate", "token-bucket", viaTimeAdd, "rate.Limiter.AllowN(t, 1), t advanced by the caller", func() limiter {
		return &xtimeAt{l: rate.NewLimiter(1e9, 1_000_000), t: time.Unix(1, 0)}
	}},
	{"uber-ratelimit-nowait", "token-bucket", viaTimeClock, "ratelimit.New(10^6, Per(1ms), WithClock(step)).Take, never waits", func() limiter {
		return uberTake{uber.New(1_000_000, uber.Per(time.Millisecond), uber.WithClock(&timeClock{t: time.Unix(1, 0)}))}
	}},
	{"juju-ratelimit", "token-bucket", viaTimeClock, "NewBucketWithRateAndClock(1e9, 1e6, step).TakeAvailable(1)", func() limiter {
		return juju{ratelimit.NewBucketWithRateAndClock(1e9, 1_000_000, &timeClock{t: time.Unix(1, 0)})}
	}},
	{"floor-cas", "-", viaNothing, "one Load and one CompareAndSwap, no clock", func() limiter { return new(casFloor) }},
	// What observing costs a Service's Check: the same Check of one pair
	// (policy.NewService's default store) without an observer and with a
	// tally.Tally, the counting every exporter reads.
	{"policy-check", "token-bucket", viaClock, "policy.Service.Check of one pair, no observer", func() limiter {
		return newCheck(nil)
	}},
	{"policy-check-tally", "token-bucket", viaClock, "policy.Service.Check of one pair, policy.WithObserver(tally.New())", func() limiter {
		return newCheck(must(tally.New()))
	}},
	// The same limiters on the real clock, each library's default: admit's
	// clock.System() (time.Since of an origin), time.Now() for the peers. Under
	// valgrind the clock read is a system call whose kernel instructions
	// callgrind does not count; its user-space instructions are the same in
	// the impl and in its baseline, which reads the same clock the same way,
	// so net is what the limiter adds to one clock read.
	{"atomic-packed-sysclock", "token-bucket", viaSince, "admitatomic.NewTokenBucket on clock.System()", func() limiter {
		return must(admitatomic.NewTokenBucket(tbRule))
	}},
	{"atomic-packed-sysclock", "fixed-window", viaSince, "admitatomic.NewFixedWindow on clock.System()", func() limiter {
		return must(admitatomic.NewFixedWindow(fwRule))
	}},
	{"atomic-packed-sysclock", "sliding-counter", viaSince, "admitatomic.NewLimiter on clock.System(), a rule that packs", func() limiter {
		return must(admitatomic.NewLimiter(scRule))
	}},
	{"xtime-rate-sysclock", "token-bucket", viaNow, "rate.Limiter.Allow() (time.Now inside)", func() limiter {
		return xtimeNow{rate.NewLimiter(1e9, 1_000_000)}
	}},
	{"uber-ratelimit-nowait-sysclock", "token-bucket", viaNow, "ratelimit.New(10^6, Per(1ms)).Take on its default clock, never waits", func() limiter {
		return uberTake{uber.New(1_000_000, uber.Per(time.Millisecond))}
	}},
	{"floor-since+cas", "-", viaSince, "time.Since of an origin, one Load and one CompareAndSwap", func() limiter { return new(sinceCASFloor) }},
}

var baselines = []impl{
	{string(viaClock), "-", "", "reads a step clock.Clock through its interface", func() limiter { return &clockOnly{c: new(durClock)} }},
	{string(viaTimeClock), "-", "", "reads a step Now() time.Time through an interface", func() limiter { return &timeClockOnly{c: &timeClock{t: time.Unix(1, 0)}} }},
	{string(viaTimeAdd), "-", "", "advances a time.Time by 1µs", func() limiter { return &timeAddOnly{t: time.Unix(1, 0)} }},
	{string(viaNothing), "-", "", "returns an admitted Decision", func() limiter { return callOnly{} }},
	{string(viaSince), "-", "", "reads time.Since of a fixed origin (the real clock)", func() limiter { return sinceOnly{} }},
	{string(viaNow), "-", "", "reads time.Now() (the real clock)", func() limiter { return nowOnly{} }},
}

// origin is the fixed instant the real-clock baselines measure from, as
// clock.System() does.
var origin = time.Now()

type xtimeNow struct{ l *rate.Limiter }

func (x xtimeNow) Allow() admit.Decision { return admit.Decision{Allowed: x.l.Allow()} }

type sinceOnly struct{}

func (sinceOnly) Allow() admit.Decision { return admit.Decision{Allowed: time.Since(origin) > 0} }

type nowOnly struct{}

func (nowOnly) Allow() admit.Decision { return admit.Decision{Allowed: time.Now().UnixNano() > 0} }

type sinceCASFloor struct{ w atomic.Int64 }

func (f *sinceCASFloor) Allow() admit.Decision {
	now := int64(time.Since(origin))
	v := f.w.Load()
	return admit.Decision{Allowed: f.w.CompareAndSwap(v, max(v, now)+1)}
}

type xtimeAt struct {
	l *rate.Limiter
	t time.Time
}

func (x *xtimeAt) Allow() admit.Decision {
	x.t = x.t.Add(step)
	return admit.Decision{Allowed: x.l.AllowN(x.t, 1)}
}

type uberTake struct{ l uber.Limiter }

func (u uberTake) Allow() admit.Decision { u.l.Take(); return admit.Decision{Allowed: true} }

type juju struct{ b *ratelimit.Bucket }

func (j juju) Allow() admit.Decision { return admit.Decision{Allowed: j.b.TakeAvailable(1) == 1} }

type casFloor struct{ w atomic.Uint64 }

func (f *casFloor) Allow() admit.Decision {
	v := f.w.Load()
	return admit.Decision{Allowed: f.w.CompareAndSwap(v, v+1)}
}

type clockOnly struct {
	c interface{ Now() time.Duration }
}

func (c *clockOnly) Allow() admit.Decision { return admit.Decision{Allowed: c.c.Now() > 0} }

type timeClockOnly struct {
	c interface{ Now() time.Time }
}

func (c *timeClockOnly) Allow() admit.Decision {
	return admit.Decision{Allowed: c.c.Now().UnixNano() > 0}
}

type timeAddOnly struct{ t time.Time }

func (c *timeAddOnly) Allow() admit.Decision {
	c.t = c.t.Add(step)
	return admit.Decision{Allowed: c.t.UnixNano() > 0}
}

// check is a policy.Service's Check of one pair, on a step clock.
type check struct{ s *policy.Service }

func (c check) Allow() admit.Decision { return c.s.Check("alice", "/orders") }

// newCheck returns the Check of a Service of one token-bucket default rule
// (tbRule's), observed by o unless it is nil.
func newCheck(o observe.Observer) check {
	book := must(policy.Parse(strings.NewReader("default = " + tbRule.String() + "\n")))
	opts := []admit.Option{withStep()}
	if o != nil {
		opts = append(opts, policy.WithObserver(o))
	}
	return check{must(policy.NewService(book, opts...))}
}

type callOnly struct{}

func (callOnly) Allow() admit.Decision { return admit.Decision{Allowed: true} }

// measureLoop is the function callgrind collects in (--toggle-collect): keep
// its name in step with loopSymbol.
//
//go:noinline
func measureLoop(l limiter, n int) int {
	admitted := 0
	for range n {
		if l.Allow().Allowed {
			admitted++
		}
	}
	return admitted
}

const loopSymbol = "main.measureLoop"

func find(name string) (impl, bool) {
	for _, list := range [][]impl{impls, baselines} {
		for _, im := range list {
			if im.name+"/"+im.algo == name || (im.algo == "-" && im.name == name) {
				return im, true
			}
		}
	}
	return impl{}, false
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		fs := flag.NewFlagSet("run", flag.ExitOnError)
		name := fs.String("impl", "", "impl/algo to run, or a baseline")
		n := fs.Int("n", 1_000_000, "calls")
		fs.Parse(os.Args[2:])
		im, ok := find(*name)
		if !ok {
			fmt.Fprintf(os.Stderr, "instr: unknown impl %q\n", *name)
			os.Exit(2)
		}
		l := im.new()
		l.Allow()
		if got := measureLoop(l, *n); got != *n {
			fmt.Fprintf(os.Stderr, "instr: %s admitted %d of %d calls; the measurement needs every call admitted\n", *name, got, *n)
			os.Exit(1)
		}
	case "measure":
		fs := flag.NewFlagSet("measure", flag.ExitOnError)
		out := fs.String("o", "", "write the results here (default stdout)")
		n1 := fs.Int("n1", 100_000, "calls in the first run")
		n2 := fs.Int("n2", 600_000, "calls in the second run")
		keys := fs.Int("keys", 100_000, "keys of the keyed stores")
		fs.Parse(os.Args[2:])
		if err := measure(*out, *n1, *n2, keyedParams{keys: *keys, warm: 50_000, n1: *n1, n2: *n2}); err != nil {
			fmt.Fprintln(os.Stderr, "instr:", err)
			os.Exit(1)
		}
	case "keyed":
		if err := runKeyed(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "instr:", err)
			os.Exit(1)
		}
	case "cache":
		if err := cache(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "instr:", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: instr measure [-o file] [-n1 N] [-n2 N] [-keys N] | instr cache [-o file] [-keys N] [-warm N] [-n1 N] [-n2 N]\n       instr run -impl NAME [-n N] | instr keyed -impl NAME [-keys N] [-warm N] [-n1 N] [-n2 N]")
	os.Exit(2)
}

// callgrind runs the named impl under callgrind for n calls, collecting
// inside measureLoop only, and writes callgrind's output to outFile.
func callgrind(self, name string, n int, outFile string) error {
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+outFile,
		"--collect-atstart=no", "--toggle-collect="+loopSymbol,
		self, "run", "-impl", name, "-n", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("valgrind %s: %v\n%s", name, err, b)
	}
	return nil
}

// count runs the named impl under callgrind for n calls and returns the
// instructions executed inside measureLoop.
func count(self, name string, n int) (int64, error) {
	dir, err := os.MkdirTemp("", "instr")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	outFile := filepath.Join(dir, "callgrind.out")
	if err := callgrind(self, name, n, outFile); err != nil {
		return 0, err
	}
	f, err := os.Open(outFile)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return totals(f)
}

// profile writes, for the named impl, the instructions per call spent in each
// function (callgrind_annotate, exclusive counts), largest first: where an
// optimisation of the hot path has to look.
func profile(w io.Writer, self, name string, n int) error {
	dir, err := os.MkdirTemp("", "instr")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	outFile := filepath.Join(dir, "callgrind.out")
	if err := callgrind(self, name, n, outFile); err != nil {
		return err
	}
	out, err := exec.Command("callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no", outFile).Output()
	if err != nil {
		return fmt.Errorf("callgrind_annotate: %v", err)
	}
	fmt.Fprintf(w, "# profile of %s: instructions per call by function (exclusive), %d calls\n", name, n)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.Contains(line, "PROGRAM TOTALS") {
			continue
		}
		ir, err := strconv.ParseInt(strings.ReplaceAll(f[0], ",", ""), 10, 64)
		if err != nil {
			continue
		}
		var fn string
		for _, field := range f[1:] {
			// file:function, where function may itself hold colons
			if file, fun, ok := strings.Cut(field, ":"); ok && !strings.HasPrefix(field, "[") {
				fn = fun + " (" + filepath.Base(file) + ")"
				break
			}
		}
		if fn == "" {
			continue
		}
		if per := float64(ir) / float64(n); per >= 0.5 {
			fmt.Fprintf(w, "profile\t%s\t%.1f\t%s\n", name, per, fn)
		}
	}
	return nil
}

// totals reads the instructions (Ir) of a callgrind output file.
func totals(r io.Reader) (int64, error) {
	ev, err := events(r)
	if err != nil {
		return 0, err
	}
	return ev["Ir"], nil
}

// events reads the "totals:" (or "summary:") line of a callgrind output
// file, by the event names of its "events:" line (Ir, and with
// --cache-sim=yes Dr, Dw, I1mr, D1mr, D1mw, ILmr, DLmr, DLmw). Trailing
// events left out of the line are zero.
func events(r io.Reader) (map[string]int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var names, summary, total []string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "events:"); ok {
			names = strings.Fields(v)
		} else if v, ok := strings.CutPrefix(line, "summary:"); ok {
			summary = strings.Fields(v)
		} else if v, ok := strings.CutPrefix(line, "totals:"); ok {
			total = strings.Fields(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if total == nil {
		total = summary
	}
	if len(total) == 0 || len(names) == 0 {
		return nil, fmt.Errorf("no events and totals in callgrind output")
	}
	ev := make(map[string]int64, len(names))
	for i, name := range names {
		if i >= len(total) {
			ev[name] = 0
			continue
		}
		n, err := strconv.ParseInt(total[i], 10, 64)
		if err != nil {
			return nil, err
		}
		ev[name] = n
	}
	return ev, nil
}

func perCall(self, name string, n1, n2 int) (float64, error) {
	a, err := count(self, name, n1)
	if err != nil {
		return 0, err
	}
	b, err := count(self, name, n2)
	if err != nil {
		return 0, err
	}
	return float64(b-a) / float64(n2-n1), nil
}

func measure(out string, n1, n2 int, kp keyedParams) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	base := map[baseline]float64{}
	for _, b := range baselines {
		v, err := perCall(self, b.name, n1, n2)
		if err != nil {
			return err
		}
		base[baseline(b.name)] = v
	}
	w := os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	vg, _ := exec.Command("valgrind", "--version").Output()
	fmt.Fprintf(w, "# Instructions per serial Allow, counted by valgrind's callgrind (%s, %s, %s/%s)\n",
		strings.TrimSpace(string(vg)), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "# date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "# method: (Ir(%d calls) - Ir(%d calls)) / %d, collected inside %s only; every call admitted; clocks are step clocks (no system call), except in the -sysclock rows, which read each library's real default clock\n", n2, n1, n2-n1, loopSymbol)
	fmt.Fprintf(w, "# net = gross - the baseline loop that reads the same clock the same way (the loop, the dynamic call, the clock read)\n")
	fmt.Fprintf(w, "# columns: impl algo gross net baseline note\n")
	for _, b := range baselines {
		fmt.Fprintf(w, "baseline\t%s\t%.1f\t-\t-\t%s\n", b.name, base[baseline(b.name)], b.note)
	}
	for _, im := range impls {
		v, err := perCall(self, im.name+"/"+im.algo, n1, n2)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%s\t%.1f\t%.1f\t%s\t%s\n", im.name, im.algo, v, v-base[im.base], im.base, im.note)
		if out != "" {
			fmt.Printf("%-22s %-16s gross %7.1f  net %7.1f\n", im.name, im.algo, v, v-base[im.base])
		}
	}
	if err := profile(w, self, "atomic-packed/token-bucket", n1); err != nil {
		return err
	}
	return measureKeyed(w, self, kp, out != "")
}

// exclusive sums the exclusive cost of the function fn in a callgrind
// output file: the cost lines of its blocks, without the inclusive costs of
// the calls it makes (the line after each calls= line). Names are
// compressed: "fn=(id) name" names id, later "fn=(id)" refers to it.
func exclusive(r io.Reader, fn string) (map[string]int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var names []string
	sums := map[string]int64{}
	fnNames := map[string]string{} // "(id)" -> name
	in, skip := false, false
	name := func(v string) string {
		id, n, _ := strings.Cut(strings.TrimSpace(v), " ")
		if n != "" {
			fnNames[id] = n
			return n
		}
		return fnNames[id]
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "events:"):
			names = strings.Fields(strings.TrimPrefix(line, "events:"))
		case strings.HasPrefix(line, "fn="):
			in = name(line[3:]) == fn
		case strings.HasPrefix(line, "cfn="):
			name(line[4:])
		case strings.HasPrefix(line, "calls="):
			skip = true
		case line != "" && strings.ContainsRune("0123456789+-*", rune(line[0])):
			if skip {
				skip = false
				continue
			}
			if !in {
				continue
			}
			f := strings.Fields(line)
			for i, v := range f[1:] {
				if i >= len(names) {
					break
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("callgrind output: %q: %v", line, err)
				}
				sums[names[i]] += n
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no events in callgrind output")
	}
	return sums, sc.Err()
}
