package main

// Figures quoted in README.md and docs/*.md, checked against the results.
//
// A quoted figure carries a marker, an HTML comment (invisible on GitHub)
// right after it, that says where it comes from:
//
//	93 ns<!--bench: Serial/allow/token-bucket/atomic-packed-->
//	2.1×<!--bench: Serial/allow/token-bucket/xtime-rate / Serial/allow/token-bucket/atomic-packed-->
//	93.1 ns ±2%<!--bench: Serial/allow/token-bucket/atomic-packed-->
//	105<!--bench: Memory/100000/token-bucket/atomic-packed bytes/key-->
//	+33%<!--bench: Redis/token-bucket/serial/admit vs Redis/token-bucket/serial/redis_rate-->
//	129<!--bench: Instr/atomic-packed/token-bucket-->
//	2026-11-29T16:01Z<!--bench: date-->
//
// bench/README.md documents the grammar; checkFigures implements it.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// sources are the results files figures may come from: the latest run (the
// one docs/benchmarks.md is generated from), redis.txt, instr.txt as the
// pseudo-benchmarks Instr and InstrKeyed (labels impl and algo, units net
// and gross), and cache.txt as the pseudo-benchmark Cache (labels impl and
// algo, units LL-net, LL, D1-net, D1 and Ir).
type sources struct {
	runs []*run
}

func loadSources(results string) (*sources, error) {
	latest, err := latestRun(results)
	if err != nil {
		return nil, err
	}
	src := &sources{runs: []*run{latest}}
	redis, err := loadRun(filepath.Join(results, "redis.txt"))
	switch {
	case err == nil:
		src.runs = append(src.runs, redis)
	case !os.IsNotExist(err):
		return nil, err
	}
	ir, err := loadInstr(filepath.Join(results, "instr.txt"))
	switch {
	case err == nil:
		src.runs = append(src.runs, ir.asRun(filepath.Join(results, "instr.txt")))
	case !os.IsNotExist(err):
		return nil, err
	}
	cr, err := loadCache(filepath.Join(results, "cache.txt"))
	switch {
	case err == nil:
		src.runs = append(src.runs, cr.asRun(filepath.Join(results, "cache.txt")))
	case !os.IsNotExist(err):
		return nil, err
	}
	return src, nil
}

// asRun presents instr.txt as a run of the benchmark Instr.
func (ir *instrRun) asRun(path string) *run {
	r := &run{path: path, header: map[string]string{"date": ir.date()}, samples: map[string][]sample{}}
	add := func(impl, algo string, values map[string]float64) {
		key := "Instr/impl=" + impl + "/algo=" + algo + "@1"
		r.keys = append(r.keys, key)
		r.samples[key] = []sample{{labels: map[string]string{"bench": "Instr", "impl": impl, "algo": algo}, procs: 1, values: values}}
	}
	for _, row := range ir.rows {
		add(row.impl, row.algo, map[string]float64{"net": row.net, "gross": row.gross})
	}
	for _, row := range ir.baselines {
		add("baseline", row.algo, map[string]float64{"gross": row.gross})
	}
	// The keyed stores' rows are the pseudo-benchmark InstrKeyed of the
	// same file.
	addKeyed := func(impl, algo string, values map[string]float64) {
		key := "InstrKeyed/impl=" + impl + "/algo=" + algo + "@1"
		r.keys = append(r.keys, key)
		r.samples[key] = []sample{{labels: map[string]string{"bench": "InstrKeyed", "impl": impl, "algo": algo}, procs: 1, values: values}}
	}
	for _, row := range ir.keyedRows {
		addKeyed(row.impl, row.algo, map[string]float64{"net": row.net, "gross": row.gross})
	}
	for _, row := range ir.keyedBaselines {
		addKeyed("baseline", row.algo, map[string]float64{"gross": row.gross})
	}
	return r
}

// find returns the run that holds the benchmark name.
func (src *sources) find(name string) (*run, error) {
	for _, r := range src.runs {
		if len(r.values(q(name), "bench")) > 0 {
			return r, nil
		}
	}
	files := make([]string, len(src.runs))
	for i, r := range src.runs {
		files[i] = filepath.Base(r.path)
	}
	return nil, fmt.Errorf("no benchmark %s in %s", name, strings.Join(files, ", "))
}

