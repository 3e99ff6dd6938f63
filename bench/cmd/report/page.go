package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/admit-go/admit/bench"
)

// page is what benchmarks.md.tmpl renders: the run's provenance, formatted
// figures and tables. A section is nil when its workload did not run (a
// BENCH subset); within a workload that ran, every row the template names
// must be present, or the report fails (see need).
type page struct {
	Source, Profile, Target        string // bench/results/full.txt, full, make bench
	Date, Machine, GoVersion       string
	ProfileLine                    string
	LoadBefore, LoadAfter, Elapsed string
	Commands                       []string
	Cores                          string // from the results' header
	// BeforeContainers is true for a run made before atomic.New became the
	// lock-free table and sharded.New the map store (containersSwapped):
	// its keyed rows sharded and sharded-hashed measured the table, and its
	// keyed atomic rows package atomic's former keyed store.
	BeforeContainers bool
	Procs            int    // GOMAXPROCS of the workloads not swept over -cpu
	Both, All        string // "both goroutines" and "both" at GOMAXPROCS 2
	HotProcs         int    // the -cpu of the hot-key goals

	Headline headline
	Goals    goals

	Floors    *tbl
	Serial    *serialSection
	HotKey    *hotKeySection
	Keyed     *keyedSection
	Churn     *chartSection
	AllowN    *tbl
	Composite bool // the run measured BenchmarkComposite (its table is benchstat's)
	Observer  bool // the run measured BenchmarkObserver (its table is benchstat's)
	Policy    *tbl
	Eviction  *evictionSection
	Memory    *chartSection
	Instr     *instrSection

	KeyedInstr *keyedInstrSection
	Cache      *cacheSection
	Keys       keyShapes

	Impl      peerImpls
	Benchstat benchstatTables
}

type headline struct {
	Serial *struct{ Admit, XTime, Floor, VsXTime, VsFloor string }
	Coarse *struct{ Admit, VsXTime string }
	HotKey *struct {
		Procs                        int
		Admit, Uber, VsXTime, VsUber string
	}
	Instr  *struct{ Admit, XTime, Uber string }
	Keyed  *struct{ Admit, VsGoLimiter, VsXTime string }
	Memory *struct{ Admit, XTime, Allocs string }
}

// goal is one target admit set itself, and how this run measured against it.
type goal struct {
	Target  float64 // the threshold, in the unit the template's sentence gives it
	Known   bool    // measured in this run
	Verdict string
	// Formatted figures: admit's, the peer's (or the floor's), their ratio
	// as the target states it; Bare and BareRatio for the floor goal only.
	Admit, Peer, Ratio, Bare, BareRatio string
	Dist                                string // the keyed goals' distribution
	Impl, Keys                          string // the keyed-store goals' store and key count ("1,000,000")
}

// allocGoal is the goal of no allocation on an existing key, over every
// keyed row of admit's the run measured.
type allocGoal struct {
	Known             bool
	Verdict, Measured string
}

type instrGoal struct {
	Target                                               float64
	Known                                                bool
	Verdict                                              string
	Net, Gross, XTimeNet, XTimeGross, UberNet, UberGross string
}

type goals struct {
	Floor, XTime, Coarse, HotUber, HotXTime goal
	Instr                                   instrGoal
	Keyed                                   []goal

	// The keyed stores': the table (atomic.New) against go-limiter on
	// existing keys, each store against go-limiter on new keys, the
	// table's bytes per key, allocations.
	Table, Churn, Bytes []goal
	Allocs              allocGoal
}

type chart struct{ Name, Keys, File string }

type serialSection struct {
	Charts []chart
	Table  tbl
}

type hotKeySection struct {
	CPUs      string // "1,2,4,8"
	Outnumber string // "4 and 8": the -cpu values above the cores
	Chart     string // "" when there is nothing to draw
	Table     tbl
}

type keyedSection struct {
	Charts []chart
	Table  tbl
}

type chartSection struct {
	Chart string
	Table tbl
}

type evictionSection struct {
	References string // admit's rows measured with eviction off only
	AdmitOn    string // admit's rows also measured with eviction on
	Table      tbl
}

type instrSection struct {
	Date            string
	Rows, Baselines tbl
	Profile         *struct {
		Impl  string
		Table tbl
	}
	Comments []string
}

// keyedInstrSection is instr.txt's keyed section: instructions per keyed
// decision.
type keyedInstrSection struct {
	Date            string
	Rows, Baselines tbl
	Comments        []string
}

// cacheSection is cache.txt: cache misses per keyed decision.
type cacheSection struct {
	Date     string
	Table    tbl
	Comments []string
}

// keyShapes describes the keys of the keyed workloads at 100,000 and
// 1,000,000 keys.
type keyShapes struct{ Mean100k, Mean1M, Shortest, Longest string }

