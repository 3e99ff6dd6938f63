// Command mutants plants, one at a time, the Load+Store mutant of every
// compare-and-swap in atomic/ and internal/table, and counts how often the
// stress harness (./stress under the race detector) catches each.
//
// The mutant is the tempting wrong version every CAS loop's comment warns
// of: the word was loaded, a state computed from it, and the result is
// published with Store, as if the CAS had succeeded. A call
//
//	X.CompareAndSwap(old, nw)
//
// becomes
//
//	func() bool { X.Store(nw); return true }()
//
// and the pair form's 16-byte cas128(addr, o0, o1, n0, n1) becomes a call
// of store128 (added to the package for the mutant only), which stores both
// words and reports the expected ones as found. The working tree is never
// changed: the mutated file goes to a temporary directory and the build
// reads it through `go test -overlay`. Each mutant's test binary is built
// once (go test -c -race) and run -runs times per mode; a run catches the
// mutant when the binary exits non-zero.
//
// Usage, from the module's root:
//
//	go run ./tools/mutants -list
//	go run ./tools/mutants -sites 'TokenBucket\).Allow' -runs 20 -modes short,full
//
// The site "none" is the unmutated tree: its count is the harness's false
// alarm rate under the same conditions. The CAS on the table's pause hook
// (a test-only handshake) is no state publish and is left out.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// dirs are the packages whose compare-and-swaps are mutated.
var dirs = []string{"atomic", "internal/table"}

// site is one compare-and-swap call: its file, its position and the text
// that replaces it.
type site struct {
	id          string // file:func#k, stable while the function keeps its CASes in order
	file        string
	line        int
	start, end  int // byte offsets of the call in the file
	replacement string
	needStore   bool // the replacement calls store128
}

// store128 is the mutant of cas128: both words stored, the expected ones
// reported as found.
const store128 = `package atomic

import (
	satomic "sync/atomic"
	"unsafe"
)

func store128(addr *satomic.Uint64, old0, old1, new0, new1 uint64) (cur0, cur1 uint64, swapped bool) {
	w := (*[2]satomic.Uint64)(unsafe.Pointer(addr))
	w[0].Store(new0)
	w[1].Store(new1)
	return old0, old1, true
}
`

// skipped are the CASes that publish no limiter state: the pause hook's
// handshake (tests only).
var skipped = regexp.MustCompile(`\bpause\.CompareAndSwap`)

func main() {
	list := flag.Bool("list", false, "list the sites and exit")
	sitesRe := flag.String("sites", ".", "regexp: the sites to mutate (by id; \"none\" is the unmutated tree)")
	runs := flag.Int("runs", 20, "runs of the test binary per site and mode")
	modes := flag.String("modes", "short,full", "comma-separated modes: short (-test.short), full")
	run := flag.String("run", "", "-test.run of every run (default: the whole package)")
	skip := flag.String("skip", "", "-test.skip of every run")
	verbose := flag.Bool("v", false, "print the end of each failing run's output")
	failfast := flag.Bool("failfast", true, "stop a run at its first failing test (the verdict is the same, sooner)")
	flag.Parse()

	all, err := findSites()
	if err != nil {
		fatal(err)
	}
	if *list {
		for _, s := range all {
			fmt.Printf("%-50s %s:%d\n", s.id, s.file, s.line)
		}
		return
	}
	re, err := regexp.Compile(*sitesRe)
	if err != nil {
		fatal(err)
	}
	var chosen []site
	if re.MatchString("none") {
		chosen = append(chosen, site{id: "none"})
	}
	for _, s := range all {
		if re.MatchString(s.id) {
			chosen = append(chosen, s)
		}
	}
	tmp, err := os.MkdirTemp("", "admit-mutants-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)

	goVersion, _ := exec.Command("go", "version").Output()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("# %s, %s, GOMAXPROCS=%s, runs=%d, run=%q, skip=%q, load average %s\n", time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(goVersion)), os.Getenv("GOMAXPROCS"), *runs, *run, *skip, strings.TrimSpace(string(load)))
	fmt.Printf("%-50s %-5s %s\n", "site", "mode", "caught/runs  first failing tests")
	for _, s := range chosen {
		bin := filepath.Join(tmp, "stress.test")
		if err := build(tmp, s, bin); err != nil {
			fmt.Printf("%-50s build failed: %v\n", s.id, err)
			continue
		}
		for _, mode := range strings.Split(*modes, ",") {
			caught, failed := 0, map[string]int{}
			var took []time.Duration
			for range *runs {
				args := []string{"-test.count=1", "-test.timeout=15m"}
				if mode == "short" {
					args = append(args, "-test.short")
				}
				if *failfast {
					args = append(args, "-test.failfast")
				}
				if *run != "" {
					args = append(args, "-test.run="+*run)
				}
				if *skip != "" {
					args = append(args, "-test.skip="+*skip)
				}
				cmd := exec.Command(bin, args...)
				cmd.Dir = "stress"
				t0 := time.Now()
				out, err := cmd.CombinedOutput()
				took = append(took, time.Since(t0).Round(100*time.Millisecond))
				if err != nil {
					caught++
					failed[firstFail(out)]++
					if *verbose {
						fmt.Printf("  run %d failed after %v:\n%s\n", len(took), took[len(took)-1], lastLines(out, 6))
					}
				}
			}
			load, _ := os.ReadFile("/proc/loadavg")
			slices.Sort(took)
			fmt.Printf("%-50s %-5s %2d/%-2d  %s  (%s, load %s, runs took %v to %v)\n", s.id, mode, caught, *runs, summary(failed), time.Now().UTC().Format("15:04"), strings.Fields(string(load))[0], took[0], took[len(took)-1])
		}
	}
}