var (
	markerRE = regexp.MustCompile(`<!--\s*bench:\s*(.*?)\s*-->`)
	// figureRE is a quoted figure at the end of the text before a marker: a
	// sign, a number, a unit, a confidence interval.
	figureRE = regexp.MustCompile(`([+\-−]?)(\d[\d,]*(?:\.\d+)?)\s*(ns|µs|µ|ms|%|×)?(?:\s*±\s*(\d+)%)?$`)
	dateRE   = regexp.MustCompile(`\d{4}-\d\d-\d\d(?:T\d\d:\d\d(?::\d\d)?Z?)?$`)
	goRE     = regexp.MustCompile(`(?:go)?(\d+\.\d+(?:\.\d+)?)$`)
)

// checkFigures checks every marked figure of a document; it returns how
// many it found and what is wrong with them, each error naming the file and
// line.
func checkFigures(file, text string, src *sources) (int, []error) {
	var errs []error
	n := 0
	for i, line := range strings.Split(text, "\n") {
		for _, m := range markerRE.FindAllStringSubmatchIndex(line, -1) {
			n++
			before := strings.TrimRight(line[:m[0]], " )*`")
			if err := checkFigure(before, line[m[2]:m[3]], src); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %w", file, i+1, err))
			}
		}
	}
	return n, errs
}

// checkFigure checks the figure that ends before against the marker's
// expression.
func checkFigure(before, expr string, src *sources) error {
	f := strings.Fields(expr)
	if len(f) == 0 {
		return fmt.Errorf("an empty bench: marker")
	}
	if f[0] == "date" || f[0] == "go" {
		return checkHeader(before, f, src)
	}
	fm := figureRE.FindStringSubmatch(before)
	if fm == nil {
		return fmt.Errorf("no figure right before <!--bench: %s-->", expr)
	}
	quoted := fm[0]
	a, rest, err := operand(f, src)
	if err != nil {
		return fmt.Errorf("%s: %w", quoted, err)
	}
	value, unit := a.center, fm[3]
	switch {
	case len(rest) == 0:
		switch unit {
		case "%", "×":
			return fmt.Errorf("%s: a %s needs two rows (A / B, or A vs B)", quoted, unit)
		case "µs", "µ":
			value /= 1e3
		case "ms":
			value /= 1e6
		}
		if fm[4] != "" {
			if pct := strings.TrimSuffix(strings.TrimPrefix(a.pct(), "±"), "%"); pct != fm[4] {
				return fmt.Errorf("%s: the confidence interval is ±%s%% in the results (%s), not ±%s%%", quoted, pct, fmtNum(value), fm[4])
			}
		}
	case len(rest) >= 2 && (rest[0] == "/" || rest[0] == "÷" || rest[0] == "vs"):
		b, tail, err := operand(rest[1:], src)
		if err != nil {
			return fmt.Errorf("%s: %w", quoted, err)
		}
		if len(tail) > 0 {
			return fmt.Errorf("%s: unexpected %q in <!--bench: %s-->", quoted, strings.Join(tail, " "), expr)
		}
		if b.center == 0 {
			return fmt.Errorf("%s: divides by zero", quoted)
		}
		value = a.center / b.center
		if rest[0] == "vs" {
			value = (value - 1) * 100
			if unit != "%" {
				return fmt.Errorf("%s: A vs B is a percentage", quoted)
			}
		} else if unit == "%" {
			return fmt.Errorf("%s: a percentage is A vs B", quoted)
		}
	default:
		return fmt.Errorf("%s: cannot read <!--bench: %s--> (expected ROW [UNIT], optionally followed by / ROW [UNIT] or vs ROW [UNIT])", quoted, expr)
	}
	q, decimals, err := parseQuoted(fm[1], fm[2])
	if err != nil {
		return err
	}
	if !roundsTo(value, q, decimals) {
		return fmt.Errorf("%s is stale: the results give %s (%s)", quoted, strconv.FormatFloat(value, 'f', max(decimals, 2), 64), expr)
	}
	return nil
}

// operand reads ROW [UNIT] from f and returns its stat and the rest of f.
func operand(f []string, src *sources) (stat, []string, error) {
	name := f[0]
	unit := ""
	rest := f[1:]
	if len(rest) > 0 && rest[0] != "/" && rest[0] != "÷" && rest[0] != "vs" {
		unit, rest = rest[0], rest[1:]
	}
	s, err := src.lookup(name, unit)
	return s, rest, err
}