type peerImpls struct{ XTime, Uber, Juju, GoLimiter, Throttled, Ulule, HTTPRate string }

type benchstatTables struct{ Headline, Rest []benchstatTable }

type benchstatTable struct{ Title, Body string }

// tbl is a Markdown table: its first Left columns are text (left aligned),
// the rest numbers (right aligned).
type tbl struct {
	Left   int
	Header []string
	Rows   [][]string
}

func (t tbl) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s |\n", strings.Join(t.Header, " | "))
	seps := make([]string, len(t.Header))
	for i := range seps {
		seps[i] = "---"
		if i >= t.Left {
			seps[i] = "---:"
		}
	}
	fmt.Fprintf(&b, "| %s |\n", strings.Join(seps, " | "))
	for _, row := range t.Rows {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	return b.String()
}

// The thresholds of admit's goals.
const (
	goalFloor    = 1.1 // serial Allow ≤ 1.1× time.Since + one CAS
	goalXTime    = 2.5 // serial Allow ≥ 2.5× faster than x/time/rate
	goalCoarse   = 8   // the same on clock.Coarse, ≥ 8×
	goalHotUber  = 1.2 // hot key at -cpu hotProcs, ≥ 1.2× uber's Take
	goalHotXTime = 2.5 // hot key at -cpu hotProcs, ≥ 2.5× x/time/rate
	goalInstr    = 60  // instructions per Allow on the system clock beyond one time.Since
	goalKeyed    = 1.5 // 100,000 keys, ≥ 1.5× go-limiter
	hotProcs     = 8
)

// containersSwapped is when atomic.New became the lock-free table that
// sharded.New had built, and sharded.New the map store for every rule: the
// keyed rows keep their names, so a run's date says which container a row
// measured (RFC 3339 dates compare as strings).
const containersSwapped = "2026-12-03T17:39:00Z"

// The thresholds of the keyed stores' goals: existing keys, uniform or
// Zipf(1.1) alike, the table (atomic.New, row atomic-packed) against
// go-limiter, by key count; new keys, every store against go-limiter;
// the table's bytes per key at 1,000,000 keys, with full and with hashed
// keys. They were set for the table when sharded.New built it (rows
// sharded and sharded-hashed before containersSwapped). The goals set for
// atomic's former keyed store (80 bytes per key) went with it: the map
// store (sharded.New) has none of its own beyond those set for every store
// (churn, allocations).
var (
	goalTable = []struct {
		keys   string
		target float64
	}{{"100000", 2}, {"1000000", 1.5}}
	goalChurn = 1.0
	goalBytes = []struct {
		impl string
		max  float64
	}{{"atomic-packed", 48}, {bench.AtomicHashed, 24}}
	// churnStores are the keyed stores of the churn goal, token buckets:
	// the table, the map store (each with full and hashed keys) and locked.
	churnStores = []string{"atomic-packed", bench.AtomicHashed, "sharded", bench.ShardedHashed, "locked"}
)

// build shapes the run into the page and draws the charts.
func (rep *report) build(benchstat string) (*page, error) {
	r := rep.r
	h := r.header
	pg := &page{
		Source:           filepath.ToSlash(filepath.Join("results", filepath.Base(r.path))),
		Profile:          rep.profile,
		Target:           "make bench-" + rep.profile,
		Date:             h["date"],
		Machine:          fmt.Sprintf("%s, %s MHz; %s", h["cpu-model"], h["cpu-mhz"], h["host"]),
		GoVersion:        h["go-version"],
		ProfileLine:      h["profile"],
		LoadBefore:       h["load-before"],
		LoadAfter:        h["load-after"],
		Elapsed:          h["elapsed"],
		Commands:         r.command,
		Cores:            h["cores"],
		BeforeContainers: h["date"] < containersSwapped,
		Procs:            r.procs(),
		HotProcs:         hotProcs,
		Impl:             peerImpls{bench.XTime, bench.Uber, bench.Juju, bench.GoLimiter, bench.Throttled, bench.Ulule, bench.HTTPRate},
		Benchstat:        splitBenchstat(benchstat),
	}
	if rep.profile == "full" {
		pg.Target = "make bench"
	}
	switch pg.Procs {
	case 1:
		pg.Both, pg.All = "one goroutine", "one"
	case 2:
		pg.Both, pg.All = "both goroutines", "both"
	default:
		pg.Both, pg.All = fmt.Sprintf("all %d goroutines", pg.Procs), fmt.Sprintf("all %d", pg.Procs)
	}
	rep.headlineAndGoals(pg)
	pg.Floors = rep.floors()
	pg.Serial = rep.serial()
	pg.HotKey = rep.hotKey()
	pg.Keyed = rep.keyed()
	pg.Churn = rep.churn()
	pg.AllowN = rep.allowN()
	pg.Composite = rep.ran("Composite")
	pg.Observer = rep.ran("Observer")
	pg.Policy = rep.policy()
	pg.Eviction = rep.eviction()
	pg.Memory = rep.memory()
	pg.Instr = rep.instructions()
	pg.KeyedInstr = rep.keyedInstructions()
	pg.Cache = rep.cacheMisses()
	pg.Keys = keyShapesOf()
	if len(rep.missing) > 0 {
		return nil, fmt.Errorf("%s lacks rows that docs/benchmarks.md documents (was a row renamed or removed in bench/impls.go?):\n\t%s",
			r.path, strings.Join(rep.missing, "\n\t"))
	}
	return pg, nil
}

