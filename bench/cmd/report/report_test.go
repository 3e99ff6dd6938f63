package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleRun is a tiny results file in the format run.sh writes.
const sampleRun = `# admit benchmark results, profile quick: do not edit
# date: 2026-01-02T03:04:05Z
# host: 2 cores, 24 GiB, Linux
# cpu-mhz: 2100.000
# load-before: 0.10 0.20 0.30
# profile: quick count=2 benchtime=10ms cpus=1,8 short=yes
go-version: go1.26.0
cpu-model: Test CPU
cores: 2
# command: go test -run '^$' -bench . .
goos: linux
goarch: amd64
pkg: github.com/admit-go/admit/bench
BenchmarkFloor/op=since+cas-2 	1000	50.0 ns/op	0 B/op	0 allocs/op
BenchmarkFloor/op=since+cas-2 	1000	52.0 ns/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=atomic-packed-2 	1000	60.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=atomic-packed-2 	1000	62.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=floor-since+cas-2 	1000	55.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=floor-since+cas-2 	1000	57.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=xtime-rate-2 	1000	150.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=xtime-rate-2 	1000	152.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=atomic-packed-coarse-2 	1000	20.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=allow/algo=token-bucket/impl=atomic-packed-coarse-2 	1000	22.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkSerial/path=deny/algo=token-bucket/impl=atomic-packed-2 	1000	40.0 ns/op	0 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=atomic-packed 	1000	60.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=atomic-packed-8 	1000	70.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=uber-ratelimit-nowait-8 	1000	90.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=xtime-rate-8 	1000	200.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=uniform/algo=token-bucket/impl=atomic-packed-2 	1000	100.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=uniform/algo=token-bucket/impl=go-limiter-2 	1000	200.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=uniform/algo=token-bucket/impl=xtime-rate-2 	1000	400.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=zipf/algo=token-bucket/impl=atomic-packed-2 	1000	90.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=zipf/algo=token-bucket/impl=go-limiter-2 	1000	120.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkEviction/keys=100000/evict=off/algo=token-bucket/impl=atomic-packed-2 	1000	110.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkEviction/keys=100000/evict=off/algo=token-bucket/impl=go-limiter-2 	1000	210.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkEviction/keys=100000/evict=on/algo=token-bucket/impl=go-limiter-2 	1000	230.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkMemory/keys=100000/algo=token-bucket/impl=atomic-packed-2 	1	500.0 ns/op	70.0 bytes/key	3.0 allocs/key	100.0 B/key
BenchmarkMemory/keys=100000/algo=token-bucket/impl=xtime-rate-2 	1	900.0 ns/op	200.0 bytes/key	4.0 allocs/key	200.0 B/key
PASS
# load-after: 0.40 0.50 0.60
# elapsed: 12s
`

const sampleInstr = "# date: 2026-01-02T03:04:05Z\n" +
	"baseline\tbase-clock\t61.0\t-\t-\treads a clock\n" +
	"atomic-packed\ttoken-bucket\t100.0\t39.0\tbase-clock\tNewTokenBucket\n" +
	"xtime-rate\ttoken-bucket\t500.0\t400.0\tbase-clock\trate.Limiter\n" +
	"uber-ratelimit-nowait\ttoken-bucket\t250.0\t150.0\tbase-clock\tTake\n" +
	"atomic-packed-sysclock\ttoken-bucket\t190.0\t45.0\tbase-since\tNewTokenBucket, system clock\n" +
	"xtime-rate-sysclock\ttoken-bucket\t480.0\t300.0\tbase-now\trate.Limiter.Allow\n" +
	"uber-ratelimit-nowait-sysclock\ttoken-bucket\t230.0\t50.0\tbase-now\tTake\n" +
	"profile\tatomic-packed/token-bucket\t20.0\tkernel.Decide (tokenbucket.go)\n" +
	"# keyed: method: a keyed loop\n" +
	"keyed\tbaseline\tbase-keyed-clock\t90.0\t-\t-\tpicks a key\n" +
	"keyed\tsharded\ttoken-bucket\t570.0\t480.0\tbase-keyed-clock\tsharded.New\n" +
	"keyed\tgo-limiter\ttoken-bucket\t400.0\t300.0\tbase-keyed-now\tmemorystore Take\n"

const sampleCache = "# Cache misses per Allow(key)\n" +
	"# date: 2026-01-04T05:06:07Z\n" +
	"# columns: impl algo Ir D1 D1-net LL LL-net drift note\n" +
	"sharded\ttoken-bucket\t571.3\t3.77\t2.71\t1.79\t1.28\t+0.1%\tsharded.New\n" +
	"go-limiter\ttoken-bucket\t396.2\t6.67\t5.60\t3.32\t2.67\t+0.1%\tmemorystore Take\n"

