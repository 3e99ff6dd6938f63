package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// run is one results file: its header and its measurements.
type run struct {
	path    string
	header  map[string]string   // "# key: value" comment lines and "key: value" configuration
	command []string            // the "# command:" lines, in order
	samples map[string][]sample // by benchmark name without -gomaxprocs, "@", GOMAXPROCS
	keys    []string            // the keys of samples in the order they first appear
}

// sample is one benchmark line.
type sample struct {
	labels map[string]string // the name's key=value parts
	procs  int
	values map[string]float64 // by unit as printed (ns/op, allocs/op, admitted/op, bytes/key, ...)
}

// loadRun reads a raw results file.
func loadRun(path string) (*run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &run{path: path, header: map[string]string{}, samples: map[string][]sample{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "# "); ok {
			k, v, found := strings.Cut(c, ": ")
			if !found {
				continue
			}
			if k == "command" {
				r.command = append(r.command, v)
			} else if !strings.Contains(k, " ") {
				r.header[k] = v
			}
		}
	}
	br := benchfmt.NewReader(bytes.NewReader(data), path)
	for br.Scan() {
		switch rec := br.Result(); rec := rec.(type) {
		case *benchfmt.Result:
			for _, c := range rec.Config {
				if c.File {
					r.header[c.Key] = string(c.Value)
				}
			}
			s := sample{labels: map[string]string{}, procs: 1, values: map[string]float64{}}
			base, parts := rec.Name.Parts()
			name := string(base)
			for _, p := range parts {
				switch p[0] {
				case '/':
					k, v, _ := strings.Cut(string(p[1:]), "=")
					s.labels[k] = v
					name += string(p)
				case '-':
					n, err := strconv.Atoi(string(p[1:]))
					if err == nil {
						s.procs = n
					}
				}
			}
			s.labels["bench"] = string(base)
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, val = v.OrigUnit, v.OrigValue
				}
				s.values[unit] = val
			}
			key := name + "@" + strconv.Itoa(s.procs)
			if _, seen := r.samples[key]; !seen {
				r.keys = append(r.keys, key)
			}
			r.samples[key] = append(r.samples[key], s)
		case *benchfmt.SyntaxError:
			// Lines that are not benchmark results (PASS, ok, progress) are fine.
		}
	}
	return r, br.Err()
}