// procs returns the GOMAXPROCS of the workloads that are not swept over
// -cpu (the suffix of their names), 0 when none ran.
func (r *run) procs() int {
	for _, key := range r.keys {
		for _, s := range r.samples[key] {
			if s.labels["bench"] != "HotKey" {
				return s.procs
			}
		}
	}
	return 0
}

// ran reports whether the run measured the named workload (Serial, HotKey,
// ...): a BENCH subset leaves some out, and their sections say so.
func (rep *report) ran(name string) bool { return len(rep.r.values(q(name), "bench")) > 0 }

// need returns the stat the report documents by name; a missing one is
// recorded, and fails the report.
func (rep *report) need(qu query, unit string) stat {
	s := rep.r.stat(qu, unit)
	if !s.ok() {
		rep.missing = append(rep.missing, qu.String()+" ("+unit+")")
	}
	return s
}

// needInstr is need for a row of instr.txt.
func (rep *report) needInstr(impl, algo string) instrRow {
	row, ok := rep.ir.find(impl, algo)
	if !ok {
		rep.missing = append(rep.missing, fmt.Sprintf("instr.txt: impl=%s algo=%s", impl, algo))
	}
	return row
}

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

// speed says how many times faster (or slower) admit is, from peer ÷ admit,
// to one decimal, as the headline gives it.
func speed(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 1:
		return fmt.Sprintf("%.1f× faster than", x)
	}
	return fmt.Sprintf("%.1f× slower than", 1/x)
}

func count(x float64) string { return fmt.Sprintf("%.0f", x) }

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

