package doccheck

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// packages maps the package names snippets use to their import paths.
var packages = map[string]string{
	"admit":       "github.com/admit-go/admit",
	"admitatomic": "github.com/admit-go/admit/atomic",
	"clock":       "github.com/admit-go/admit/clock",
	"httplimit":   "github.com/admit-go/admit/httplimit",
	"locked":      "github.com/admit-go/admit/locked",
	"observe":     "github.com/admit-go/admit/observe",
	"policy":      "github.com/admit-go/admit/policy",
	"redisstore":  "github.com/admit-go/admit/redisstore",
	"sharded":     "github.com/admit-go/admit/sharded",
	"tally":       "github.com/admit-go/admit/tally",
	"redis":       "github.com/redis/go-redis/v9",
	"prom":        "github.com/admit-go/admit/prom",
	"prometheus":  "github.com/prometheus/client_golang/prometheus",
	"promhttp":    "github.com/prometheus/client_golang/prometheus/promhttp",
	"admitotel":   "github.com/admit-go/admit/otel",
	"sdkmetric":   "go.opentelemetry.io/otel/sdk/metric",
	"grpclimit":   "github.com/admit-go/admit/grpclimit",
	"grpc":        "google.golang.org/grpc",
	"insecure":    "google.golang.org/grpc/credentials/insecure",
	"ratelimit":   "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit",

	"atomic":   "sync/atomic", // the library's atomic is admitatomic in every snippet
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"http":     "net/http",
	"httptest": "net/http/httptest",
	"io":       "io",
	"json":     "encoding/json",
	"log":      "log",
	"math":     "math",
	"os":       "os",
	"slog":     "log/slog",
	"strconv":  "strconv",
	"strings":  "strings",
	"sync":     "sync",
	"time":     "time",
}

// givens are the names a fragment may use without declaring them, as a
// reader takes them from the surrounding prose, with their types. A type
// that the API under documentation could change is written as the interface
// the snippets need, so that the givens never go stale.
var givens = map[string]string{
	"addr":    "string",
	"api":     "string",
	"route":   "string",
	"user":    "string",
	"userID":  "string",
	"ctx":     "context.Context",
	"w":       "http.ResponseWriter",
	"r":       "*http.Request",
	"mux":     "*http.ServeMux",
	"login":   "http.Handler",
	"getItem": "http.Handler",
	"book":    "*policy.Book",
	"svc":     "*policy.Service",
	"rule":    "admit.Rule",
	"store":   "interface {\n\tLen() int\n\tSweep() int\n}",
}

// A snippet is a ```go block and the Go file made of it.
type snippet struct {
	block
	pkg string // the package directory in the throwaway module
	src []byte // the generated file
}

func (s snippet) where() string { return fmt.Sprintf("%s:%d", s.file, s.fence) }

// generate makes the Go file of block b, whose lines are at line b.first()
// of path (an absolute path, so that errors name the Markdown file).
func generate(b block, path string) []byte {
	body := strings.Join(b.lines, "\n")
	here := fmt.Sprintf("//line %s:%d:1\n", path, b.first())
	wrapper := "//line doccheck-wrapper:1:1\n"
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", body, parser.PackageClauseOnly); err == nil && f.Name != nil {
		return []byte(here + body + "\n") // a whole file
	}
	// Declarations, or else a fragment: find the names it uses undeclared.
	asFile := "package snippet\n" + body + "\n"
	f, err := parser.ParseFile(fset, "", asFile, 0)
	fragment := err != nil
	if fragment {
		f, err = parser.ParseFile(fset, "", "package snippet\nfunc _() {\n"+body+"\n}\n", 0)
		if err != nil {
			// Not Go: let the compiler report it at its line.
			return []byte("package snippet\n\nfunc _() {\n" + here + body + "\n" + wrapper + "}\n")
		}
	}
	var imports, params, vars []string
	seen := map[string]bool{}
	var need func(name string)
	need = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if path, ok := packages[name]; ok {
			imp := fmt.Sprintf("%q", path)
			if name != pathBase(path) {
				imp = name + " " + imp
			}
			imports = append(imports, imp)
			return
		}
		if typ, ok := givens[name]; ok {
			params = append(params, name+" "+typ)
			vars = append(vars, "var "+name+" "+typ)
			for _, id := range typeIdents(typ) {
				need(id)
			}
		}
	}
	for _, id := range f.Unresolved {
		if types.Universe.Lookup(id.Name) == nil {
			need(id.Name)
		}
	}
	slices.Sort(imports)
	slices.Sort(params)
	slices.Sort(vars)
	var g strings.Builder
	g.WriteString("package snippet\n\n")
	for _, imp := range imports {
		g.WriteString("import " + imp + "\n")
	}
	if !fragment {
		g.WriteString(strings.Join(vars, "\n") + "\n")
		g.WriteString(here + body + "\n")
		return []byte(g.String())
	}
	g.WriteString("\nfunc _(" + strings.Join(params, ", ") + ") {\n")
	g.WriteString(here + body + "\n" + wrapper)
	for _, name := range declared(f) {
		g.WriteString("\t_ = " + name + "\n")
	}
	g.WriteString("}\n")
	return []byte(g.String())
}

// declared returns the variables a fragment (the body of the file's only
// function) declares at its top level, so that the wrapper can use them: a
// snippet may show a variable without using it.
func declared(f *ast.File) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	fn := f.Decls[0].(*ast.FuncDecl)
	for _, st := range fn.Body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, spec := range gd.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return names
}

