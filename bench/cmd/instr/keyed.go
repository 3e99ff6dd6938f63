package main

// Keyed decisions: one Allow(key) on an existing key of a keyed store, for
// admit's keyed stores and go-limiter. "instr measure" counts their
// instructions (Ir) on 100,000 keys; "instr cache" simulates their cache
// misses on 1,000,000 keys. Both drive the rows of bench.Keyeds() as
// BenchmarkKeyed does (the Steady rules, every key primed), with the keys of
// bench.Keys and a uniform bench.Sequence over them.
//
// Priming a million keys under callgrind's instrumentation would take
// minutes, so the runner primes first and only then asks callgrind to start
// instrumenting (startInstrumentation, a client request; callgrind runs with
// --instr-atstart=no). It then calls the measured loop three times, a
// warm-up, n1 calls and n2 calls, each continuing along the sequence (after
// one uninstrumented pass over all of it: see runKeyed);
// callgrind collects inside the loop only (--toggle-collect) and dumps its
// counters after each call of it (--dump-after), so one process gives both
// counts, and (dump 3 - dump 2) / (n2 - n1) is per call with the loop's
// entry cancelled out. The warm-up fills the simulated caches, which are
// empty when instrumentation starts.

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	_ "unsafe" // go:linkname time.now

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/bench"
)

// keyedImpl is a keyed store under measurement: a row of bench.Keyeds(),
// named by its impl and algo labels, or a keyed baseline (algo "-").
type keyedImpl struct {
	impl, algo string
	base       baseline
	note       string
}

const (
	// viaKeyedClock: admit's stores, on a step clock.Clock.
	viaKeyedClock baseline = "base-keyed-clock"
	// viaKeyedNow: go-limiter, whose clock cannot be replaced: it reads the
	// real clock through time.now (its internal fasttime package).
	viaKeyedNow baseline = "base-keyed-now"
)

// keyedImpls are the keyed stores measured, token buckets all: admit's
// three stores (atomic's table and sharded's map store, each also with
// admit.WithHashedKeys, and locked's map) and go-limiter, the peer the keyed
// goals compare with.
var keyedImpls = []keyedImpl{
	{"atomic-packed", "token-bucket", viaKeyedClock, "admitatomic.New (the lock-free table)"},
	{bench.AtomicHashed, "token-bucket", viaKeyedClock, "admitatomic.New (the lock-free table) with admit.WithHashedKeys()"},
	{"locked", "token-bucket", viaKeyedClock, "locked.New"},
	{"sharded", "token-bucket", viaKeyedClock, "sharded.New (the map store)"},
	{bench.ShardedHashed, "token-bucket", viaKeyedClock, "sharded.New (the map store) with admit.WithHashedKeys()"},
	{bench.GoLimiter, "token-bucket", viaKeyedNow, "memorystore Take on its own clock (time.now, a system call under valgrind)"},
}

var keyedBaselines = []keyedImpl{
	{string(viaKeyedClock), "-", "", "picks the key from the sequence, reads its last byte and a step clock.Clock through its interface"},
	{string(viaKeyedNow), "-", "", "picks the key from the sequence, reads its last byte and time.now (the real clock, as go-limiter does)"},
}

// keyedParams are the sizes of one keyed measurement.
type keyedParams struct {
	keys, warm, n1, n2 int
}

// The Steady rule of admit's token-bucket rows is 2,000,000 per 30 minutes
// and a key is primed with an eighth of it (bench/impls.go): on a step clock
// of 1µs per reading, no key refills to a full bucket (and so becomes fresh
// and evictable) for 225 s of readings, far beyond a run's few million.

// keyed is a keyed limiter as the measured loop calls it: one dynamic call
// per decision, as in the benchmarks.
type keyed interface {
	Allow(key string) admit.Decision
}

// measureKeyedLoop is the function callgrind collects in: keep its name in
// step with keyedLoopSymbol. It calls l on n keys of the sequence, from
// position from, and returns how many were admitted.
//
//go:noinline
func measureKeyedLoop(l keyed, keys []string, seq []int32, from, n int) int {
	admitted := 0
	for i := range n {
		if l.Allow(keys[seq[(from+i)&(bench.SeqLen-1)]]).Allowed {
			admitted++
		}
	}
	return admitted
}

const keyedLoopSymbol = "main.measureKeyedLoop"

// keyedClockOnly is the baseline of admit's stores.
type keyedClockOnly struct {
	c interface{ Now() time.Duration }
}

func (b *keyedClockOnly) Allow(key string) admit.Decision {
	return admit.Decision{Allowed: b.c.Now() > 0 && key[len(key)-1] != 0}
}

