package doccheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A command is a shell command a document shows.
type command struct {
	file string
	line int
	text string
	// want is the output a console block shows after the command (nil if
	// none): lines, "…" standing for any number of lines.
	want []string
}

// commandWords are the first words of inline code spans and indented lines
// that are commands.
var commandWords = map[string]bool{"go": true, "make": true, "cd": true, "apt-get": true, "printf": true}

// A rule decides what the check does with the commands that match it: run
// them, or skip them for the reason it gives. The first rule that matches
// applies; a command no rule matches fails the check.
type rule struct {
	re   *regexp.Regexp
	skip string // "" to run the command
}

var rules = []rule{
	{re: regexp.MustCompile(`^(printf '[^']*' \| )?go run \./cmd/admit( |$)`)},
	{re: regexp.MustCompile(`^make demo$`)},
	{re: regexp.MustCompile(`^go doc( |$)`)},
	{re: regexp.MustCompile(`^make (test|vet|unit|allocs|redis|modules|stress-short|bench-check)$`), skip: "a part of make test, which runs this check"},
	{re: regexp.MustCompile(`^make stress$`), skip: "the full stress harness takes minutes (make test runs it in its short mode)"},
	{re: regexp.MustCompile(`^make test-go127$`), skip: "runs every module's tests again with another Go release, for minutes"},
	{re: regexp.MustCompile(`^make (bench|bench-quick|bench-instr|bench-cache|bench-redis)$`), skip: "takes minutes and rewrites bench/results and docs (make test runs every benchmark once)"},
	{re: regexp.MustCompile(`^make fuzz$`), skip: "fuzzes for a minute per target"},
	{re: regexp.MustCompile(`^make mutate$`), skip: "mutation testing runs the core packages' tests once per mutant, for many minutes"},
	{re: regexp.MustCompile(`^go run \./tools/mutants -list$`)},
	{re: regexp.MustCompile(`^go run \./tools/mutants( |$)`), skip: "builds the race-enabled stress test binary once per mutant and runs it many times, for many minutes"},
	{re: regexp.MustCompile(`^make lint$`), skip: "vets twice more, for 386 too: run it before a commit"},
	{re: regexp.MustCompile(`^go test -run '\^\$' -bench \w+ -benchtime 1x \./\w+/?$`)},
	{re: regexp.MustCompile(`^cd examples/httpserver && go run \.`), skip: "starts a server that runs until interrupted (make modules runs its tests)"},
	{re: regexp.MustCompile(`^(cd (bench|redisstore|prom|otel|grpclimit) && )?go test `), skip: "runs tests, benchmarks or fuzzing by hand, most for minutes (make test runs every test, the stress harness in its short mode, and every benchmark once)"},
	{re: regexp.MustCompile(`^go get `), skip: "adds the module to the go.mod of the module it runs in: a user's, not this one"},
	{re: regexp.MustCompile(`^apt-get `), skip: "installs a system package"},
}

// commands returns the commands of the documents.
func commands(docs []doc) []command {
	var cmds []command
	for _, d := range docs {
		for _, b := range d.blocks {
			switch b.lang {
			case "console":
				var cur *command
				for i, line := range b.lines {
					if text, ok := strings.CutPrefix(line, "$ "); ok {
						cmds = append(cmds, command{file: b.file, line: b.first() + i, text: strings.TrimSpace(text)})
						cur = &cmds[len(cmds)-1]
					} else if cur != nil {
						cur.want = append(cur.want, line)
					}
				}
			case "sh", "shell", "bash":
				for i, line := range b.lines {
					if text := strings.TrimSpace(line); text != "" && !strings.HasPrefix(text, "#") {
						cmds = append(cmds, command{file: b.file, line: b.first() + i, text: text})
					}
				}
			}
		}
		for _, s := range d.spans {
			if first, _, _ := strings.Cut(s.text, " "); commandWords[first] && strings.Contains(s.text, " ") {
				cmds = append(cmds, command{file: s.file, line: s.line, text: s.text})
			}
		}
	}
	return cmds
}

