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
BenchmarkSerial/path=deny/algo=token-bucket/impl=atomic-packed-2 	1000	40.0 ns/op	0 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=atomic-packed 	1000	60.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=atomic-packed-8 	1000	70.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=uber-ratelimit-nowait-8 	1000	90.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkHotKey/algo=token-bucket/impl=xtime-rate-8 	1000	200.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=uniform/algo=token-bucket/impl=atomic-packed-2 	1000	100.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkKeyed/keys=100000/dist=uniform/algo=token-bucket/impl=go-limiter-2 	1000	200.0 ns/op	1.000 admitted/op	0 B/op	0 allocs/op
BenchmarkMemory/keys=100000/algo=token-bucket/impl=atomic-packed-2 	1	500.0 ns/op	70.0 bytes/key	3.0 allocs/key	100.0 B/key
PASS
# load-after: 0.40 0.50 0.60
# elapsed: 12s
`

const sampleInstr = "# date: 2026-01-02T03:04:05Z\n" +
	"baseline\tbase-clock\t61.0\t-\t-\treads a clock\n" +
	"atomic-packed\ttoken-bucket\t100.0\t39.0\tbase-clock\tNewTokenBucket\n" +
	"profile\tatomic-packed/token-bucket\t20.0\tkernel.Decide (tokenbucket.go)\n"

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	results, docs := filepath.Join(dir, "results"), filepath.Join(dir, "docs")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"quick.txt":           sampleRun,
		"quick.benchstat.txt": "## Headline: a table\n\n$ go tool benchstat x\n\ntable body\n\n## Floors\n\nfloor body\n",
		"instr.txt":           sampleInstr,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(results, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := generate(results, docs); err != nil {
		t.Fatalf("generate: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"2026-01-02T03:04:05Z", "Test CPU", "go1.26.0", // the run's header
		"## Headline", "### Goals", "## Floors", "## Hot key", "## Instructions per Allow",
		"atomic packed token bucket 61 ns", // the median of 60 and 62
		"2.5× faster than x/time/rate",     // 151 / 61
		"**39** net",                       // from instr.txt
		"| met |",                          // e.g. 39 instructions <= 60
		"| not measured |",                 // no clock.Coarse row in the sample
		"table body",                       // the benchstat tables, verbatim
		"img/hotkey.svg",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	for _, svg := range []string{"serial-allow.svg", "hotkey.svg", "memory.svg"} {
		b, err := os.ReadFile(filepath.Join(docs, "img", svg))
		if err != nil {
			t.Errorf("%s: %v", svg, err)
			continue
		}
		if !strings.HasPrefix(string(b), "<svg ") || !strings.HasSuffix(string(b), "</svg>\n") {
			t.Errorf("%s is not a complete SVG document", svg)
		}
	}
}