//go:linkname timeNow time.now
func timeNow() (sec int64, nsec int32, mono int64)

// keyedNowOnly is the baseline of go-limiter: its fasttime.Now reads
// time.now as this does.
type keyedNowOnly struct{}

func (keyedNowOnly) Allow(key string) admit.Decision {
	sec, nsec, _ := timeNow()
	return admit.Decision{Allowed: uint64(sec)*1e9+uint64(nsec) > 0 && key[len(key)-1] != 0}
}

// newKeyed builds the named keyed impl or baseline, its keys primed.
func newKeyed(name string, keys []string) (keyed, func(), error) {
	switch name {
	case string(viaKeyedClock):
		return &keyedClockOnly{c: new(durClock)}, func() {}, nil
	case string(viaKeyedNow):
		return keyedNowOnly{}, func() {}, nil
	}
	for _, row := range bench.Keyeds() {
		if row.Impl+"/"+row.Algo != name {
			continue
		}
		l, stop, err := row.New(bench.Env{Mode: bench.Admit, Keys: len(keys), Use: bench.Steady, Clock: new(durClock)})
		if err != nil {
			return nil, nil, err
		}
		for _, k := range keys {
			row.PrimeKey(l, k)
		}
		return l, stop, nil
	}
	return nil, nil, fmt.Errorf("no keyed row %q in bench.Keyeds()", name)
}

// runKeyed is "instr keyed": what callgrind runs for one keyed measurement.
func runKeyed(args []string) error {
	fs := flag.NewFlagSet("keyed", flag.ExitOnError)
	name := fs.String("impl", "", "impl/algo of a row of bench.Keyeds(), or a keyed baseline")
	var p keyedParams
	fs.IntVar(&p.keys, "keys", 100_000, "keys, each primed before the measurement")
	fs.IntVar(&p.warm, "warm", 50_000, "calls of warm-up")
	fs.IntVar(&p.n1, "n1", 100_000, "calls of the first measured loop")
	fs.IntVar(&p.n2, "n2", 600_000, "calls of the second measured loop")
	fs.Parse(args)
	keys := bench.Keys(p.keys)
	seq := bench.Sequence(p.keys, bench.Uniform)
	l, stop, err := newKeyed(*name, keys)
	if err != nil {
		return err
	}
	defer stop()
	// One pass over the whole sequence first, uninstrumented, outside
	// measureKeyedLoop: the first call on a key after its priming may do
	// more than the later ones (a store that writes its map entry back with
	// the caller's key, m[key] = state, then holds the very string the
	// caller passes, and later comparisons of the two stop at their equal
	// pointers). The measured calls are later ones, as nearly all of
	// BenchmarkKeyed's are.
	for i := range bench.SeqLen {
		if !l.Allow(keys[seq[i]]).Allowed {
			return fmt.Errorf("%s denied call %d of the settling pass; the measurement needs every call admitted", *name, i)
		}
	}
	// Nothing the loops do allocates (admit's stores promise it; go-limiter
	// takes no allocation on an existing key either), so no collection
	// should run in them: collect now, and turn the collector off.
	runtime.GC()
	debug.SetGCPercent(-1)
	startInstrumentation()
	from := 0
	for _, n := range []int{p.warm, p.n1, p.n2} {
		if got := measureKeyedLoop(l, keys, seq, from, n); got != n {
			return fmt.Errorf("%s admitted %d of %d calls; the measurement needs every call admitted", *name, got, n)
		}
		from += n
	}
	return nil
}

// LLSize and the other simulated caches are fixed rather than left to
// valgrind, which takes them from the host it runs on: the L1d and L3 of
// the AMD EPYC host of the first run (32 KiB 8-way, 32 MiB 16-way, 64-byte
// lines), so that runs on other hosts compare.
const (
	cacheI1 = "32768,8,64"
	cacheD1 = "32768,8,64"
	cacheLL = "33554432,16,64"
)

