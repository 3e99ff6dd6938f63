package doccheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A block is a fenced code block of a Markdown file.
type block struct {
	file   string   // relative to the repository's root, with forward slashes
	fence  int      // line of the opening fence, from 1
	lang   string   // first word of the info string: go, console, properties, …
	lines  []string // the block's content
	marker string   // the doccheck marker before the fence ("skip: reason"), or ""
}

// first is the line of the block's first content line.
func (b block) first() int { return b.fence + 1 }

// A span is text outside fenced blocks that may be a command: an inline code
// span, or a line of an indented code block.
type span struct {
	file string
	line int
	text string
}

// A doc is what the checks read from one Markdown file.
type doc struct {
	blocks []block
	spans  []span
}

var (
	fenceRE  = regexp.MustCompile("^(```+|~~~+)\\s*(.*)$")
	markerRE = regexp.MustCompile(`^<!--\s*doccheck:\s*(.*?)\s*-->$`)
	inlineRE = regexp.MustCompile("`([^`]+)`")
)

// docFiles returns README.md and docs/*.md, relative to root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// readDoc reads the fenced blocks, inline code spans and indented lines of
// the Markdown file rel under root.
func readDoc(t *testing.T, root, rel string) doc {
	t.Helper()
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		d        doc
		open     *block // the fenced block being read
		fence    string // its fence
		marker   string // the last marker seen, until a non-blank line
		para     []string
		paraLine int
		prevLine string
	)
	flush := func() { // the inline spans of the paragraph read so far
		text := strings.Join(para, "\n")
		for _, m := range inlineRE.FindAllStringSubmatchIndex(text, -1) {
			d.spans = append(d.spans, span{
				file: rel,
				line: paraLine + strings.Count(text[:m[0]], "\n"),
				text: strings.Join(strings.Fields(text[m[2]:m[3]]), " "),
			})
		}
		para = nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if open != nil {
			if strings.HasPrefix(line, fence) && strings.TrimSpace(line[len(fence):]) == "" {
				d.blocks = append(d.blocks, *open)
				open = nil
			} else {
				open.lines = append(open.lines, line)
			}
			prevLine = line
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			flush()
			lang, _, _ := strings.Cut(m[2], " ")
			open = &block{file: rel, fence: n, lang: lang, marker: marker}
			fence = m[1]
			marker = ""
			prevLine = line
			continue
		}
		if m := markerRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			flush()
			marker = m[1]
			prevLine = line
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			prevLine = line
			continue
		}
		marker = ""
		if (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) && (len(para) == 0 && strings.TrimSpace(prevLine) == "" || isIndented(prevLine)) {
			// An indented code block: each line is taken whole.
			flush()
			d.spans = append(d.spans, span{file: rel, line: n, text: strings.TrimSpace(line)})
			prevLine = line
			continue
		}
		if len(para) == 0 {
			paraLine = n
		}
		para = append(para, line)
		prevLine = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	if open != nil {
		t.Fatalf("%s:%d: a code block is never closed", rel, open.fence)
	}
	return d
}

func isIndented(line string) bool {
	return strings.TrimSpace(line) != "" && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t"))
}

// findRoot returns the repository's root: the directory, from the current
// one upwards, whose go.mod declares the module github.com/admit-go/admit.
func findRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(string(b)) == "github.com/admit-go/admit" {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of github.com/admit-go/admit above the current directory")
		}
		dir = parent
	}
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod string) string {
	for _, line := range strings.Split(gomod, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// goVersion returns the go directive of a go.mod.
func goVersion(gomod string) string {
	for _, line := range strings.Split(gomod, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// readDocs reads every documentation file.
func readDocs(t *testing.T, root string) []doc {
	t.Helper()
	var docs []doc
	for _, rel := range docFiles(t, root) {
		docs = append(docs, readDoc(t, root, rel))
	}
	return docs
}