func verdict(known, met, noisy bool) string {
	v := "**missed**"
	switch {
	case !known:
		return "not measured"
	case met:
		v = "met"
	}
	if noisy {
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

// atLeast fills a goal "admit is at least target× faster than peer".
func atLeast(g *goal, admit, peer stat) {
	x := ratio(peer, admit)
	g.Known, g.Admit, g.Peer, g.Ratio = true, ns(admit), ns(peer), faster(x)
	g.Verdict = verdict(true, x >= g.Target, straddles(peer, admit, g.Target))
}

func (rep *report) headlineAndGoals(pg *page) {
	hl, gs := &pg.Headline, &pg.Goals
	tb := "token-bucket"
	gs.Floor = goal{Target: goalFloor, Verdict: verdict(false, false, false)}
	gs.XTime = goal{Target: goalXTime, Verdict: gs.Floor.Verdict}
	gs.Coarse = goal{Target: goalCoarse, Verdict: gs.Floor.Verdict}
	gs.HotUber = goal{Target: goalHotUber, Verdict: gs.Floor.Verdict}
	gs.HotXTime = goal{Target: goalHotXTime, Verdict: gs.Floor.Verdict}
	gs.Instr = instrGoal{Target: goalInstr, Verdict: gs.Floor.Verdict}

	if rep.ran("Serial") {
		serial := func(impl string) stat {
			return rep.need(q("Serial", "path", "allow", "algo", tb, "impl", impl), "ns/op")
		}
		ap, apc, xt, fl := serial("atomic-packed"), serial("atomic-packed-coarse"), serial(bench.XTime), serial(bench.FloorCAS)
		if ap.ok() && xt.ok() && fl.ok() {
			hl.Serial = &struct{ Admit, XTime, Floor, VsXTime, VsFloor string }{
				fmtNum(ap.center), fmtNum(xt.center), fmtNum(fl.center), speed(ratio(xt, ap)), fmtRatio(ratio(ap, fl))}
			atLeast(&gs.XTime, ap, xt)
		}
		if rep.ran("Floor") {
			bare := rep.need(q("Floor", "op", "since+cas"), "ns/op")
			if ap.ok() && fl.ok() && bare.ok() {
				x := ratio(ap, fl)
				g := &gs.Floor
				g.Known, g.Admit, g.Peer, g.Ratio = true, ns(ap), ns(fl), fmtRatio(x)
				g.Bare, g.BareRatio = ns(bare), fmtRatio(ratio(ap, bare))
				g.Verdict = verdict(true, x <= g.Target, straddles(ap, fl, g.Target))
			}
		}
		if apc.ok() && xt.ok() {
			hl.Coarse = &struct{ Admit, VsXTime string }{fmtNum(apc.center), speed(ratio(xt, apc))}
			atLeast(&gs.Coarse, apc, xt)
		}
	}

	if rep.ran("HotKey") {
		hot := func(impl string) stat {
			return rep.need(q("HotKey", "algo", tb, "impl", impl).at(hotProcs), "ns/op")
		}
		hap, hub, hxt := hot("atomic-packed"), hot(bench.Uber), hot(bench.XTime)
		if hap.ok() && hub.ok() && hxt.ok() {
			hl.HotKey = &struct {
				Procs                        int
				Admit, Uber, VsXTime, VsUber string
			}{hotProcs, fmtNum(hap.center), fmtNum(hub.center), speed(ratio(hxt, hap)), speed(ratio(hub, hap))}
			atLeast(&gs.HotUber, hap, hub)
			atLeast(&gs.HotXTime, hap, hxt)
		}
	}

	if rep.ir != nil {
		ap, xt, ub := rep.needInstr("atomic-packed", tb), rep.needInstr(bench.XTime, tb), rep.needInstr(bench.Uber, tb)
		hl.Instr = &struct{ Admit, XTime, Uber string }{count(ap.net), count(xt.net), count(ub.net)}
		// The goal is on the system clock: what each limiter adds to one
		// read of the real clock (bench/cmd/instr's "-sysclock" rows).
		sap, sxt, sub := rep.needInstr("atomic-packed-sysclock", tb), rep.needInstr(bench.XTime+"-sysclock", tb), rep.needInstr(bench.Uber+"-sysclock", tb)
		g := &gs.Instr
		g.Known, g.Verdict = true, verdict(true, sap.net <= g.Target, false)
		g.Net, g.Gross = count(sap.net), count(sap.gross)
		g.XTimeNet, g.XTimeGross, g.UberNet, g.UberGross = count(sxt.net), count(sxt.gross), count(sub.net), count(sub.gross)
	}

	for _, dist := range []string{"uniform", "zipf"} {
		g := goal{Target: goalKeyed, Dist: dist, Verdict: verdict(false, false, false)}
		if rep.ran("Keyed") {
			keyed := func(impl string) stat {
				return rep.need(q("Keyed", "keys", "100000", "dist", dist, "algo", tb, "impl", impl), "ns/op")
			}
			k, gl := keyed("atomic-packed"), keyed(bench.GoLimiter)
			if k.ok() && gl.ok() {
				atLeast(&g, k, gl)
				if dist == "uniform" {
					if kx := keyed(bench.XTime); kx.ok() {
						hl.Keyed = &struct{ Admit, VsGoLimiter, VsXTime string }{fmtNum(k.center), speed(ratio(gl, k)), speed(ratio(kx, k))}
					}
				}
			}
		}
		gs.Keyed = append(gs.Keyed, g)
	}

	rep.storeGoals(gs)

	if rep.ran("Memory") {
		mem := func(impl string) stat {
			return rep.need(q("Memory", "keys", "100000", "algo", tb, "impl", impl), "bytes/key")
		}
		m, mx := mem("atomic-packed"), mem(bench.XTime)
		// The allocations of an existing key's Allow, admitted and denied,
		// wherever this run measured them.
		var allocs []stat
		if rep.ran("Serial") {
			for _, path := range []string{"allow", "deny"} {
				allocs = append(allocs, rep.need(q("Serial", "path", path, "algo", tb, "impl", "atomic-packed"), "allocs/op"))
			}
		}
		if rep.ran("Keyed") {
			allocs = append(allocs, rep.need(q("Keyed", "keys", "100000", "dist", "uniform", "algo", tb, "impl", "atomic-packed"), "allocs/op"))
		}
		most := 0.0
		for _, a := range allocs {
			most = math.Max(most, a.center)
		}
		if m.ok() && mx.ok() && len(allocs) > 0 {
			a := "zero allocations"
			if most > 0 {
				a = "up to " + fmtNum(most) + " allocations"
			}
			hl.Memory = &struct{ Admit, XTime, Allocs string }{count(m.center), count(mx.center), a}
		}
	}
}

// storeGoals fills the keyed stores' goals. Their rows are not required:
// a run from before the row existed (atomic-hashed), or without
// 1,000,000 keys (make bench-quick), reports the goal as not measured; nor
// does a run from before containersSwapped, whose atomic rows measured
// atomic's former keyed store, measure the table's goals.
func (rep *report) storeGoals(gs *goals) {
	r, tb := rep.r, "token-bucket"
	unknown := verdict(false, false, false)
	table := r.header["date"] >= containersSwapped
	for _, c := range goalTable {
		for _, dist := range []string{"uniform", "zipf"} {
			g := goal{Target: c.target, Impl: "atomic-packed", Keys: thousands(c.keys), Dist: dist, Verdict: unknown}
			keyed := func(impl string) stat {
				return r.stat(q("Keyed", "keys", c.keys, "dist", dist, "algo", tb, "impl", impl), "ns/op")
			}
			if k, gl := keyed("atomic-packed"), keyed(bench.GoLimiter); table && k.ok() && gl.ok() {
				atLeast(&g, k, gl)
			}
			gs.Table = append(gs.Table, g)
		}
	}
	gl := r.stat(q("Churn", "algo", tb, "impl", bench.GoLimiter), "ns/op")
	for _, impl := range churnStores {
		g := goal{Target: goalChurn, Impl: impl, Verdict: unknown}
		if c := r.stat(q("Churn", "algo", tb, "impl", impl), "ns/op"); c.ok() && gl.ok() {
			atLeast(&g, c, gl)
		}
		gs.Churn = append(gs.Churn, g)
	}
	for _, b := range goalBytes {
		g := goal{Target: b.max, Impl: b.impl, Keys: thousands("1000000"), Verdict: unknown}
		if m := r.stat(q("Memory", "keys", "1000000", "algo", tb, "impl", b.impl), "bytes/key"); table && m.ok() {
			g.Known, g.Admit = true, num(m)
			g.Verdict = verdict(true, m.center <= b.max, false)
		}
		gs.Bytes = append(gs.Bytes, g)
	}

	// The most allocations per call of each of admit's keyed token-bucket
	// rows (the keyed goals' algorithm), over every key count and
	// distribution. The other algorithms' rows are in the Keyed table; two
	// allocate by design, not on the existing-key path: the sliding log's
	// keys fall idle and are stored again during a run, and a sliding
	// counter too wide to pack is a snapshot, one allocation per admission.
	most := map[string]float64{}
	var impls []string
	for _, key := range r.keys {
		for _, s := range r.samples[key] {
			impl := s.labels["impl"]
			a, ok := s.values["allocs/op"]
			if s.labels["bench"] != "Keyed" || s.labels["algo"] != tb || rep.familyOf(impl) != bench.FamilyAdmit || !ok {
				continue
			}
			if _, seen := most[impl]; !seen {
				impls = append(impls, impl)
			}
			most[impl] = math.Max(most[impl], a)
		}
	}
	gs.Allocs.Verdict = unknown
	if len(impls) > 0 {
		var allocating []string
		for _, impl := range impls {
			if most[impl] > 0 {
				allocating = append(allocating, fmt.Sprintf("%s up to %s", impl, fmtNum(most[impl])))
			}
		}
		gs.Allocs.Known = true
		gs.Allocs.Verdict = verdict(true, len(allocating) == 0, false)
		gs.Allocs.Measured = "0 on every row of " + andList(impls)
		if len(allocating) > 0 {
			gs.Allocs.Measured = andList(allocating) + "; 0 on the others"
		}
	}
}

// thousands writes a count with commas: 1000000 as 1,000,000.
func thousands(n string) string {
	for i := len(n) - 3; i > 0; i -= 3 {
		n = n[:i] + "," + n[i:]
	}
	return n
}

// keyShapesOf describes bench.Keys at 100,000 and 1,000,000 keys.
func keyShapesOf() keyShapes {
	m100k, lo, _ := bench.KeyLengths(100_000)
	m1M, _, hi := bench.KeyLengths(1_000_000)
	return keyShapes{Mean100k: fmt.Sprintf("%.1f", m100k), Mean1M: fmt.Sprintf("%.1f", m1M), Shortest: strconv.Itoa(lo), Longest: strconv.Itoa(hi)}
}

// ---- the sections ----

func (rep *report) floors() *tbl {
	r := rep.r
	if !rep.ran("Floor") {
		return nil
	}
	t := &tbl{Left: 1, Header: []string{"op", "ns/op"}}
	for _, op := range r.values(q("Floor"), "op") {
		t.Rows = append(t.Rows, []string{"`" + op + "`", ns(r.stat(q("Floor", "op", op), "ns/op"))})
	}
	return t
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

// bars returns one bar per impl (and per algo, when byAlgo) of the samples
// matching qu.
func (rep *report) bars(qu query, unit string, byAlgo bool) []bar {
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
			}
			bars = append(bars, bar{label: l, value: s.center, lo: s.lo, hi: s.hi, color: colorFor(rep.familyOf(impl), impl), emphasis: impl == "atomic-packed"})
		}
	}
	return bars
}