// keyedPerCall runs the named keyed impl or baseline under callgrind and
// returns its events per call, (dump of the n2 loop - dump of the n1 loop)
// / (n2 - n1): in all (total), and in the measured loop's own code (loop:
// picking the key from the sequence, the call; not what the call runs).
// With cacheSim, callgrind simulates the caches. drift is how far the n1
// loop's LL misses per call are from the n2 loop's, relative to the latter:
// near 0 once the warm-up has settled the simulated caches.
func keyedPerCall(self, name string, p keyedParams, cacheSim bool) (total, loop map[string]float64, drift float64, err error) {
	dir, err := os.MkdirTemp("", "instr")
	if err != nil {
		return nil, nil, 0, err
	}
	defer os.RemoveAll(dir)
	outFile := filepath.Join(dir, "callgrind.out")
	args := []string{"--tool=callgrind", "--callgrind-out-file=" + outFile,
		"--collect-atstart=no", "--toggle-collect=" + keyedLoopSymbol, "--dump-after=" + keyedLoopSymbol}
	if canStartInstrumentation {
		args = append(args, "--instr-atstart=no")
	}
	if cacheSim {
		args = append(args, "--cache-sim=yes", "--I1="+cacheI1, "--D1="+cacheD1, "--LL="+cacheLL)
	}
	args = append(args, self, "keyed", "-impl", name, "-keys", strconv.Itoa(p.keys),
		"-warm", strconv.Itoa(p.warm), "-n1", strconv.Itoa(p.n1), "-n2", strconv.Itoa(p.n2))
	cmd := exec.Command("valgrind", args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, 0, fmt.Errorf("valgrind %s: %v\n%s", name, err, b)
	}
	// The dumps after the loops are outFile.1 (warm-up), .2 (n1), .3 (n2).
	var all, own [2]map[string]int64
	for i := range all {
		data, err := os.ReadFile(fmt.Sprintf("%s.%d", outFile, i+2))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("valgrind %s: %v (did callgrind dump after each %s?)", name, err, keyedLoopSymbol)
		}
		if all[i], err = events(bytes.NewReader(data)); err != nil {
			return nil, nil, 0, fmt.Errorf("valgrind %s: %v", name, err)
		}
		if own[i], err = exclusive(bytes.NewReader(data), keyedLoopSymbol); err != nil {
			return nil, nil, 0, fmt.Errorf("valgrind %s: %v", name, err)
		}
	}
	total, loop = map[string]float64{}, map[string]float64{}
	for ev := range all[1] {
		total[ev] = float64(all[1][ev]-all[0][ev]) / float64(p.n2-p.n1)
		loop[ev] = float64(own[1][ev]-own[0][ev]) / float64(p.n2-p.n1)
	}
	if r1, r2 := float64(all[0]["DLmr"]+all[0]["DLmw"])/float64(p.n1), float64(all[1]["DLmr"]+all[1]["DLmw"])/float64(p.n2); r2 > 0 {
		drift = r1/r2 - 1
	}
	return total, loop, drift, nil
}

// measureKeyed writes the keyed section of instr.txt: instructions per
// decision on p.keys primed keys.
func measureKeyed(w io.Writer, self string, p keyedParams, progress bool) error {
	base := map[baseline]float64{}
	fmt.Fprintf(w, "# keyed: Instructions per Allow(key) on an existing key of a keyed store, counted by callgrind: %d keys of bench.Keys (%s), each primed as BenchmarkKeyed primes it (Steady rules), then keys from bench.Sequence(%d, uniform)\n", p.keys, keyShape(p.keys), p.keys)
	fmt.Fprintf(w, "# keyed: method: (Ir(%d calls) - Ir(%d calls)) / %d in one process, after an uninstrumented pass over the whole sequence and %d calls of warm-up, collected inside %s only; every call admitted; admit's stores read a step clock, go-limiter its own (time.now)\n", p.n2, p.n1, p.n2-p.n1, p.warm, keyedLoopSymbol)
	fmt.Fprintf(w, "# keyed: net = gross - the keyed baseline loop that reads the same clock the same way (the loop, picking the key, the dynamic call, the clock read, one byte of the key)\n")
	fmt.Fprintf(w, "# keyed: source: %s\n", source())
	fmt.Fprintf(w, "# keyed: columns: keyed impl algo gross net baseline note\n")
	for _, b := range keyedBaselines {
		ev, _, _, err := keyedPerCall(self, b.impl, p, false)
		if err != nil {
			return err
		}
		base[baseline(b.impl)] = ev["Ir"]
		fmt.Fprintf(w, "keyed\tbaseline\t%s\t%.1f\t-\t-\t%s\n", b.impl, ev["Ir"], b.note)
	}
	for _, im := range keyedImpls {
		ev, _, _, err := keyedPerCall(self, im.impl+"/"+im.algo, p, false)
		if err != nil {
			return err
		}
		v := ev["Ir"]
		fmt.Fprintf(w, "keyed\t%s\t%s\t%.1f\t%.1f\t%s\t%s\n", im.impl, im.algo, v, v-base[im.base], im.base, im.note)
		if progress {
			fmt.Printf("keyed %-16s %-14s gross %7.1f  net %7.1f\n", im.impl, im.algo, v, v-base[im.base])
		}
	}
	return nil
}