// typeIdents returns the package names a type expression uses.
func typeIdents(typ string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`\b([a-z]+)\.`).FindAllStringSubmatch(typ, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func pathBase(path string) string {
	base := path[strings.LastIndexByte(path, '/')+1:]
	if regexp.MustCompile(`^v[0-9]+$`).MatchString(base) { // github.com/redis/go-redis/v9
		trimmed := path[:strings.LastIndexByte(path, '/')]
		base = trimmed[strings.LastIndexByte(trimmed, '/')+1:]
	}
	return base
}

// hints says what an error of the compiler asks of the snippet.
var hints = []struct {
	re   *regexp.Regexp
	hint string
}{
	{regexp.MustCompile(`undefined: [a-z]\w*\.\w+`), "the package has no such name: it was renamed or removed; write the snippet against the current API"},
	{regexp.MustCompile(`undefined: \w+`), "declared neither in the snippet nor among the givens or packages of internal/doccheck (snippets_test.go): declare it in the snippet, or add it there"},
	{regexp.MustCompile(`has no field or method`), "the method or field was renamed or removed: write the snippet against the current API"},
	{regexp.MustCompile(`not enough arguments|too many arguments|not enough return values|too many return values|assignment mismatch`), "the function's signature changed: update the call"},
	{regexp.MustCompile(`cannot use|does not implement|impossible type assertion|mismatched types|invalid operation`), "a type changed: update the snippet to the current types"},
	{regexp.MustCompile(`syntax error|expected`), "not Go: write compilable Go, or mark the block <!-- doccheck: skip: REASON --> if it is a sketch"},
}

func hint(msg string) string {
	for _, h := range hints {
		if h.re.MatchString(msg) {
			return h.hint
		}
	}
	return ""
}

// TestGoSnippets compiles every ```go block of README.md and docs/*.md
// against the module as it is (see the package doc).
func TestGoSnippets(t *testing.T) {
	root := findRoot(t)
	dir := t.TempDir()
	mod := filepath.Join(dir, "snippets")
	// The workspace: the module, the modules of the integrations (snippets
	// of docs/redis.md, docs/observability.md and docs/grpc.md use them) and
	// the snippets', at the newest go version any of them asks for.
	goLine := "1.0"
	work := ""
	for _, m := range []string{root, filepath.Join(root, "redisstore"), filepath.Join(root, "prom"), filepath.Join(root, "otel"), filepath.Join(root, "grpclimit")} {
		gomod, err := os.ReadFile(filepath.Join(m, "go.mod"))
		if err != nil {
			continue
		}
		if v := goVersion(string(gomod)); version.Compare("go"+v, "go"+goLine) > 0 {
			goLine = v
		}
		work += "\t" + m + "\n"
	}
	work = "go " + goLine + "\n\nuse (\n" + work + "\t" + mod + "\n)\n"
	write(t, filepath.Join(dir, "go.work"), work)
	write(t, filepath.Join(mod, "go.mod"), "module doccheck.example/snippets\n\ngo "+goLine+"\n")

	var snippets []snippet
	for _, d := range readDocs(t, root) {
		for _, b := range d.blocks {
			if b.lang != "go" {
				continue
			}
			if reason, ok := strings.CutPrefix(b.marker, "skip:"); ok && strings.TrimSpace(reason) != "" {
				t.Logf("%s:%d: not compiled: %s", b.file, b.fence, strings.TrimSpace(reason))
				continue
			} else if b.marker != "" {
				t.Errorf("%s:%d: marker %q: want <!-- doccheck: skip: REASON -->, with a reason", b.file, b.fence, b.marker)
				continue
			}
			s := snippet{block: b, pkg: fmt.Sprintf("s%03d", len(snippets))}
			s.src = generate(b, filepath.Join(root, filepath.FromSlash(b.file)))
			write(t, filepath.Join(mod, s.pkg, "snippet.go"), string(s.src))
			snippets = append(snippets, s)
		}
	}
	if len(snippets) == 0 {
		t.Fatal("no ```go block found: the check checks nothing")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(t), "build", "-o", os.DevNull, "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Logf("%d snippets compiled", len(snippets))
		return
	}
	// The output is one "# package" line per failing package, then its errors.
	failed := map[string][]string{}
	var cur string
	for _, line := range strings.Split(string(out), "\n") {
		if pkg, ok := strings.CutPrefix(line, "# doccheck.example/snippets/"); ok {
			cur = pkg
			continue
		}
		if cur != "" && strings.TrimSpace(line) != "" {
			failed[cur] = append(failed[cur], strings.ReplaceAll(line, root+string(filepath.Separator), ""))
		}
	}
	if len(failed) == 0 {
		t.Fatalf("go build of the snippets failed: %v\n%s", err, out)
	}
	for _, s := range snippets {
		errs, ok := failed[s.pkg]
		if !ok {
			continue
		}
		var msg bytes.Buffer
		fmt.Fprintf(&msg, "%s: the ```go block at lines %d-%d does not compile:\n", s.where(), s.first(), s.first()+len(s.lines)-1)
		for _, e := range errs {
			fmt.Fprintf(&msg, "\t%s\n", e)
			if h := hint(e); h != "" {
				fmt.Fprintf(&msg, "\t\tfix: %s\n", h)
			}
		}
		fmt.Fprintf(&msg, "\tthe file compiled:\n%s", indent(strings.ReplaceAll(string(s.src), root+string(filepath.Separator), "")))
		t.Error(msg.String())
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString("\t\t" + line)
		}
	}
	return b.String()
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goTool returns the go command: the one on PATH, or the one of the
// toolchain running the test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	t.Fatal("no go command on PATH")
	return ""
}