func (rep *report) serial() *serialSection {
	r := rep.r
	if !rep.ran("Serial") {
		return nil
	}
	sec := &serialSection{}
	for _, path := range []string{"allow", "deny"} {
		name := "serial-" + path + ".svg"
		rep.charts[name] = barChart("One key, serial, "+path+" path", "ns/op (median, 95% CI)", "blue: admit; teal: admit on clock.Coarse; green: floors; brown: peers. Shorter is faster.",
			rep.bars(q("Serial", "path", path), "ns/op", true))
		sec.Charts = append(sec.Charts, chart{Name: path, File: name})
	}
	xt := rep.need(q("Serial", "path", "allow", "algo", "token-bucket", "impl", bench.XTime), "ns/op")
	sec.Table = tbl{Left: 2, Header: []string{"algo", "impl", "allow", "deny", "allocs/op (allow)", "admitted/op (allow / deny)", "x/time/rate allow ÷ this"}}
	for _, a := range r.values(q("Serial"), "algo") {
		for _, impl := range rep.impls(q("Serial", "algo", a)) {
			qa := q("Serial", "algo", a, "impl", impl)
			al, de := r.stat(qa.with("path", "allow"), "ns/op"), r.stat(qa.with("path", "deny"), "ns/op")
			sec.Table.Rows = append(sec.Table.Rows, []string{a, rep.implLabel(impl), ns(al), ns(de),
				num(r.stat(qa.with("path", "allow"), "allocs/op")), num(r.stat(qa.with("path", "allow"), "admitted/op")) + " / " + num(r.stat(qa.with("path", "deny"), "admitted/op")),
				fmtRatio(ratio(xt, al))})
		}
	}
	return sec
}