// writeResults writes a results directory with the sample run (edited by
// edit, when not nil) and returns its path.
func writeResults(t *testing.T, edit func(string) string) string {
	t.Helper()
	results := filepath.Join(t.TempDir(), "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	run := sampleRun
	if edit != nil {
		run = edit(run)
	}
	files := map[string]string{
		"quick.txt":           run,
		"quick.benchstat.txt": "## Headline: a table\n\n$ go tool benchstat x\n\ntable body\n\n## Floors\n\nfloor body\n",
		"instr.txt":           sampleInstr,
		"cache.txt":           sampleCache,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(results, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return results
}

func TestGenerate(t *testing.T) {
	files, err := generate(writeResults(t, nil))
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	md := string(files["benchmarks.md"])
	for _, want := range []string{
		"2026-01-02T03:04:05Z", "Test CPU", "go1.26.0", // the run's header
		"go test -run '^$' -bench . .", // its command
		"## Headline", "### Goals", "## Floors", "## Hot key", "## Instructions per Allow",
		"atomic packed token bucket 61 ns", // the median of 60 and 62
		"2.5× faster than x/time/rate",     // 151 / 61
		"`-cpu 1,8` on 2 cores (at 8 the goroutines outnumber the cores)",
		"One hot key from 8 goroutines (`-cpu 8`, 2 cores): 70 ns per `Allow`, 2.9× faster than x/time/rate, 1.3× faster than uber's `Take` (90 ns).",
		"39 instructions per `Allow` (callgrind, clock excluded)", // from instr.txt
		"| ≤ 60 | **45** net",                                     // 45 instructions beyond time.Since <= 60: met
		"x/time/rate 300 net beyond one `time.Now` (480 gross), uber 50 net (230 gross) | met |",
		"Memory: 70 bytes per key (atomic token bucket, 100,000 keys), against 200 for x/time/rate in a `sync.Map`; zero allocations",
		"so admit's rows run once, labelled off, as the reference: atomic-packed token bucket.",
		"## AllowN, mixed n\n\n`AllowN` with n drawn from 1, 1, 1, 1, 2, 3, 5, 8 on 1,000 existing keys, uniform, from both goroutines. go-limiter and uber have no all-or-nothing `AllowN` and are left out; juju runs `TakeMaxDuration(n, 0)`, ulule `Increment`, throttled the GCRA quantity, httprate `WithIncrement`.\n\nNot measured in this run.\n\n## policy",
		"table body", // the benchstat tables, verbatim
		"img/hotkey.svg",
		// The keyed stores' goals: rows the run lacks are not measured,
		// and do not fail the report.
		"| keyed, 1,000,000 existing keys, zipf: the table (atomic-packed) vs go-limiter | ≥ 1.5× faster |  | not measured |",
		"| new-key churn: atomic-hashed vs go-limiter | no slower (≥ 1×) |  | not measured |",
		"| bytes per key, 1,000,000 keys: atomic-hashed | ≤ 24 |  | not measured |",
		"| allocations per `Allow` on an existing key, every token-bucket row of admit's in the keyed workload | 0 | 0 on every row of atomic-packed | met |",
		// instr.txt's keyed section and cache.txt.
		"| **sharded** | token-bucket | 570 | 480 | sharded.New |",
		"| base-keyed-clock | 90 | picks a key |",
		"# method: a keyed loop\n",
		"| **sharded** | token-bucket | 1.28 | 1.79 | 2.71 | 3.77 | 571 | +0.1% | sharded.New |",
		"# date: 2026-01-04T05:06:07Z\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	for _, svg := range []string{"serial-allow.svg", "hotkey.svg", "memory.svg"} {
		b := string(files["img/"+svg])
		if !strings.HasPrefix(b, "<svg ") || !strings.HasSuffix(b, "</svg>\n") {
			t.Errorf("%s is not a complete SVG document", svg)
		}
	}
}

// TestGenerateComposite: the composite section says what its rows measure
// when the run has them, and that it was not measured when not.
func TestGenerateComposite(t *testing.T) {
	const measured = "## Composite limits\n\n`BenchmarkComposite` measures what a second rule on a key costs"
	const missing = "## Composite limits\n\nNot measured in this run.\n\n## Observing"
	files, err := generate(writeResults(t, nil))
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if md := string(files["benchmarks.md"]); !strings.Contains(md, missing) || strings.Contains(md, measured) {
		t.Errorf("a run without BenchmarkComposite: benchmarks.md lacks %q, or has %q", missing, measured)
	}
	files, err = generate(writeResults(t, func(run string) string {
		return run + "BenchmarkComposite/path=serial/limits=tb+fw/impl=locked-2 \t 1000 \t 80.0 ns/op \t 1.000 admitted/op\n"
	}))
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	md := string(files["benchmarks.md"])
	if !strings.Contains(md, measured) || !strings.Contains(md, "gives the ratio.\n\n## Observing") {
		t.Errorf("a run with BenchmarkComposite: benchmarks.md lacks %q and the section's end", measured)
	}
}

// TestGenerateObserver: the observer section says what its rows measure
// when the run has them, and that it was not measured when not.
func TestGenerateObserver(t *testing.T) {
	const measured = "## Observing decisions\n\n`BenchmarkObserver` measures what attaching an observer"
	const missing = "## Observing decisions\n\nNot measured in this run.\n\n## Memory"
	files, err := generate(writeResults(t, nil))
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if md := string(files["benchmarks.md"]); !strings.Contains(md, missing) || strings.Contains(md, measured) {
		t.Errorf("a run without BenchmarkObserver: benchmarks.md lacks %q, or has %q", missing, measured)
	}
	files, err = generate(writeResults(t, func(run string) string {
		return run + "BenchmarkObserver/pairs=1000/observer=tally-2 \t 1000 \t 80.0 ns/op \t 1.000 admitted/op\n"
	}))
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	md := string(files["benchmarks.md"])
	if !strings.Contains(md, measured) || !strings.Contains(md, "the allocations.\n\n## Memory") {
		t.Errorf("a run with BenchmarkObserver: benchmarks.md lacks %q and the section's end", measured)
	}
}

// TestGenerateSubset: a run of some workloads only (BENCH=...) reports the
// others as not measured, and its goals too.
func TestGenerateSubset(t *testing.T) {
	results := writeResults(t, func(run string) string {
		var keep []string
		for _, l := range strings.Split(run, "\n") {
			if !strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "BenchmarkSerial/") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	})
	for _, f := range []string{"instr.txt", "cache.txt"} {
		if err := os.Remove(filepath.Join(results, f)); err != nil {
			t.Fatal(err)
		}
	}
	files, err := generate(results)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	md := string(files["benchmarks.md"])
	for _, want := range []string{
		"## Hot key, every goroutine on one key\n\nNot measured in this run.\n\n## Keyed",
		"| hot key, RunParallel at -cpu 8: atomic packed vs uber's limiter | ≥ 1.2× faster |  | not measured |",
		"Not measured yet: run `make bench-instr`.\n\n## Instructions per keyed decision",
		"Not measured yet: run `make bench-instr`.\n\n## Cache misses per keyed decision",
		"Not measured yet: run `make bench-cache`.\n\n## The peers",
		"| keyed, 100,000 existing keys, uniform: the table (atomic-packed) vs go-limiter | ≥ 2× faster |  | not measured |",
		"- With `clock.Coarse`: 21 ns per `Allow`, 7.2× faster than x/time/rate.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	if strings.Contains(md, "- One hot key") {
		t.Errorf("benchmarks.md has a hot-key headline without a hot-key run")
	}
}

// TestGenerateMissingRow: a row the report documents, missing from a
// workload that ran, fails the report with the row's name.
func TestGenerateMissingRow(t *testing.T) {
	for _, tc := range []struct{ drop, want string }{
		{"impl=atomic-packed-coarse-2", "Serial/path=allow/algo=token-bucket/impl=atomic-packed-coarse (ns/op)"},
		{"BenchmarkHotKey/algo=token-bucket/impl=uber-ratelimit-nowait-8", "HotKey/algo=token-bucket/impl=uber-ratelimit-nowait-8 (ns/op)"},
		{"dist=zipf/algo=token-bucket/impl=go-limiter", "Keyed/keys=100000/dist=zipf/algo=token-bucket/impl=go-limiter (ns/op)"},
		{"BenchmarkMemory/keys=100000/algo=token-bucket/impl=xtime-rate", "Memory/keys=100000/algo=token-bucket/impl=xtime-rate (bytes/key)"},
		{"evict=off/algo=token-bucket/impl=atomic-packed", "Eviction: admit's reference rows"},
	} {
		results := writeResults(t, func(run string) string {
			var keep []string
			for _, l := range strings.Split(run, "\n") {
				if !strings.Contains(l, tc.drop) {
					keep = append(keep, l)
				}
			}
			return strings.Join(keep, "\n")
		})
		_, err := generate(results)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("without %s: generate = %v, want an error naming %s", tc.drop, err, tc.want)
		}
	}
	results := writeResults(t, nil)
	instr := strings.ReplaceAll(sampleInstr, "uber-ratelimit-nowait\t", "uber\t")
	if err := os.WriteFile(filepath.Join(results, "instr.txt"), []byte(instr), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(results); err == nil || !strings.Contains(err.Error(), "instr.txt: impl=uber-ratelimit-nowait algo=token-bucket") {
		t.Errorf("without uber in instr.txt: generate = %v, want an error naming the row", err)
	}
}

// TestCheck: -check accepts the docs it generated and refuses them once the
// report or a marked figure disagrees with the results.
func TestCheck(t *testing.T) {
	results := writeResults(t, nil)
	docs := filepath.Join(filepath.Dir(results), "docs")
	files, err := generate(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(docs, files); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(filepath.Dir(results), "README.md")
	quote := func(text string) {
		t.Helper()
		if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	quote("Serial `Allow`: 61 ns<!--bench: Serial/allow/token-bucket/atomic-packed-->, 2.5×<!--bench: Serial/allow/token-bucket/xtime-rate / Serial/allow/token-bucket/atomic-packed--> faster.\n")
	if err := checkDocs(results, docs, files); err != nil {
		t.Fatalf("checkDocs of fresh docs: %v", err)
	}

	quote("Serial `Allow`: 58 ns<!--bench: Serial/allow/token-bucket/atomic-packed-->.\n")
	err = checkDocs(results, docs, files)
	if err == nil || !strings.Contains(err.Error(), "README.md:1: 58 ns is stale: the results give 61.00") {
		t.Errorf("checkDocs with a stale figure = %v", err)
	}

	quote("")
	md := filepath.Join(docs, "benchmarks.md")
	if err := os.WriteFile(md, append(files["benchmarks.md"], "edited by hand\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	err = checkDocs(results, docs, files)
	if err == nil || !strings.Contains(err.Error(), "docs/benchmarks.md is not what bench/cmd/report generates") {
		t.Errorf("checkDocs with an edited report = %v", err)
	}
}

// TestTableGoals: the table's goals read the keyed atomic-packed rows of a
// run made since atomic.New became the table, and only of such a run: the
// same rows of an earlier run measured atomic's former keyed store.
func TestTableGoals(t *testing.T) {
	table := func(run string) string {
		return strings.Replace(run, "BenchmarkMemory/keys=100000/algo=token-bucket/impl=atomic-packed-2",
			"BenchmarkMemory/keys=1000000/algo=token-bucket/impl=atomic-packed-2 \t1\t500.0 ns/op\t40.0 bytes/key\t1.0 allocs/key\t40.0 B/key\n"+
				"BenchmarkMemory/keys=100000/algo=token-bucket/impl=atomic-packed-2", 1)
	}
	for _, c := range []struct {
		date string
		want []string
	}{
		{"2026-01-02T03:04:05Z", []string{
			"| keyed, 100,000 existing keys, uniform: the table (atomic-packed) vs go-limiter | ≥ 2× faster |  | not measured |",
			"| bytes per key, 1,000,000 keys: atomic-packed | ≤ 48 |  | not measured |",
		}},
		{"2026-12-04T03:04:05Z", []string{
			"| keyed, 100,000 existing keys, uniform: the table (atomic-packed) vs go-limiter | ≥ 2× faster | go-limiter 200 ns ±∞, the table 100 ns ±∞: **2.00× faster** | met |",
			"| keyed, 100,000 existing keys, zipf: the table (atomic-packed) vs go-limiter | ≥ 2× faster | go-limiter 120 ns ±∞, the table 90 ns ±∞: **1.33× faster** | **missed** |",
			"| bytes per key, 1,000,000 keys: atomic-packed | ≤ 48 | **40** | met |",
		}},
	} {
		files, err := generate(writeResults(t, func(run string) string {
			return strings.Replace(table(run), "2026-01-02T03:04:05Z", c.date, 1)
		}))
		if err != nil {
			t.Fatalf("%s: generate: %v", c.date, err)
		}
		md := string(files["benchmarks.md"])
		for _, want := range c.want {
			if !strings.Contains(md, want) {
				t.Errorf("%s: benchmarks.md lacks %q", c.date, want)
			}
		}
	}
}