// latestRun returns the raw results file in dir with the newest "# date:".
func latestRun(dir string) (*run, error) {
	var best *run
	for _, name := range []string{"quick.txt", "full.txt"} {
		r, err := loadRun(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if best == nil || r.header["date"] > best.header["date"] {
			best = r
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no results in %s: run make bench-quick first", dir)
	}
	return best, nil
}

// stat is the summary of one measurement over its samples.
type stat struct {
	center, lo, hi float64
	n              int
}

func (s stat) ok() bool { return s.n > 0 }

// pct is the half-width of the confidence interval relative to the median,
// as benchstat prints it.
func (s stat) pct() string {
	if s.n < 2 {
		return "±∞"
	}
	sum := benchmath.Summary{Center: s.center, Lo: s.lo, Hi: s.hi}
	return "±" + sum.PctRangeString()
}

// query selects samples by labels; procs 0 is any.
type query struct {
	labels map[string]string
	order  []string // the labels' keys as given, for String
	procs  int
}

func q(bench string, kv ...string) query {
	return query{labels: map[string]string{"bench": bench}, order: []string{"bench"}}.with(kv...)
}

func (qu query) at(procs int) query { qu.procs = procs; return qu }

func (qu query) with(kv ...string) query {
	m := map[string]string{}
	for k, v := range qu.labels {
		m[k] = v
	}
	order := slices.Clone(qu.order)
	for i := 0; i+1 < len(kv); i += 2 {
		if _, ok := m[kv[i]]; !ok {
			order = append(order, kv[i])
		}
		m[kv[i]] = kv[i+1]
	}
	return query{labels: m, order: order, procs: qu.procs}
}

// String names the query as a benchmark name: Serial/path=allow/impl=x-8.
func (qu query) String() string {
	var b strings.Builder
	for _, k := range qu.order {
		if k == "bench" {
			b.WriteString(qu.labels[k])
			continue
		}
		fmt.Fprintf(&b, "/%s=%s", k, qu.labels[k])
	}
	if qu.procs != 0 {
		fmt.Fprintf(&b, "-%d", qu.procs)
	}
	return b.String()
}

func (qu query) matches(s sample) bool {
	if qu.procs != 0 && s.procs != qu.procs {
		return false
	}
	for k, v := range qu.labels {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// stat summarises unit over the samples matching qu (median and its 95%
// confidence interval, as benchstat computes them).
func (r *run) stat(qu query, unit string) stat {
	var vals []float64
	for _, ss := range r.samples {
		for _, s := range ss {
			if !qu.matches(s) {
				continue
			}
			if v, ok := s.values[unit]; ok {
				vals = append(vals, v)
			}
		}
	}
	return summarize(vals)
}

// summarize returns the median of vals and its 95% confidence interval, as
// benchstat computes them; the zero stat when vals is empty.
func summarize(vals []float64) stat {
	if len(vals) == 0 {
		return stat{}
	}
	sample := benchmath.NewSample(vals, &benchmath.DefaultThresholds)
	sum := benchmath.AssumeNothing.Summary(sample, 0.95)
	return stat{center: sum.Center, lo: sum.Lo, hi: sum.Hi, n: len(vals)}
}

// values returns the distinct values of label among samples matching qu, in
// the order they first appear in the results file.
func (r *run) values(qu query, label string) []string {
	var vs []string
	seen := map[string]bool{}
	for _, key := range r.keys {
		for _, s := range r.samples[key] {
			v, ok := s.labels[label]
			if ok && !seen[v] && qu.matches(s) {
				seen[v] = true
				vs = append(vs, v)
			}
		}
	}
	return vs
}

// instrRow is one line of results/instr.txt.
type instrRow struct {
	impl, algo, base, note string
	gross, net             float64
}

// instrRun is results/instr.txt: the one-key limiters' rows, and the keyed
// stores' in lines that start with "keyed" (comments "# keyed: ").
type instrRun struct {
	comments  []string
	rows      []instrRow
	baselines []instrRow
	profile   []profileRow

	keyedComments  []string
	keyedRows      []instrRow
	keyedBaselines []instrRow
}

// profileRow is one function's share of an impl's instructions per call.
type profileRow struct {
	impl, fn string
	perCall  float64
}

func loadInstr(path string) (*instrRun, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ir := &instrRun{}
	for _, line := range strings.Split(string(data), "\n") {
		if c, ok := strings.CutPrefix(line, "# keyed: "); ok {
			ir.keyedComments = append(ir.keyedComments, c)
			continue
		}
		if c, ok := strings.CutPrefix(line, "# "); ok {
			ir.comments = append(ir.comments, c)
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) == 4 && f[0] == "profile" {
			v, _ := strconv.ParseFloat(f[2], 64)
			ir.profile = append(ir.profile, profileRow{impl: f[1], perCall: v, fn: f[3]})
			continue
		}
		rows, baselines := &ir.rows, &ir.baselines
		if f[0] == "keyed" {
			f, rows, baselines = f[1:], &ir.keyedRows, &ir.keyedBaselines
		}
		if len(f) < 6 {
			continue
		}
		gross, _ := strconv.ParseFloat(f[2], 64)
		net, _ := strconv.ParseFloat(f[3], 64)
		row := instrRow{impl: f[0], algo: f[1], gross: gross, net: net, base: f[4], note: f[5]}
		if f[0] == "baseline" {
			*baselines = append(*baselines, row)
		} else {
			*rows = append(*rows, row)
		}
	}
	return ir, nil
}

func (ir *instrRun) find(impl, algo string) (instrRow, bool) {
	if ir == nil {
		return instrRow{}, false
	}
	for _, r := range ir.rows {
		if r.impl == impl && r.algo == algo {
			return r, true
		}
	}
	return instrRow{}, false
}

func (ir *instrRun) date() string {
	if ir == nil {
		return ""
	}
	return commentDate(ir.comments)
}

// commentDate returns the date of a "date: " comment.
func commentDate(comments []string) string {
	for _, c := range comments {
		if d, ok := strings.CutPrefix(c, "date: "); ok {
			return d
		}
	}
	return ""
}

// cacheRow is one line of results/cache.txt: cache misses per keyed
// decision.
type cacheRow struct {
	impl, algo, drift, note  string
	ir, d1, d1net, ll, llnet float64
}

// cacheRun is results/cache.txt (bench/cmd/instr cache).
type cacheRun struct {
	comments []string
	rows     []cacheRow
}

func loadCache(path string) (*cacheRun, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cr := &cacheRun{}
	for _, line := range strings.Split(string(data), "\n") {
		if c, ok := strings.CutPrefix(line, "# "); ok {
			cr.comments = append(cr.comments, c)
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 9 {
			continue
		}
		var v [5]float64
		for i := range v {
			if v[i], err = strconv.ParseFloat(f[2+i], 64); err != nil {
				return nil, fmt.Errorf("%s: %q: %v", path, line, err)
			}
		}
		cr.rows = append(cr.rows, cacheRow{impl: f[0], algo: f[1], ir: v[0], d1: v[1], d1net: v[2], ll: v[3], llnet: v[4], drift: f[7], note: f[8]})
	}
	return cr, nil
}

func (cr *cacheRun) date() string {
	if cr == nil {
		return ""
	}
	return commentDate(cr.comments)
}

// asRun presents cache.txt as a run of the benchmark Cache (labels impl and
// algo; units LL-net, the default, LL, D1-net, D1 and Ir).
func (cr *cacheRun) asRun(path string) *run {
	r := &run{path: path, header: map[string]string{"date": cr.date()}, samples: map[string][]sample{}}
	for _, row := range cr.rows {
		key := "Cache/impl=" + row.impl + "/algo=" + row.algo + "@1"
		r.keys = append(r.keys, key)
		r.samples[key] = []sample{{labels: map[string]string{"bench": "Cache", "impl": row.impl, "algo": row.algo}, procs: 1,
			values: map[string]float64{"LL-net": row.llnet, "LL": row.ll, "D1-net": row.d1net, "D1": row.d1, "Ir": row.ir}}}
	}
	return r
}