func (rep *report) hotKey() *hotKeySection {
	r := rep.r
	if !rep.ran("HotKey") {
		return nil
	}
	procs := []int{}
	for _, key := range r.keys {
		for _, s := range r.samples[key] {
			if s.labels["bench"] == "HotKey" && !slices.Contains(procs, s.procs) {
				procs = append(procs, s.procs)
			}
		}
	}
	slices.Sort(procs)
	sec := &hotKeySection{}
	cores, _ := strconv.Atoi(r.header["cores"])
	var cpus, over []string
	for _, p := range procs {
		cpus = append(cpus, strconv.Itoa(p))
		if cores > 0 && p > cores {
			over = append(over, strconv.Itoa(p))
		}
	}
	sec.CPUs = strings.Join(cpus, ",")
	sec.Outnumber = andList(over)

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
	if svg := lineChart("Hot key: throughput vs -cpu (token buckets)", "GOMAXPROCS (-cpu), "+r.header["cores"]+" cores", "million Allow per second", "solid: admit; dashed: peers and the floor. Higher is better.", lines); svg != nil {
		rep.charts["hotkey.svg"] = svg
		sec.Chart = "hotkey.svg"
	}

	header := []string{"algo", "impl"}
	for _, p := range procs {
		header = append(header, fmt.Sprintf("-cpu %d", p))
	}
	last := procs[len(procs)-1]
	header = append(header, fmt.Sprintf("admitted/op (-cpu %d)", last), fmt.Sprintf("x/time/rate ÷ this (-cpu %d)", last))
	xt := rep.need(q("HotKey", "algo", "token-bucket", "impl", bench.XTime).at(last), "ns/op")
	sec.Table = tbl{Left: 2, Header: header}
	for _, a := range r.values(q("HotKey"), "algo") {
		for _, impl := range rep.impls(q("HotKey", "algo", a)) {
			row := []string{a, rep.implLabel(impl)}
			for _, p := range procs {
				row = append(row, ns(r.stat(q("HotKey", "algo", a, "impl", impl).at(p), "ns/op")))
			}
			row = append(row, num(r.stat(q("HotKey", "algo", a, "impl", impl).at(last), "admitted/op")),
				fmtRatio(ratio(xt, r.stat(q("HotKey", "algo", a, "impl", impl).at(last), "ns/op"))))
			sec.Table.Rows = append(sec.Table.Rows, row)
		}
	}
	return sec
}

// andList joins "4", "8" as "4 and 8", and three or more as "2, 4 and 8".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func (rep *report) keyed() *keyedSection {
	r := rep.r
	if !rep.ran("Keyed") {
		return nil
	}
	sec := &keyedSection{}
	keys := r.values(q("Keyed"), "keys")
	dists := r.values(q("Keyed"), "dist")
	// One chart per distribution, at the size every row runs; the table has
	// the other sizes.
	for _, d := range dists {
		bars := rep.bars(q("Keyed", "keys", "100000", "dist", d), "ns/op", true)
		if len(bars) == 0 {
			continue
		}
		name := "keyed-100000-" + d + ".svg"
		rep.charts[name] = barChart("Keyed: 100000 keys, "+d, "ns/op (median, 95% CI)", fmt.Sprintf("%d goroutines; blue: admit; teal: admit on clock.Coarse; brown: peers. Shorter is faster.", r.procs()), bars)
		sec.Charts = append(sec.Charts, chart{Name: d, Keys: "100000", File: name})
	}
	header := []string{"algo", "impl"}
	for _, k := range keys {
		for _, d := range dists {
			header = append(header, k+" "+d)
		}
	}
	header = append(header, "allocs/op", "go-limiter ÷ this (100000 uniform)")
	gl := rep.need(q("Keyed", "keys", "100000", "dist", "uniform", "algo", "token-bucket", "impl", bench.GoLimiter), "ns/op")
	sec.Table = tbl{Left: 2, Header: header}
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
			sec.Table.Rows = append(sec.Table.Rows, row)
		}
	}
	return sec
}