// lookup resolves a row: Bench/v/k=v...[@procs]. A bare value matches any
// label with that value; the row must match exactly one benchmark of one
// results file.
func (src *sources) lookup(row, unit string) (stat, error) {
	spec, procsText, hasProcs := strings.Cut(row, "@")
	parts := strings.Split(spec, "/")
	r, err := src.find(parts[0])
	if err != nil {
		return stat{}, err
	}
	procs := 0
	if hasProcs {
		if procs, err = strconv.Atoi(procsText); err != nil || procs <= 0 {
			return stat{}, fmt.Errorf("%s: @%s is not a GOMAXPROCS", row, procsText)
		}
	}
	if unit == "" {
		unit = "ns/op"
		switch parts[0] {
		case "Instr", "InstrKeyed":
			unit = "net"
		case "Cache":
			unit = "LL-net"
		}
	}
	var matched []string
	var vals []float64
	for _, key := range r.keys {
		ss := r.samples[key]
		if !rowMatches(ss[0], parts, procs) {
			continue
		}
		matched = append(matched, key)
		for _, s := range ss {
			if v, ok := s.values[unit]; ok {
				vals = append(vals, v)
			}
		}
	}
	switch {
	case len(matched) == 0:
		return stat{}, fmt.Errorf("no row %s in %s", row, filepath.Base(r.path))
	case len(matched) > 1:
		if len(matched) > 3 {
			matched = append(matched[:3], "…")
		}
		return stat{}, fmt.Errorf("%s matches %d rows of %s (%s): name one, with key=value or @GOMAXPROCS", row, len(matched), filepath.Base(r.path), strings.Join(matched, ", "))
	case len(vals) == 0:
		return stat{}, fmt.Errorf("row %s of %s has no %s", row, filepath.Base(r.path), unit)
	}
	return summarize(vals), nil
}

func rowMatches(s sample, parts []string, procs int) bool {
	if s.labels["bench"] != parts[0] || (procs != 0 && s.procs != procs) {
		return false
	}
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			if s.labels[k] != v {
				return false
			}
			continue
		}
		found := false
		for k, v := range s.labels {
			if k != "bench" && v == p {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func checkHeader(before string, f []string, src *sources) error {
	r := src.runs[0]
	if len(f) > 2 {
		return fmt.Errorf("cannot read <!--bench: %s--> (expected date or go, optionally followed by a benchmark name)", strings.Join(f, " "))
	}
	if len(f) == 2 {
		var err error
		if r, err = src.find(f[1]); err != nil {
			return err
		}
	}
	file := filepath.Base(r.path)
	if f[0] == "date" {
		d := dateRE.FindString(before)
		have := strings.TrimSuffix(r.header["date"], "Z")
		if d == "" || !strings.HasPrefix(have, strings.TrimSuffix(d, "Z")) {
			return fmt.Errorf("the date before <!--bench: date--> is not %s's, %s", file, r.header["date"])
		}
		return nil
	}
	g := goRE.FindStringSubmatch(before)
	if g == nil || "go"+g[1] != r.header["go-version"] {
		return fmt.Errorf("the Go version before <!--bench: go--> is not %s's, %s", file, r.header["go-version"])
	}
	return nil
}

// parseQuoted reads a quoted number: its sign, digits (commas allowed) and
// how many decimals it gives.
func parseQuoted(sign, digits string) (float64, int, error) {
	d := strings.ReplaceAll(digits, ",", "")
	v, err := strconv.ParseFloat(d, 64)
	if err != nil {
		return 0, 0, err
	}
	decimals := 0
	if _, frac, ok := strings.Cut(d, "."); ok {
		decimals = len(frac)
	}
	if sign != "" && sign != "+" {
		v = -v
	}
	return v, decimals, nil
}

// roundsTo reports whether value, rounded to decimals, reads q: directly, or
// through the three significant digits the report prints (so 76.47, printed
// 76.5, may be quoted 77).
func roundsTo(value, q float64, decimals int) bool {
	half := 0.5*math.Pow(10, -float64(decimals)) + 1e-9
	if math.Abs(value-q) <= half {
		return true
	}
	printed, err := strconv.ParseFloat(fmtNum(value), 64)
	return err == nil && math.Abs(printed-q) <= half
}