// findSites parses every non-test file of dirs and returns its
// compare-and-swap calls, numbered within their function.
func findSites() ([]site, error) {
	var out []site
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			if !buildsByDefault(f) {
				continue // a file of a tagged build (the planted bugs): not what users run
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				k := 0
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					text := func(e ast.Node) string {
						return string(src[fset.Position(e.Pos()).Offset:fset.Position(e.End()).Offset])
					}
					var repl string
					var needStore bool
					switch fun := call.Fun.(type) {
					case *ast.SelectorExpr:
						if fun.Sel.Name != "CompareAndSwap" || len(call.Args) != 2 || skipped.MatchString(text(call)) {
							return true
						}
						repl = fmt.Sprintf("func() bool { %s.Store(%s); return true }()", text(fun.X), text(call.Args[1]))
					case *ast.Ident:
						if fun.Name != "cas128" || len(call.Args) != 5 {
							return true
						}
						args := make([]string, 5)
						for i, a := range call.Args {
							args[i] = text(a)
						}
						repl = "store128(" + strings.Join(args, ", ") + ")"
						needStore = true
					default:
						return true
					}
					k++
					pos := fset.Position(call.Pos())
					out = append(out, site{
						id:          fmt.Sprintf("%s:%s#%d", file, funcName(fn), k),
						file:        file,
						line:        pos.Line,
						start:       pos.Offset,
						end:         fset.Position(call.End()).Offset,
						replacement: repl,
						needStore:   needStore,
					})
					return true
				})
			}
		}
	}
	return out, nil
}

// buildsByDefault reports whether f has no build constraint, or one met
// without tags (only "!tag" constraints are recognised as met).
func buildsByDefault(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if expr, ok := strings.CutPrefix(c.Text, "//go:build "); ok {
				return strings.HasPrefix(strings.TrimSpace(expr), "!")
			}
		}
	}
	return true
}

// funcName is fn's name with its receiver's type, as in (*TokenBucket).Allow.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexListExpr); ok {
		t = ix.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	name := "?"
	if id, ok := t.(*ast.Ident); ok {
		name = id.Name
	}
	return fmt.Sprintf("(%s%s).%s", star, name, fn.Name.Name)
}

// build writes s's mutant of its file to dir, and builds the stress test
// binary bin over it.
func build(dir string, s site, bin string) error {
	overlay := map[string]string{}
	if s.id != "none" {
		src, err := os.ReadFile(s.file)
		if err != nil {
			return err
		}
		mut := append(append(append([]byte{}, src[:s.start]...), s.replacement...), src[s.end:]...)
		mfile := filepath.Join(dir, "mutant.go")
		if err := os.WriteFile(mfile, mut, 0o644); err != nil {
			return err
		}
		abs, _ := filepath.Abs(s.file)
		overlay[abs] = mfile
		if s.needStore {
			sfile := filepath.Join(dir, "store128.go")
			if err := os.WriteFile(sfile, []byte(store128), 0o644); err != nil {
				return err
			}
			abs, _ := filepath.Abs(filepath.Join(filepath.Dir(s.file), "zz_mutant_store128.go"))
			overlay[abs] = sfile
		}
	}
	js, _ := json.Marshal(map[string]any{"Replace": overlay})
	ofile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ofile, js, 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "test", "-c", "-race", "-overlay", ofile, "-o", bin, "./stress")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, stderr.String())
	}
	return nil
}

var failRe = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// firstFail names the first top-level test a run's output reports failed,
// "panic" for a panic, or "?".
func firstFail(out []byte) string {
	if m := failRe.FindSubmatch(out); m != nil {
		name := string(m[1])
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[:i]
		}
		return name
	}
	if bytes.Contains(out, []byte("panic:")) {
		return "panic"
	}
	return "?"
}

// lastLines returns the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func summary(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(1)
}