func (rep *report) churn() *chartSection {
	r := rep.r
	if !rep.ran("Churn") {
		return nil
	}
	rep.charts["churn.svg"] = barChart("New-key churn: every call a new key", "ns/op (median, 95% CI)", "1 goroutine. Shorter is faster.", rep.bars(q("Churn"), "ns/op", true))
	sec := &chartSection{Chart: "churn.svg", Table: tbl{Left: 2, Header: []string{"algo", "impl", "ns/op", "allocs/op", "B/op"}}}
	for _, a := range r.values(q("Churn"), "algo") {
		for _, impl := range rep.impls(q("Churn", "algo", a)) {
			qa := q("Churn", "algo", a, "impl", impl)
			sec.Table.Rows = append(sec.Table.Rows, []string{a, rep.implLabel(impl), ns(r.stat(qa, "ns/op")), num(r.stat(qa, "allocs/op")), num(r.stat(qa, "B/op"))})
		}
	}
	return sec
}

func (rep *report) allowN() *tbl {
	r := rep.r
	if !rep.ran("AllowN") {
		return nil
	}
	t := &tbl{Left: 2, Header: []string{"algo", "impl", "ns/op", "allocs/op", "admitted/op"}}
	for _, a := range r.values(q("AllowN"), "algo") {
		for _, impl := range rep.impls(q("AllowN", "algo", a)) {
			qa := q("AllowN", "algo", a, "impl", impl)
			t.Rows = append(t.Rows, []string{a, rep.implLabel(impl), ns(r.stat(qa, "ns/op")), num(r.stat(qa, "allocs/op")), num(r.stat(qa, "admitted/op"))})
		}
	}
	return t
}

func (rep *report) policy() *tbl {
	r := rep.r
	if !rep.ran("Policy") {
		return nil
	}
	pairs := r.values(q("Policy"), "pairs")
	header := []string{"impl"}
	for _, p := range pairs {
		header = append(header, "pairs="+p)
	}
	t := &tbl{Left: 1, Header: append(header, "allocs/op")}
	for _, impl := range rep.impls(q("Policy")) {
		row := []string{rep.implLabel(impl)}
		for _, p := range pairs {
			row = append(row, ns(r.stat(q("Policy", "pairs", p, "impl", impl), "ns/op")))
		}
		row = append(row, num(r.stat(q("Policy", "impl", impl), "allocs/op")))
		t.Rows = append(t.Rows, row)
	}
	return t
}

func (rep *report) eviction() *evictionSection {
	r := rep.r
	if !rep.ran("Eviction") {
		return nil
	}
	sec := &evictionSection{Table: tbl{Left: 2, Header: []string{"algo", "impl", "evict=off", "evict=on", "on ÷ off"}}}
	var refs, on []string
	for _, a := range r.values(q("Eviction"), "algo") {
		var aRefs, aOn []string
		for _, impl := range rep.impls(q("Eviction", "algo", a)) {
			qa := q("Eviction", "algo", a, "impl", impl)
			off, evicting := r.stat(qa.with("evict", "off"), "ns/op"), r.stat(qa.with("evict", "on"), "ns/op")
			sec.Table.Rows = append(sec.Table.Rows, []string{a, rep.implLabel(impl), ns(off), ns(evicting), fmtRatio(ratio(evicting, off))})
			switch {
			case rep.familyOf(impl) != bench.FamilyAdmit:
			case evicting.ok():
				aOn = append(aOn, impl)
			default:
				aRefs = append(aRefs, impl)
			}
		}
		refs = appendNamed(refs, aRefs, a)
		on = appendNamed(on, aOn, a)
	}
	sec.References, sec.AdmitOn = andList(refs), andList(on)
	if sec.References == "" {
		rep.missing = append(rep.missing, "Eviction: admit's reference rows (evict=off only)")
	}
	return sec
}

// appendNamed appends "atomic-packed and locked token buckets" for impls of
// algo (token-bucket).
func appendNamed(names, impls []string, algo string) []string {
	if len(impls) == 0 {
		return names
	}
	a := strings.ReplaceAll(algo, "-", " ")
	if len(impls) > 1 {
		a += "s"
	}
	return append(names, andList(impls)+" "+a)
}

