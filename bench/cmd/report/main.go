// Command report regenerates docs/benchmarks.md and its SVG charts from the
// benchmark results in bench/results: the newest raw results file (quick.txt
// or full.txt, by the date in its header), its benchstat tables, and
// instr.txt (instructions per Allow) when present. Nothing in the report is
// typed by hand: every number comes from those files.
//
//	go run ./cmd/report -results results -docs ../docs
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/admit-go/admit/bench"
)

func main() {
	results := flag.String("results", "results", "the results directory")
	docs := flag.String("docs", "../docs", "the docs directory: writes benchmarks.md and img/*.svg")
	flag.Parse()
	if err := generate(*results, *docs); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

type report struct {
	r       *run
	ir      *instrRun
	profile string
	docs    string
	md      strings.Builder
	family  map[string]string // impl -> family
}

func generate(results, docs string) error {
	r, err := latestRun(results)
	if err != nil {
		return err
	}
	ir, err := loadInstr(filepath.Join(results, "instr.txt"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	rep := &report{r: r, ir: ir, docs: docs, family: map[string]string{}}
	rep.profile, _, _ = strings.Cut(r.header["profile"], " ")
	for _, row := range bench.Singles() {
		rep.family[row.Impl] = row.Family
	}
	for _, row := range bench.Keyeds() {
		rep.family[row.Impl] = row.Family
	}
	if err := os.MkdirAll(filepath.Join(docs, "img"), 0o755); err != nil {
		return err
	}
	bs, err := os.ReadFile(filepath.Join(results, rep.profile+".benchstat.txt"))
	if err != nil {
		return fmt.Errorf("the benchstat tables of %s: %w (run make bench-%s)", r.path, err, rep.profile)
	}
	if err := rep.write(string(bs)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(docs, "benchmarks.md"), []byte(rep.md.String()), 0o644)
}

func (rep *report) p(format string, args ...any) { fmt.Fprintf(&rep.md, format, args...) }

// ---- formatting ----

func ns(s stat) string {
	if !s.ok() {
		return "–"
	}
	return fmt.Sprintf("%s ns %s", fmtNum(s.center), s.pct())
}

func num(s stat) string {
	if !s.ok() {
		return "–"
	}
	return fmtNum(s.center)
}

func ratio(a, b stat) float64 {
	if !a.ok() || !b.ok() || b.center == 0 {
		return math.NaN()
	}
	return a.center / b.center
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

// table writes a Markdown table; its first left columns are text (left
// aligned), the rest numbers (right aligned).
func table(rep *report, left int, header []string, rows [][]string) {
	rep.p("| %s |\n", strings.Join(header, " | "))
	seps := make([]string, len(header))
	for i := range seps {
		seps[i] = "---"
		if i >= left {
			seps[i] = "---:"
		}
	}
	rep.p("| %s |\n", strings.Join(seps, " | "))
	for _, row := range rows {
		rep.p("| %s |\n", strings.Join(row, " | "))
	}
	rep.p("\n")
}

func (rep *report) familyOf(impl string) string {
	if f, ok := rep.family[impl]; ok {
		return f
	}
	if strings.HasPrefix(impl, "policy-") {
		return bench.FamilyAdmit
	}
	return bench.FamilyPeer
}

func (rep *report) implLabel(impl string) string {
	if rep.familyOf(impl) == bench.FamilyAdmit {
		return "**" + impl + "**"
	}
	return impl
}

// ---- the goals ----

type goal struct {
	what, target, measured string
	met                    bool
	known                  bool
	// noisy: the threshold lies inside the range the two confidence
	// intervals allow for the ratio, so another run may decide otherwise.
	noisy bool
}

func verdict(g goal) string {
	v := "**missed**"
	switch {
	case !g.known:
		return "not measured"
	case g.met:
		v = "met"
	}
	if g.noisy {
		v += " (within noise: the confidence intervals straddle the target)"
	}
	return v
}

// straddles reports whether threshold lies within the range of num/den that
// their confidence intervals allow.
func straddles(num, den stat, threshold float64) bool {
	if !num.ok() || !den.ok() || num.n < 2 || den.n < 2 || den.lo <= 0 || den.hi <= 0 {
		return false
	}
	lo, hi := num.lo/den.hi, num.hi/den.lo
	return lo <= threshold && threshold <= hi
}

func (rep *report) goals() ([]goal, []string) {
	r := rep.r
	tb := "token-bucket"
	serial := func(impl string) stat {
		return r.stat(q("Serial", "path", "allow", "algo", tb, "impl", impl), "ns/op")
	}
	hot := func(impl string, procs int) stat {
		return r.stat(q("HotKey", "algo", tb, "impl", impl).at(procs), "ns/op")
	}
	keyed := func(impl, dist string) stat {
		return r.stat(q("Keyed", "keys", "100000", "dist", dist, "algo", tb, "impl", impl), "ns/op")
	}
	ap, apc, xt := serial("atomic-packed"), serial("atomic-packed-coarse"), serial(bench.XTime)
	floorRow := serial(bench.FloorCAS)
	floorBare := r.stat(q("Floor", "op", "since+cas"), "ns/op")
	var gs []goal
	var lines []string

	g := goal{what: "atomic packed token bucket, serial Allow, system clock, vs time.Since + one CAS measured in the same run", target: "≤ 1.2× the floor"}
	if ap.ok() && floorRow.ok() {
		x, xb := ratio(ap, floorRow), ratio(ap, floorBare)
		g.known, g.met, g.noisy = true, x <= 1.2, straddles(ap, floorRow, 1.2)
		g.measured = fmt.Sprintf("%s vs floor %s through the same interface: **%s**; vs the bare floor loop (%s, no dynamic call): %s", ns(ap), ns(floorRow), fmtRatio(x), ns(floorBare), fmtRatio(xb))
		lines = append(lines, fmt.Sprintf("- Serial `Allow` on one key, system clock: atomic packed token bucket %s ns, %s x/time/rate (%s ns), %s the floor of a clock read plus one CAS (%s ns).",
			fmtNum(ap.center), speed(ratio(xt, ap)), fmtNum(xt.center), fmtRatio(ratio(ap, floorRow)), fmtNum(floorRow.center)))
	}
	gs = append(gs, g)

	g = goal{what: "atomic packed token bucket, serial Allow, system clock, vs x/time/rate", target: "≥ 2× faster"}
	if ap.ok() && xt.ok() {
		x := ratio(xt, ap)
		g.known, g.met, g.noisy = true, x >= 2, straddles(xt, ap, 2)
		g.measured = fmt.Sprintf("x/time/rate %s, atomic packed %s: **%s**", ns(xt), ns(ap), faster(x))
	}
	gs = append(gs, g)

	g = goal{what: "the same with clock.Coarse (impl atomic-packed-coarse) vs x/time/rate", target: "≥ 8× faster"}
	if apc.ok() && xt.ok() {
		x := ratio(xt, apc)
		g.known, g.met, g.noisy = true, x >= 8, straddles(xt, apc, 8)
		g.measured = fmt.Sprintf("x/time/rate %s, atomic packed on clock.Coarse %s: **%s**", ns(xt), ns(apc), faster(x))
		lines = append(lines, fmt.Sprintf("- With `clock.Coarse`: %s ns per `Allow`, %s x/time/rate.", fmtNum(apc.center), speed(x)))
	}
	gs = append(gs, g)

	procs := 8
	hap, hub, hxt := hot("atomic-packed", procs), hot(bench.Uber, procs), hot(bench.XTime, procs)
	g = goal{what: "hot key, RunParallel at -cpu 8: atomic packed vs uber's limiter", target: "no worse than uber"}
	if hap.ok() && hub.ok() {
		g.known, g.met, g.noisy = true, hap.center <= hub.center, straddles(hub, hap, 1)
		g.measured = fmt.Sprintf("uber %s, atomic packed %s: uber ÷ admit = **%s**", ns(hub), ns(hap), fmtRatio(ratio(hub, hap)))
	}
	gs = append(gs, g)
	g = goal{what: "hot key, RunParallel at -cpu 8: atomic packed vs x/time/rate", target: "≥ 2× faster"}
	if hap.ok() && hxt.ok() {
		x := ratio(hxt, hap)
		g.known, g.met, g.noisy = true, x >= 2, straddles(hxt, hap, 2)
		g.measured = fmt.Sprintf("x/time/rate %s, atomic packed %s: **%s**", ns(hxt), ns(hap), faster(x))
		lines = append(lines, fmt.Sprintf("- One hot key from 8 goroutines (`-cpu 8`, 2 cores): %s ns per `Allow`, %s x/time/rate, %s uber's `Take` (%s ns).",
			fmtNum(hap.center), speed(x), speed(ratio(hub, hap)), fmtNum(hub.center)))
	}
	gs = append(gs, g)

	g = goal{what: "instructions per Allow, atomic packed token bucket, clock excluded (callgrind)", target: "≤ 60 (x/time/rate ~453, uber ~205)"}
	if row, ok := rep.ir.find("atomic-packed", tb); ok {
		g.known, g.met = true, row.net <= 60
		peer := func(impl string) (net, gross string) {
			if p, ok := rep.ir.find(impl, tb); ok {
				return fmt.Sprintf("%.0f", p.net), fmt.Sprintf("%.0f", p.gross)
			}
			return "–", "–"
		}
		xn, xg := peer(bench.XTime)
		un, ug := peer(bench.Uber)
		g.measured = fmt.Sprintf("**%.0f** net (%.0f gross, with the benchmark loop, the dynamic call and a step-clock read); x/time/rate %s net (%s gross), uber %s net (%s gross)", row.net, row.gross, xn, xg, un, ug)
		lines = append(lines, fmt.Sprintf("- %.0f instructions per `Allow` (callgrind, clock excluded), against %s for x/time/rate and %s for uber's `Take`.", row.net, xn, un))
	}
	gs = append(gs, g)

	for _, dist := range []string{"uniform", "zipf"} {
		k, gl := keyed("atomic-packed", dist), keyed(bench.GoLimiter, dist)
		g = goal{what: "keyed, 100,000 existing keys, " + dist + ": atomic vs go-limiter", target: "≥ 1.5× faster"}
		if k.ok() && gl.ok() {
			x := ratio(gl, k)
			g.known, g.met, g.noisy = true, x >= 1.5, straddles(gl, k, 1.5)
			g.measured = fmt.Sprintf("go-limiter %s, atomic %s: **%s**", ns(gl), ns(k), faster(x))
			if dist == "uniform" {
				kx := keyed(bench.XTime, dist)
				lines = append(lines, fmt.Sprintf("- 100,000 keys, uniform, 2 goroutines: %s ns per `Allow`, %s go-limiter, %s x/time/rate in a `sync.Map`.", fmtNum(k.center), speed(x), speed(ratio(kx, k))))
			}
		}
		gs = append(gs, g)
	}
	mem := r.stat(q("Memory", "keys", "100000", "algo", tb, "impl", "atomic-packed"), "bytes/key")
	memX := r.stat(q("Memory", "keys", "100000", "algo", tb, "impl", bench.XTime), "bytes/key")
	if mem.ok() && memX.ok() {
		lines = append(lines, fmt.Sprintf("- Memory: %.0f bytes per key (atomic token bucket, 100,000 keys), against %.0f for x/time/rate in a `sync.Map`; zero allocations on every admitted or denied `Allow` of an existing key.", mem.center, memX.center))
	}
	return gs, lines
}

// faster says how many times faster (or slower) admit is, from peer ÷ admit.
func faster(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 1:
		return fmt.Sprintf("%.2f× faster", x)
	}
	return fmt.Sprintf("%.2f× slower", 1/x)
}

// speed says how many times faster (or slower) admit is, from peer ÷ admit.
func speed(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 1:
		return fmt.Sprintf("%.1f× faster than", x)
	}
	return fmt.Sprintf("%.1f× slower than", 1/x)
}

// ---- the document ----

func (rep *report) write(benchstat string) error {
	r := rep.r
	h := r.header
	target := "make bench-" + rep.profile
	if rep.profile == "full" {
		target = "make bench"
	}
	rep.p("# Benchmarks\n\n")
	rep.p("<!-- Generated by bench/cmd/report from bench/%s; do not edit: run `%s` (or `make bench-instr`). -->\n\n", filepath.ToSlash(r.path), target)
	rep.p("admit's limiters against the Go rate limiters users know, on the same workloads, in one run, beside the physical floors.\n")
	rep.p("Everything here is generated from the raw results in [`bench/%s`](../bench/%s) and their benchstat tables in [`bench/results/%s.benchstat.txt`](../bench/results/%s.benchstat.txt); the suite is [`bench/`](../bench/), its own Go module.\n\n",
		filepath.ToSlash(r.path), filepath.ToSlash(r.path), rep.profile, rep.profile)

	rep.p("## The run\n\n")
	table(rep, 2, []string{"", ""}, [][]string{
		{"date", h["date"]},
		{"machine", fmt.Sprintf("%s, %s MHz; %s", h["cpu-model"], h["cpu-mhz"], h["host"])},
		{"Go", h["go-version"]},
		{"profile", fmt.Sprintf("`%s` (%s)", target, h["profile"])},
		{"load average (1, 5, 15 min) before / after", h["load-before"] + " / " + h["load-after"]},
		{"elapsed", h["elapsed"]},
	})
	rep.p("Commands, from `bench/` (`%s` runs them through `bench/run.sh`):\n\n```\n", target)
	for _, c := range r.command {
		rep.p("%s\n", c)
	}
	rep.p("```\n\n")
	rep.p("Each number is the median of the samples with its 95%% confidence interval (benchstat's method); ratios are ratios of medians. ")
	rep.p("The machine is a 2-core VM shared with other work, so nanoseconds move from run to run (the load averages above say how busy it was): compare rows of one run, and read the callgrind instruction counts, which do not depend on load, for the fine differences. ")
	rep.p("Every measured call goes through one dynamic call (the suite's `Limiter` interface, which admit's limiters implement as they are), the floor rows included.\n\n")

	gs, lines := rep.goals()
	rep.p("## Headline\n\n")
	for _, l := range lines {
		rep.p("%s\n", l)
	}
	rep.p("\n### Goals\n\n")
	var rows [][]string
	for _, g := range gs {
		rows = append(rows, []string{g.what, g.target, g.measured, verdict(g)})
	}
	table(rep, 4, []string{"goal", "target", "measured", "verdict"}, rows)

	if err := rep.floors(); err != nil {
		return err
	}
	if err := rep.serial(); err != nil {
		return err
	}
	if err := rep.hotKey(); err != nil {
		return err
	}
	if err := rep.keyed(); err != nil {
		return err
	}
	for _, section := range []func() error{rep.churn, rep.allowN, rep.policy, rep.eviction, rep.memory} {
		if err := section(); err != nil {
			return err
		}
	}
	rep.instructions()
	rep.peers()
	rep.benchstatTables(benchstat)
	return nil
}

func (rep *report) img(name string) string { return filepath.Join(rep.docs, "img", name) }

// has reports whether the run measured the named benchmark (Serial, HotKey,
// ...); when it did not, the section says so instead of showing empty tables.
func (rep *report) has(name string) bool {
	if len(rep.r.values(q(name), "bench")) > 0 {
		return true
	}
	rep.p("Not measured in this run.\n\n")
	return false
}

func (rep *report) floors() error {
	r := rep.r
	rep.p("## Floors\n\nWhat no limiter can avoid, measured in the same run: a monotonic clock read (`time.Since`, what `clock.System` does), a wall-and-monotonic read (`time.Now`, what most peers call), a `clock.Coarse` read, one uncontended CAS, both, an uncontended mutex, a `sync.Map` load, and the dynamic call every row pays.\n\n")
	if !rep.has("Floor") {
		return nil
	}
	var rows [][]string
	for _, op := range r.values(q("Floor"), "op") {
		s := r.stat(q("Floor", "op", op), "ns/op")
		rows = append(rows, []string{"`" + op + "`", ns(s)})
	}
	table(rep, 1, []string{"op", "ns/op"}, rows)
	return nil
}

// impls returns the impl labels of samples matching qu, admit first, then the
// floors, then the peers, each in file order.
func (rep *report) impls(qu query) []string {
	all := rep.r.values(qu, "impl")
	rank := func(impl string) int {
		switch rep.familyOf(impl) {
		case bench.FamilyAdmit:
			return 0
		case bench.FamilyFloor:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(all, func(a, b string) int { return rank(a) - rank(b) })
	return all
}

func (rep *report) bars(qu query, unit string, label func(s string) string, byAlgo bool) []bar {
	var bars []bar
	algos := []string{""}
	if byAlgo {
		algos = rep.r.values(qu, "algo")
	}
	for _, a := range algos {
		qa := qu
		if a != "" {
			qa = qu.with("algo", a)
		}
		for _, impl := range rep.impls(qa) {
			s := rep.r.stat(qa.with("impl", impl), unit)
			if !s.ok() {
				continue
			}
			l := impl
			if a != "" {
				l = impl + " · " + a
			} else if label != nil {
				l = label(impl)
			}
			bars = append(bars, bar{label: l, value: s.center, lo: s.lo, hi: s.hi, color: colorFor(rep.familyOf(impl), impl), emphasis: impl == "atomic-packed"})
		}
	}
	return bars
}

func (rep *report) serial() error {
	r := rep.r
	rep.p("## One key, serial\n\n")
	if !rep.has("Serial") {
		return nil
	}
	rep.p("One goroutine, one key. `path=allow`: a limit no run reaches, so every call is admitted (admitted/op = 1 checks it); `path=deny`: one request per hour, spent before the measurement. `-coarse` rows read `clock.Coarse` (1 ms resolution) instead of the system clock. The keyed peers (go-limiter, throttled, ulule, httprate) run on one fixed key.\n\n")
	for _, path := range []string{"allow", "deny"} {
		name := "serial-" + path + ".svg"
		if err := barChart(rep.img(name), "One key, serial, "+path+" path", "ns/op (median, 95% CI)", "blue: admit; teal: admit on clock.Coarse; green: floors; brown: peers. Shorter is faster.",
			rep.bars(q("Serial", "path", path), "ns/op", nil, true)); err != nil {
			return err
		}
		rep.p("![One key, serial, %s path](img/%s)\n\n", path, name)
	}
	xt := r.stat(q("Serial", "path", "allow", "algo", "token-bucket", "impl", bench.XTime), "ns/op")
	var rows [][]string
	for _, a := range r.values(q("Serial"), "algo") {
		for _, impl := range rep.impls(q("Serial", "algo", a)) {
			qa := q("Serial", "algo", a, "impl", impl)
			al, de := r.stat(qa.with("path", "allow"), "ns/op"), r.stat(qa.with("path", "deny"), "ns/op")
			rows = append(rows, []string{a, rep.implLabel(impl), ns(al), ns(de),
				num(r.stat(qa.with("path", "allow"), "allocs/op")), num(r.stat(qa.with("path", "allow"), "admitted/op")) + " / " + num(r.stat(qa.with("path", "deny"), "admitted/op")),
				fmtRatio(ratio(xt, al))})
		}
	}
	table(rep, 2, []string{"algo", "impl", "allow", "deny", "allocs/op (allow)", "admitted/op (allow / deny)", "x/time/rate allow ÷ this"}, rows)
	return nil
}

func (rep *report) hotKey() error {
	r := rep.r
	rep.p("## Hot key, every goroutine on one key\n\n")
	if !rep.has("HotKey") {
		return nil
	}
	rep.p("`RunParallel` on one key, admitted path, swept with `-cpu 1,2,4,8` on 2 cores (at 4 and 8 the goroutines outnumber the cores). ns/op is wall time per call across all goroutines, so lower is more throughput. uber's limiter has only a blocking `Take`: it is measured at 10^9 per second, so it never waits (admitted/op is 1 by construction). The floor `floor-since+cas` makes one CAS attempt and does not retry, so under contention its admitted/op falls below 1.\n\n")
	procs := []int{}
	for _, key := range r.keys {
		for _, s := range r.samples[key] {
			if s.labels["bench"] == "HotKey" && !slices.Contains(procs, s.procs) {
				procs = append(procs, s.procs)
			}
		}
	}
	slices.Sort(procs)
	var lines []series
	i := 0
	for _, impl := range rep.impls(q("HotKey", "algo", "token-bucket")) {
		if impl == bench.FloorMutex || impl == "atomic-snapshot-coarse" || impl == "locked-coarse" {
			continue
		}
		var pts []point
		for _, p := range procs {
			s := r.stat(q("HotKey", "algo", "token-bucket", "impl", impl).at(p), "ns/op")
			if s.ok() && s.center > 0 {
				pts = append(pts, point{float64(p), 1000 / s.center})
			}
		}
		lines = append(lines, series{name: impl, color: palette[i%len(palette)], dashed: rep.familyOf(impl) != bench.FamilyAdmit, points: pts})
		i++
	}
	for _, extra := range []struct{ impl, algo string }{{bench.Ulule, "fixed-window"}, {bench.HTTPRate, "sliding-counter"}} {
		var pts []point
		for _, p := range procs {
			s := r.stat(q("HotKey", "algo", extra.algo, "impl", extra.impl).at(p), "ns/op")
			if s.ok() && s.center > 0 {
				pts = append(pts, point{float64(p), 1000 / s.center})
			}
		}
		if len(pts) > 0 {
			lines = append(lines, series{name: extra.impl + " (" + extra.algo + ")", color: palette[i%len(palette)], dashed: true, points: pts})
			i++
		}
	}
	if len(lines) > 0 {
		if err := lineChart(rep.img("hotkey.svg"), "Hot key: throughput vs -cpu (token buckets)", "GOMAXPROCS (-cpu), 2 cores", "million Allow per second", "solid: admit; dashed: peers and the floor. Higher is better.", lines); err != nil {
			return err
		}
		rep.p("![Hot key throughput vs -cpu](img/hotkey.svg)\n\n")
	}
	header := []string{"algo", "impl"}
	for _, p := range procs {
		header = append(header, fmt.Sprintf("-cpu %d", p))
	}
	last := procs[len(procs)-1]
	header = append(header, fmt.Sprintf("admitted/op (-cpu %d)", last), fmt.Sprintf("x/time/rate ÷ this (-cpu %d)", last))
	xt := r.stat(q("HotKey", "algo", "token-bucket", "impl", bench.XTime).at(last), "ns/op")
	var rows [][]string
	for _, a := range r.values(q("HotKey"), "algo") {
		for _, impl := range rep.impls(q("HotKey", "algo", a)) {
			row := []string{a, rep.implLabel(impl)}
			for _, p := range procs {
				row = append(row, ns(r.stat(q("HotKey", "algo", a, "impl", impl).at(p), "ns/op")))
			}
			row = append(row, num(r.stat(q("HotKey", "algo", a, "impl", impl).at(last), "admitted/op")),
				fmtRatio(ratio(xt, r.stat(q("HotKey", "algo", a, "impl", impl).at(last), "ns/op"))))
			rows = append(rows, row)
		}
	}
	table(rep, 2, header, rows)
	return nil
}

func (rep *report) keyed() error {
	r := rep.r
	rep.p("## Keyed, existing keys\n\n")
	if !rep.has("Keyed") {
		return nil
	}
	rep.p("One budget per key; every key was admitted once before the measurement. Keys look like client addresses (`10.1.2.3`) and are picked from a pre-generated sequence, uniform or Zipf(s = 1.1), by both goroutines at once (`RunParallel` at GOMAXPROCS 2). Every row runs at 100,000 keys; at the other sizes, the token buckets and the peers. x/time/rate and juju are keyed the usual way, a `sync.Map` of limiters. ")
	rep.p("admit's keyed stores evict a key once it has been idle with a fresh state (a full bucket, expired windows), so admit's rows here run rules under which no key falls idle during a run and no request is denied: a token bucket of 2,000,000 per 30 minutes with every key primed with an eighth of it, windows of an hour. The packed sliding counter (Limit < 2^16) cannot carry a hot Zipf key for an hour, so it runs only in the churn and memory workloads; the sliding log keeps Limit timestamps per key and runs 64 per µs, so its keys can fall idle between requests.\n\n")
	keys := r.values(q("Keyed"), "keys")
	dists := r.values(q("Keyed"), "dist")
	for _, k := range keys {
		for _, d := range dists {
			name := "keyed-" + k + "-" + d + ".svg"
			bars := rep.bars(q("Keyed", "keys", k, "dist", d), "ns/op", nil, true)
			if len(bars) == 0 {
				continue
			}
			if k != "100000" {
				continue // the table has them; one chart per distribution at the size every row runs
			}
			if err := barChart(rep.img(name), fmt.Sprintf("Keyed: %s keys, %s", k, d), "ns/op (median, 95% CI)", "2 goroutines; blue: admit; teal: admit on clock.Coarse; brown: peers. Shorter is faster.", bars); err != nil {
				return err
			}
			rep.p("![Keyed, %s keys, %s](img/%s)\n\n", k, d, name)
		}
	}
	header := []string{"algo", "impl"}
	for _, k := range keys {
		for _, d := range dists {
			header = append(header, k+" "+d)
		}
	}
	header = append(header, "allocs/op", "go-limiter ÷ this (100000 uniform)")
	gl := r.stat(q("Keyed", "keys", "100000", "dist", "uniform", "impl", bench.GoLimiter), "ns/op")
	var rows [][]string
	for _, a := range r.values(q("Keyed"), "algo") {
		for _, impl := range rep.impls(q("Keyed", "algo", a)) {
			row := []string{a, rep.implLabel(impl)}
			for _, k := range keys {
				for _, d := range dists {
					row = append(row, ns(r.stat(q("Keyed", "keys", k, "dist", d, "algo", a, "impl", impl), "ns/op")))
				}
			}
			row = append(row, num(r.stat(q("Keyed", "keys", "100000", "dist", "uniform", "algo", a, "impl", impl), "allocs/op")),
				fmtRatio(ratio(gl, r.stat(q("Keyed", "keys", "100000", "dist", "uniform", "algo", a, "impl", impl), "ns/op"))))
			rows = append(rows, row)
		}
	}
	table(rep, 2, header, rows)
	return nil
}

func (rep *report) churn() error {
	r := rep.r
	var rows [][]string
	rep.p("## New-key churn\n\nEvery call is a key the limiter has never seen, from one goroutine: the cost of creating a key's state (and of the store growing). admit's rows run their one-key rules here (a token every nanosecond), so a stored key is soon idle and a store that evicts idle keys may drop it while the run goes on; the peers' stores, as configured, keep every key.\n\n")
	if !rep.has("Churn") {
		return nil
	}
	if err := barChart(rep.img("churn.svg"), "New-key churn: every call a new key", "ns/op (median, 95% CI)", "1 goroutine. Shorter is faster.", rep.bars(q("Churn"), "ns/op", nil, true)); err != nil {
		return err
	}
	rep.p("![New-key churn](img/churn.svg)\n\n")
	for _, a := range r.values(q("Churn"), "algo") {
		for _, impl := range rep.impls(q("Churn", "algo", a)) {
			qa := q("Churn", "algo", a, "impl", impl)
			rows = append(rows, []string{a, rep.implLabel(impl), ns(r.stat(qa, "ns/op")), num(r.stat(qa, "allocs/op")), num(r.stat(qa, "B/op"))})
		}
	}
	table(rep, 2, []string{"algo", "impl", "ns/op", "allocs/op", "B/op"}, rows)
	return nil
}

func (rep *report) allowN() error {
	r := rep.r
	var rows [][]string
	rep.p("## AllowN, mixed n\n\n`AllowN` with n drawn from 1, 1, 1, 1, 2, 3, 5, 8 on 1,000 existing keys, uniform, from both goroutines. go-limiter and uber have no all-or-nothing `AllowN` and are left out; juju runs `TakeMaxDuration(n, 0)`, ulule `Increment`, throttled the GCRA quantity, httprate `WithIncrement`.\n\n")
	if !rep.has("AllowN") {
		return nil
	}
	for _, a := range r.values(q("AllowN"), "algo") {
		for _, impl := range rep.impls(q("AllowN", "algo", a)) {
			qa := q("AllowN", "algo", a, "impl", impl)
			rows = append(rows, []string{a, rep.implLabel(impl), ns(r.stat(qa, "ns/op")), num(r.stat(qa, "allocs/op")), num(r.stat(qa, "admitted/op"))})
		}
	}
	table(rep, 2, []string{"algo", "impl", "ns/op", "allocs/op", "admitted/op"}, rows)
	return nil
}

func (rep *report) policy() error {
	r := rep.r
	var rows [][]string
	rep.p("## policy.Service.Check\n\n`Check(user, \"/orders\")` under the default rule (a token bucket no run exhausts), from both goroutines: pairs=1 is one pair shared by both, pairs=1000 spreads calls over 1,000 users. `policy-default` is the Service's own choice of variant; `policy-locked` and `policy-atomic` choose with `admit.WithFactory`.\n\n")
	if !rep.has("Policy") {
		return nil
	}
	pairs := r.values(q("Policy"), "pairs")
	for _, impl := range rep.impls(q("Policy")) {
		row := []string{rep.implLabel(impl)}
		for _, p := range pairs {
			row = append(row, ns(r.stat(q("Policy", "pairs", p, "impl", impl), "ns/op")))
		}
		row = append(row, num(r.stat(q("Policy", "impl", impl), "allocs/op")))
		rows = append(rows, row)
	}
	header := []string{"impl"}
	for _, p := range pairs {
		header = append(header, "pairs="+p)
	}
	table(rep, 1, append(header, "allocs/op"), rows)
	return nil
}

func (rep *report) eviction() error {
	r := rep.r
	var rows [][]string
	rep.p("## Eviction on vs off\n\n100,000 existing keys, uniform, both goroutines, with the store's idle-key eviction running and not. Eviction on is configured so that no key in use is lost, to measure what eviction costs the request path: go-limiter sweeps every 100 ms (with the minimum TTL its documentation asks for), throttled bounds its memstore with an LRU of 100,000 keys, ulule's memory store cleans every 100 ms. admit's locked and atomic rows have no eviction switch in this suite and run once, labelled off, as the reference (admit's stores drop only idle keys whose state is fresh, which the keyed rules here never produce during a run); admit's sharded store and any option that bounds an admit store become evict=on rows when they land, one row each in bench/impls.go.\n\n")
	if !rep.has("Eviction") {
		return nil
	}
	for _, a := range r.values(q("Eviction"), "algo") {
		for _, impl := range rep.impls(q("Eviction", "algo", a)) {
			qa := q("Eviction", "algo", a, "impl", impl)
			off, on := r.stat(qa.with("evict", "off"), "ns/op"), r.stat(qa.with("evict", "on"), "ns/op")
			rows = append(rows, []string{a, rep.implLabel(impl), ns(off), ns(on), fmtRatio(ratio(on, off))})
		}
	}
	table(rep, 2, []string{"algo", "impl", "evict=off", "evict=on", "on ÷ off"}, rows)
	return nil
}

func (rep *report) memory() error {
	r := rep.r
	var rows [][]string
	rep.p("## Memory\n\nA new limiter, then N distinct keys inserted (each admitted once; admit's rows with the rules and priming of the keyed workloads, so that no key is idle and evicted before the heap is measured; the sliding log at 64 per hour): bytes/key is the growth of the live heap after a full GC, divided by N; ns/key, allocs/key and B/key are the insertion's. One sample per size.\n\n")
	if !rep.has("Memory") {
		return nil
	}
	mkeys := r.values(q("Memory"), "keys")
	if len(mkeys) > 0 {
		if err := barChart(rep.img("memory.svg"), "Memory per key, "+mkeys[0]+" keys", "bytes/key", "live heap growth after a GC ÷ keys. Shorter is smaller.", rep.bars(q("Memory", "keys", mkeys[0]), "bytes/key", nil, true)); err != nil {
			return err
		}
		rep.p("![Memory per key](img/memory.svg)\n\n")
	}
	header := []string{"algo", "impl"}
	for _, k := range mkeys {
		header = append(header, "bytes/key ("+k+")")
	}
	header = append(header, "ns/key", "allocs/key", "B/key")
	for _, a := range r.values(q("Memory"), "algo") {
		for _, impl := range rep.impls(q("Memory", "algo", a)) {
			row := []string{a, rep.implLabel(impl)}
			for _, k := range mkeys {
				row = append(row, num(r.stat(q("Memory", "keys", k, "algo", a, "impl", impl), "bytes/key")))
			}
			qa := q("Memory", "keys", mkeys[0], "algo", a, "impl", impl)
			row = append(row, num(r.stat(qa, "ns/op")), num(r.stat(qa, "allocs/key")), num(r.stat(qa, "B/key")))
			rows = append(rows, row)
		}
	}
	table(rep, 2, header, rows)
	return nil
}

func (rep *report) instructions() {
	rep.p("## Instructions per Allow (callgrind)\n\n")
	if rep.ir == nil {
		rep.p("Not measured yet: run `make bench-instr`.\n\n")
		return
	}
	rep.p("Counted by valgrind's callgrind with `make bench-instr` (bench/cmd/instr), on %s: one key, serial, every call admitted. Instruction counts do not depend on the machine's load. The clock is excluded: valgrind turns the vDSO clock read into a system call, so every limiter reads a step clock (a field advanced 1 µs per read), and **net** subtracts a loop that reads the same clock the same way (the loop, the dynamic call, the clock read; the baselines below). **gross** is everything inside the measured loop.\n\n", rep.ir.date())
	var rows [][]string
	for _, row := range rep.ir.rows {
		rows = append(rows, []string{rep.implLabel(row.impl), row.algo, fmt.Sprintf("%.0f", row.gross), fmt.Sprintf("%.0f", row.net), row.note})
	}
	table(rep, 2, []string{"impl", "algo", "gross", "net", "what runs"}, rows)
	rows = nil
	for _, row := range rep.ir.baselines {
		rows = append(rows, []string{row.algo, fmt.Sprintf("%.0f", row.gross), row.note})
	}
	table(rep, 1, []string{"baseline", "instructions", "what it does"}, rows)
	if len(rep.ir.profile) > 0 {
		rep.p("Where the instructions of `%s` go, per call, by function (callgrind_annotate, exclusive; code inlined from another file is listed under that file):\n\n", rep.ir.profile[0].impl)
		rows = nil
		for _, p := range rep.ir.profile {
			rows = append(rows, []string{"`" + p.fn + "`", fmt.Sprintf("%.0f", p.perCall)})
		}
		table(rep, 1, []string{"function (file)", "instructions per call"}, rows)
	}
	rep.p("```\n")
	for _, c := range rep.ir.comments {
		rep.p("# %s\n", c)
	}
	rep.p("```\n\n")
}

func (rep *report) peers() {
	rep.p("## The peers, and how each is measured\n\n")
	versions := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			versions[d.Path] = d.Version
		}
	}
	v := func(path string) string {
		if s := versions[path]; s != "" {
			return path + " " + s
		}
		return path
	}
	table(rep, 4, []string{"impl", "module", "what is called", "notes"}, [][]string{
		{bench.XTime, v("golang.org/x/time"), "`Limiter.Allow` (`AllowN(time.Now(), n)`); keyed: a `sync.Map` of `*rate.Limiter`", "float token bucket under a mutex; reads `time.Now` (wall and monotonic)"},
		{bench.Uber, v("go.uber.org/ratelimit"), "`Take`", "**blocking only**: measured at 10^9/s so it never waits; no deny path, no keyed form, no AllowN"},
		{bench.Juju, v("github.com/juju/ratelimit"), "`Bucket.TakeAvailable(1)`; `TakeMaxDuration(n, 0)`; keyed: a `sync.Map` of `*Bucket`", "token bucket under a mutex"},
		{bench.GoLimiter, v("github.com/sethvargo/go-limiter"), "`memorystore` `Take`", "token bucket refilled per interval tick; an RWMutex-guarded map of mutex-guarded buckets; no AllowN"},
		{bench.Throttled, v("github.com/throttled/throttled/v2"), "`GCRARateLimiterCtx.RateLimitCtx` over `memstore`", "GCRA with CAS emulated under the store's lock; gives up after 10 CAS attempts with an error, counted here as a denial (visible as admitted/op < 1 under contention)"},
		{bench.Ulule, v("github.com/ulule/limiter/v3"), "`Limiter.Get` / `Increment` over the memory store", "fixed window; builds the prefixed key on every call (the allocations); counts denied requests too"},
		{bench.HTTPRate, v("github.com/go-chi/httprate"), "`RateLimiter.OnLimit` with response headers off", "sliding counter over xxh3 hashes of keys, one mutex for all keys; a request built once, a ResponseWriter that keeps nothing"},
	})
	rep.p("Every peer the issue named was fetched from the Go module proxy and built; none is left out. Each is configured as its documentation suggests, with a limit no run reaches for the admitted path (10^9 per second with a burst of 10^6 for the token buckets, as admit's `1000000 per 1ms`) and one per hour, spent, for the deny path.\n\n")
}

func (rep *report) benchstatTables(bs string) {
	rep.p("## benchstat tables\n\n")
	rep.p("From `bench/tables.sh`, exactly as benchstat prints them (sec/op: `n` is nanoseconds, `µ` microseconds). In a `-col /impl` table the first column is the base the others are compared with.\n\n")
	sections := strings.Split("\n"+bs, "\n## ")
	var headline, rest []string
	for _, s := range sections {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		title, body, _ := strings.Cut(s, "\n")
		block := fmt.Sprintf("### %s\n\n```\n%s\n```\n\n", title, strings.Trim(body, "\n"))
		if strings.HasPrefix(title, "Headline") {
			headline = append(headline, block)
		} else {
			rest = append(rest, block)
		}
	}
	for _, b := range headline {
		rep.p("%s", b)
	}
	rep.p("<details><summary>Every other table</summary>\n\n")
	for _, b := range rest {
		rep.p("%s", b)
	}
	rep.p("</details>\n")
}
