package admit_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update", false, "TestAPI: rewrite testdata/api/*.txt from the code")

// apiPackages are the packages whose exported API TestAPI pins, by
// directory: the module's, and those of the modules of its integrations
// (their directories are read as source; they need not build here), and
// internal/reservation, whose Reservation the root package's is an alias of
// (its Delay and N are a user's).
var apiPackages = []string{".", "clock", "atomic", "locked", "sharded", "observe", "policy", "httplimit", "tally", "redisstore", "prom", "otel", "grpclimit", "internal/reservation"}

// TestAPI compares the exported API of every package (its exported
// declarations, without their comments) with testdata/api/<package>.txt, so
// that no exported name appears, changes or vanishes by accident. A
// deliberate change is written into docs/design.md ("The exported API")
// first, then recorded with `go test -run TestAPI -update .`.
func TestAPI(t *testing.T) {
	for _, dir := range apiPackages {
		name := filepath.Base(dir)
		if dir == "." {
			name = "admit"
		}
		got := exportedAPI(t, dir)
		path := filepath.Join("testdata", "api", name+".txt")
		if *updateAPI {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v; record the API with: go test -run TestAPI -update .", err)
		}
		if got != string(want) {
			t.Errorf("the exported API of %s differs from %s:\n%s\nIf the change is deliberate, write it into docs/design.md, then: go test -run TestAPI -update .",
				name, path, lineDiff(string(want), got))
		}
	}
}

// exportedAPI returns the exported declarations of the package in dir, one
// per line (a type's on several), sorted, without comments or bodies.
func exportedAPI(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var decls []string
	print := func(node any) string {
		var b bytes.Buffer
		if err := (&printer.Config{Mode: printer.UseSpaces, Tabwidth: 4}).Fprint(&b, fset, node); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
						continue
					}
					d.Doc, d.Body = nil, nil
					decls = append(decls, print(d))
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							s.Doc, s.Comment = nil, nil
							stripType(s.Type)
							decls = append(decls, "type "+print(s))
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									decls = append(decls, d.Tok.String()+" "+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(decls)
	return strings.Join(decls, "\n") + "\n"
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch t := t.(type) {
	case *ast.Ident:
		return t.IsExported()
	case *ast.IndexExpr:
		return t.X.(*ast.Ident).IsExported()
	case *ast.IndexListExpr:
		return t.X.(*ast.Ident).IsExported()
	}
	return false
}

// stripType removes comments and unexported fields and methods from a type
// expression.
func stripType(e ast.Expr) {
	var list *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		list = e.Fields
	case *ast.InterfaceType:
		list = e.Methods
	default:
		return
	}
	kept := list.List[:0]
	for _, f := range list.List {
		f.Doc, f.Comment = nil, nil
		names := f.Names[:0]
		for _, n := range f.Names {
			if n.IsExported() {
				names = append(names, n)
			}
		}
		if len(f.Names) > 0 && len(names) == 0 {
			continue // only unexported names
		}
		f.Names = names
		kept = append(kept, f)
	}
	list.List = kept
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