// definedFiles returns the files a document defines, by name: a
// ```properties or ```json block whose first line is a comment naming a file
// ("# rules.conf: …" or "# rules.conf") shows a reader the file to create
// before running the document's commands. A file one document defines does
// not exist for another's commands.
func definedFiles(t *testing.T, d doc) map[string]string {
	t.Helper()
	named := regexp.MustCompile(`^#\s*([\w.-]+\.(conf|json|properties))\b`)
	files := map[string]string{}
	for _, b := range d.blocks {
		if b.lang != "properties" && b.lang != "json" || len(b.lines) == 0 {
			continue
		}
		m := named.FindStringSubmatch(b.lines[0])
		if m == nil {
			continue
		}
		content := strings.Join(b.lines, "\n") + "\n"
		if prev, ok := files[m[1]]; ok && prev != content {
			t.Errorf("%s:%d: defines %s a second time, differently", b.file, b.fence, m[1])
			continue
		}
		files[m[1]] = content
	}
	return files
}

// workDir returns a directory holding files and a link to each entry of the
// repository's root that files does not replace.
func workDir(t *testing.T, root string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(work, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, content := range files {
		write(t, filepath.Join(work, name), content)
	}
	return work
}

// TestCommands runs every cheap shell command of README.md and docs/*.md
// and checks the output a console block shows (see the package doc).
func TestCommands(t *testing.T) {
	root := findRoot(t)
	docs := readDocs(t, root)
	cmds := commands(docs)
	if len(cmds) == 0 {
		t.Fatal("no shell command found: the check checks nothing")
	}
	// A command runs in the repository's root, as on a fresh clone, or, if
	// it names a file its document defines, in a directory that also holds
	// the document's files.
	defined := map[string]map[string]string{} // document → file → content
	works := map[string]string{}              // document → its directory
	for _, d := range docs {
		if len(d.blocks) == 0 {
			continue
		}
		if files := definedFiles(t, d); len(files) > 0 {
			defined[d.blocks[0].file] = files
			works[d.blocks[0].file] = workDir(t, root, files)
		}
	}

	// The admit command, built once.
	bin := filepath.Join(t.TempDir(), "bin")
	build := exec.Command(goTool(t), "build", "-o", filepath.Join(bin, "admit"), "./cmd/admit")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/admit: %v\n%s", err, out)
	}

	ran := 0
	for _, c := range cmds {
		where := fmt.Sprintf("%s:%d", c.file, c.line)
		var r *rule
		for i := range rules {
			if rules[i].re.MatchString(c.text) {
				r = &rules[i]
				break
			}
		}
		switch {
		case r == nil:
			t.Errorf("%s: `%s` is neither run nor skipped with a reason: add a rule for it to rules in internal/doccheck/commands_test.go", where, c.text)
			continue
		case r.skip != "":
			t.Logf("%s: `%s` not run: %s", where, c.text, r.skip)
			continue
		}
		ran++
		t.Logf("%s: running `%s`", where, c.text)
		dir := root
		for name := range defined[c.file] {
			if regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(name) + `($|\s)`).MatchString(c.text) {
				dir = works[c.file]
			}
		}
		text := strings.ReplaceAll(c.text, "go run ./cmd/admit", "admit")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", text)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s: `%s` failed (%v), run in %s:\n%s%s", where, c.text, err, placeOf(dir, root), stdout.String(), stderr.String())
			continue
		}
		if c.want != nil && !matches(c.want, strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")) {
			t.Errorf("%s: `%s` prints\n%s\nbut the document shows\n%s", where, c.text, indent(stdout.String()), indent(strings.Join(c.want, "\n")+"\n"))
		}
	}
	t.Logf("%d commands run, %d skipped", ran, len(cmds)-ran)
}

func placeOf(dir, root string) string {
	if dir == root {
		return "the repository's root"
	}
	return "a directory with the files the documents define"
}

// matches reports whether got matches want, in which a line "…" stands for
// any number of lines.
func matches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "…" {
		for i := 0; i <= len(got); i++ {
			if matches(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && strings.TrimRight(got[0], " ") == strings.TrimRight(want[0], " ") && matches(want[1:], got[1:])
}