// cache is "instr cache": simulated cache misses per keyed decision, written
// to out (results/cache.txt).
func cache(args []string) error {
	fs := flag.NewFlagSet("cache", flag.ExitOnError)
	out := fs.String("o", "", "write the results here (default stdout)")
	p := keyedParams{}
	fs.IntVar(&p.keys, "keys", 1_000_000, "keys, each primed before the measurement")
	fs.IntVar(&p.warm, "warm", 400_000, "calls of warm-up, which settle the simulated caches")
	fs.IntVar(&p.n1, "n1", 100_000, "calls of the first measured loop")
	fs.IntVar(&p.n2, "n2", 400_000, "calls of the second measured loop")
	fs.Parse(args)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start, loadBefore := time.Now(), loadAverage()
	type result struct {
		im          keyedImpl
		total, loop map[string]float64
		drift       float64
	}
	var rows []result
	for _, im := range keyedImpls {
		total, loop, drift, err := keyedPerCall(self, im.impl+"/"+im.algo, p, true)
		if err != nil {
			return err
		}
		rows = append(rows, result{im, total, loop, drift})
		fmt.Fprintf(os.Stderr, "cache %-16s Ir %6.1f  D1 misses %5.2f (net %5.2f)  LL misses %5.2f (net %5.2f)  drift %+.1f%%\n",
			im.impl, total["Ir"], d1(total), d1(total)-d1(loop), ll(total), ll(total)-ll(loop), 100*drift)
	}
	w := os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	vg, _ := exec.Command("valgrind", "--version").Output()
	fmt.Fprintf(w, "# Cache misses per Allow(key) on an existing key of a keyed store, simulated by valgrind's callgrind --cache-sim=yes (%s, %s, %s/%s)\n",
		strings.TrimSpace(string(vg)), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "# date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "# source: %s\n", source())
	fmt.Fprintf(w, "# load-before: %s\n", loadBefore)
	fmt.Fprintf(w, "# load-after: %s\n", loadAverage())
	fmt.Fprintf(w, "# caches: --I1=%s --D1=%s --LL=%s (bytes, ways, line size): the L1d and L3 of an AMD EPYC host, given rather than taken from the host valgrind runs on\n", cacheI1, cacheD1, cacheLL)
	fmt.Fprintf(w, "# keys: %d of bench.Keys (%s), each primed as BenchmarkKeyed primes it (Steady rules); then keys from bench.Sequence(%d, uniform), one goroutine\n", p.keys, keyShape(p.keys), p.keys)
	fmt.Fprintf(w, "# method: (misses(%d calls) - misses(%d calls)) / %d in one process, after an uninstrumented pass over the whole sequence and %d calls of warm-up that settle the simulated caches (empty when callgrind starts instrumenting); collected inside %s only; every call admitted\n", p.n2, p.n1, p.n2-p.n1, p.warm, keyedLoopSymbol)
	fmt.Fprintf(w, "# D1 = D1mr + D1mw, data reads and writes that miss the first level; LL = DLmr + DLmw, data that misses the last level too (a line from memory)\n")
	fmt.Fprintf(w, "# net = gross - the misses of %s's own code: loading the key's index from the sequence and the key's string header; the key's bytes, which every store reads to hash it, are the store's\n", keyedLoopSymbol)
	fmt.Fprintf(w, "# drift = LL misses per call of the %d-call loop / those of the %d-call loop - 1: near 0 when the warm-up has settled the caches\n", p.n1, p.n2)
	fmt.Fprintf(w, "# elapsed: %.0fs\n", time.Since(start).Seconds())
	fmt.Fprintf(w, "# columns: impl algo Ir D1 D1-net LL LL-net drift note\n")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%+.1f%%\t%s\n", r.im.impl, r.im.algo, r.total["Ir"],
			d1(r.total), d1(r.total)-d1(r.loop), ll(r.total), ll(r.total)-ll(r.loop), 100*r.drift, r.im.note)
	}
	return nil
}

// d1 and ll are the data misses per call of the first and last levels.
func d1(ev map[string]float64) float64 { return ev["D1mr"] + ev["D1mw"] }
func ll(ev map[string]float64) float64 { return ev["DLmr"] + ev["DLmw"] }

// keyShape describes the first n keys of bench.Keys: what they look like,
// their mean length and range.
func keyShape(n int) string {
	mean, shortest, longest := bench.KeyLengths(n)
	return fmt.Sprintf("like %q, %.1f bytes on average, %d to %d", bench.Keys(n)[n-1], mean, shortest, longest)
}

// source names the admit source measured: the commit of the working tree
// the command runs in, and whether it has uncommitted changes.
func source() string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git working tree)"
	}
	s := "admit at commit " + strings.TrimSpace(string(head))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		s += ", with uncommitted changes"
	}
	return s
}

// loadAverage returns the 1, 5 and 15-minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