func (rep *report) memory() *chartSection {
	r := rep.r
	if !rep.ran("Memory") {
		return nil
	}
	sec := &chartSection{}
	mkeys := r.values(q("Memory"), "keys")
	rep.charts["memory.svg"] = barChart("Memory per key, "+mkeys[0]+" keys", "bytes/key", "live heap growth after a GC ÷ keys. Shorter is smaller.", rep.bars(q("Memory", "keys", mkeys[0]), "bytes/key", true))
	sec.Chart = "memory.svg"
	header := []string{"algo", "impl"}
	for _, k := range mkeys {
		header = append(header, "bytes/key ("+k+")")
	}
	sec.Table = tbl{Left: 2, Header: append(header, "ns/key", "allocs/key", "B/key")}
	for _, a := range r.values(q("Memory"), "algo") {
		for _, impl := range rep.impls(q("Memory", "algo", a)) {
			row := []string{a, rep.implLabel(impl)}
			for _, k := range mkeys {
				row = append(row, num(r.stat(q("Memory", "keys", k, "algo", a, "impl", impl), "bytes/key")))
			}
			qa := q("Memory", "keys", mkeys[0], "algo", a, "impl", impl)
			row = append(row, num(r.stat(qa, "ns/op")), num(r.stat(qa, "allocs/key")), num(r.stat(qa, "B/key")))
			sec.Table.Rows = append(sec.Table.Rows, row)
		}
	}
	return sec
}

func (rep *report) instructions() *instrSection {
	ir := rep.ir
	if ir == nil {
		return nil
	}
	sec := &instrSection{Date: ir.date(), Comments: ir.comments,
		Rows:      tbl{Left: 2, Header: []string{"impl", "algo", "gross", "net", "what runs"}},
		Baselines: tbl{Left: 1, Header: []string{"baseline", "instructions", "what it does"}},
	}
	for _, row := range ir.rows {
		sec.Rows.Rows = append(sec.Rows.Rows, []string{rep.implLabel(row.impl), row.algo, count(row.gross), count(row.net), row.note})
	}
	for _, row := range ir.baselines {
		sec.Baselines.Rows = append(sec.Baselines.Rows, []string{row.algo, count(row.gross), row.note})
	}
	if len(ir.profile) > 0 {
		sec.Profile = &struct {
			Impl  string
			Table tbl
		}{Impl: ir.profile[0].impl, Table: tbl{Left: 1, Header: []string{"function (file)", "instructions per call"}}}
		for _, p := range ir.profile {
			sec.Profile.Table.Rows = append(sec.Profile.Table.Rows, []string{"`" + p.fn + "`", count(p.perCall)})
		}
	}
	return sec
}

func (rep *report) keyedInstructions() *keyedInstrSection {
	ir := rep.ir
	if ir == nil || len(ir.keyedRows) == 0 {
		return nil
	}
	sec := &keyedInstrSection{Date: ir.date(), Comments: ir.keyedComments,
		Rows:      tbl{Left: 2, Header: []string{"impl", "algo", "gross", "net", "what runs"}},
		Baselines: tbl{Left: 1, Header: []string{"baseline", "instructions", "what it does"}},
	}
	for _, row := range ir.keyedRows {
		sec.Rows.Rows = append(sec.Rows.Rows, []string{rep.implLabel(row.impl), row.algo, count(row.gross), count(row.net), row.note})
	}
	for _, row := range ir.keyedBaselines {
		sec.Baselines.Rows = append(sec.Baselines.Rows, []string{row.algo, count(row.gross), row.note})
	}
	return sec
}

func (rep *report) cacheMisses() *cacheSection {
	cr := rep.cr
	if cr == nil || len(cr.rows) == 0 {
		return nil
	}
	sec := &cacheSection{Date: cr.date(), Comments: cr.comments,
		Table: tbl{Left: 2, Header: []string{"impl", "algo", "LL misses, net", "LL misses", "D1 misses, net", "D1 misses", "instructions", "drift", "what runs"}}}
	two := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	for _, row := range cr.rows {
		sec.Table.Rows = append(sec.Table.Rows, []string{rep.implLabel(row.impl), row.algo,
			two(row.llnet), two(row.ll), two(row.d1net), two(row.d1), count(row.ir), row.drift, row.note})
	}
	return sec
}

// splitBenchstat splits bench/tables.sh's output into its tables, the
// headline ones first.
func splitBenchstat(bs string) benchstatTables {
	var t benchstatTables
	for _, s := range strings.Split("\n"+bs, "\n## ") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		title, body, _ := strings.Cut(s, "\n")
		bt := benchstatTable{Title: title, Body: strings.Trim(body, "\n")}
		if strings.HasPrefix(title, "Headline") {
			t.Headline = append(t.Headline, bt)
		} else {
			t.Rest = append(t.Rest, bt)
		}
	}
	return t
}
