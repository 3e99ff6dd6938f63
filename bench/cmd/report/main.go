// Command report regenerates docs/benchmarks.md and its SVG charts from the
// benchmark results in bench/results: the newest raw results file (quick.txt
// or full.txt, by the date in its header), its benchstat tables, instr.txt
// (instructions per Allow, and per keyed decision) and cache.txt (cache
// misses per keyed decision) when present. Nothing in the report is
// typed by hand: the prose is the template benchmarks.md.tmpl, and every
// number comes from those files (page.go shapes them). A row the template
// names that is missing from a workload the run measured fails the report,
// naming the row.
//
//	go run ./cmd/report -results results -docs ../docs
//
// With -check it writes nothing: it fails when docs/benchmarks.md or a chart
// differs from what it would generate, or when a figure quoted in README.md
// or docs/*.md (marked as bench/README.md describes) is not what the latest
// results say. make lint runs it.
//
//	go run ./cmd/report -check
package main

import (
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"

	"github.com/admit-go/admit/bench"
)

//go:embed benchmarks.md.tmpl
var pageTemplate string

func main() {
	results := flag.String("results", "results", "the results directory")
	docs := flag.String("docs", "../docs", "the docs directory: writes benchmarks.md and img/*.svg")
	check := flag.Bool("check", false, "write nothing; fail if the docs (docs/benchmarks.md, its charts, figures marked in README.md and docs/*.md) disagree with the results")
	flag.Parse()
	files, err := generate(*results)
	if err == nil && *check {
		err = checkDocs(*results, *docs, files)
	} else if err == nil {
		err = write(*docs, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

type report struct {
	r       *run
	ir      *instrRun
	cr      *cacheRun // results/cache.txt, nil when absent
	profile string
	family  map[string]string // impl -> family
	charts  map[string][]byte // file name in docs/img -> SVG
	missing []string          // rows the template documents that the run lacks
}

// generate returns the files of the report, by their path under the docs
// directory: benchmarks.md and img/*.svg.
func generate(results string) (map[string][]byte, error) {
	r, err := latestRun(results)
	if err != nil {
		return nil, err
	}
	ir, err := loadInstr(filepath.Join(results, "instr.txt"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	cr, err := loadCache(filepath.Join(results, "cache.txt"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	rep := &report{r: r, ir: ir, cr: cr, family: map[string]string{}, charts: map[string][]byte{}}
	rep.profile, _, _ = strings.Cut(r.header["profile"], " ")
	for _, row := range bench.Singles() {
		rep.family[row.Impl] = row.Family
	}
	for _, row := range bench.Keyeds() {
		rep.family[row.Impl] = row.Family
	}
	bs, err := os.ReadFile(filepath.Join(results, rep.profile+".benchstat.txt"))
	if err != nil {
		return nil, fmt.Errorf("the benchstat tables of %s: %w (run make bench-%s)", r.path, err, rep.profile)
	}
	pg, err := rep.build(string(bs))
	if err != nil {
		return nil, err
	}
	md, err := render(pg)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"benchmarks.md": md}
	for name, svg := range rep.charts {
		files["img/"+name] = svg
	}
	return files, nil
}

// render executes the template on pg.
func render(pg *page) ([]byte, error) {
	versions := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			versions[d.Path] = d.Version
		}
	}
	t, err := template.New("benchmarks.md").Option("missingkey=error").Funcs(template.FuncMap{
		// module names a peer's module with the version this command was
		// built with: the one bench/go.mod pins.
		"module": func(path string) string {
			if v := versions[path]; v != "" {
				return path + " " + v
			}
			return path
		},
	}).Parse(pageTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, pg); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func write(docs string, files map[string][]byte) error {
	if err := os.MkdirAll(filepath.Join(docs, "img"), 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(docs, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkDocs compares the generated files with the docs directory's and
// checks the figures marked in the docs and in the README beside it.
func checkDocs(results, docs string, files map[string][]byte) error {
	var errs []error
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		have, err := os.ReadFile(filepath.Join(docs, name))
		if err != nil || !bytes.Equal(have, files[name]) {
			errs = append(errs, fmt.Errorf("%s is not what bench/cmd/report generates from bench/results: run `cd bench && go run ./cmd/report`", filepath.ToSlash(filepath.Join("docs", name))))
		}
	}
	root := filepath.Dir(filepath.Clean(docs))
	md, _ := filepath.Glob(filepath.Join(docs, "*.md"))
	paths := append([]string{filepath.Join(root, "README.md")}, md...)
	src, err := loadSources(results)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rel, _ := filepath.Rel(root, p)
		found, problems := checkFigures(filepath.ToSlash(rel), string(text), src)
		n += found
		errs = append(errs, problems...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("the docs disagree with bench/results (%d figures checked):\n%w", n, errors.Join(errs...))
	}
	fmt.Printf("report: docs/benchmarks.md and its charts are current; %d figures quoted in %d files agree with bench/results\n", n, len(paths))
	return nil
}
