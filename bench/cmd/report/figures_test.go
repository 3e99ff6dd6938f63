package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleRedis = `# admit Redis benchmark results: do not edit
# date: 2026-01-03T04:05:06Z
go-version: go1.26.0
BenchmarkRedis/algo=token-bucket/conc=serial/impl=admit-2 	100	50000 ns/op	16 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=admit-2 	100	52000 ns/op	16 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=redis_rate-2 	100	40000 ns/op	22 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=redis_rate-2 	100	38000 ns/op	22 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=redis_rate-2 	100	39000 ns/op	22 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=redis_rate-2 	100	40000 ns/op	22 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=redis_rate-2 	100	41000 ns/op	22 allocs/op
BenchmarkRedis/algo=token-bucket/conc=serial/impl=redis_rate-2 	100	44000 ns/op	22 allocs/op
`

func TestCheckFigure(t *testing.T) {
	results := writeResults(t, nil)
	if err := os.WriteFile(filepath.Join(results, "redis.txt"), []byte(sampleRedis), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := loadSources(results)
	if err != nil {
		t.Fatal(err)
	}
	const (
		ap = "Serial/allow/token-bucket/atomic-packed"
		xt = "Serial/allow/token-bucket/xtime-rate"
	)
	for _, tc := range []struct {
		line string
		want string // "" if the figure holds, else part of the error
	}{
		{"61 ns<!--bench: " + ap + "-->", ""},
		{"61.0 ns<!--bench: " + ap + "-->", ""},
		{"(61 ns)<!--bench: " + ap + "-->", ""},
		{"**61 ns**<!--bench: " + ap + "-->", ""},
		{"61 ns<!-- bench: Serial/path=allow/algo=token-bucket/impl=atomic-packed -->", ""},
		{"62 ns<!--bench: " + ap + "-->", "62 ns is stale: the results give 61.00"},
		{"61.5 ns<!--bench: " + ap + "-->", "stale"},
		{"61 ns ±3%<!--bench: " + ap + "-->", "the confidence interval is ±∞% in the results"}, // 2 samples
		{"40.0µ ±10%<!--bench: Redis/token-bucket/serial/redis_rate-->", ""},
		{"40.0µ ±9%<!--bench: Redis/token-bucket/serial/redis_rate-->", "the confidence interval is ±10% in the results"},
		{"0.06µs<!--bench: " + ap + "-->", ""},
		{"2.5×<!--bench: " + xt + " / " + ap + "-->", ""},
		{"2.48×<!--bench: " + xt + " ÷ " + ap + "-->", ""},
		{"2.0×<!--bench: " + xt + " / " + ap + "-->", "stale"},
		{"0 allocs<!--bench: " + ap + " allocs/op-->", "no figure right before"},
		{"0<!--bench: " + ap + " allocs/op--> allocs", ""},
		{"70<!--bench: Memory/100000/token-bucket/atomic-packed bytes/key-->", ""},
		{"70<!--bench: Memory/100000/token-bucket/atomic-packed admitted/op-->", "has no admitted/op"},
		{"70 ns<!--bench: HotKey/token-bucket/atomic-packed@8-->", ""},
		{"70 ns<!--bench: HotKey/token-bucket/atomic-packed-->", "matches 2 rows"},
		{"70 ns<!--bench: HotKey/token-bucket/atomic-snapshot@8-->", "no row HotKey/token-bucket/atomic-snapshot@8 in quick.txt"},
		{"70 ns<!--bench: Nope/x-->", "no benchmark Nope in quick.txt, redis.txt, instr.txt, cache.txt"},
		{"39<!--bench: Instr/atomic-packed/token-bucket--> instructions", ""},
		{"100<!--bench: Instr/atomic-packed/token-bucket gross-->", ""},
		{"61<!--bench: Instr/baseline/base-clock gross-->", ""},
		{"480<!--bench: InstrKeyed/sharded--> instructions", ""},
		{"570<!--bench: InstrKeyed/sharded/token-bucket gross-->", ""},
		{"90<!--bench: InstrKeyed/baseline/base-keyed-clock gross-->", ""},
		{"1.3<!--bench: Cache/sharded--> lines", ""},
		{"1.28<!--bench: Cache/impl=sharded LL-net-->", ""},
		{"3.3<!--bench: Cache/go-limiter LL-->", ""},
		{"2.1×<!--bench: Cache/go-limiter / Cache/sharded-->", ""},
		{"3.77<!--bench: Cache/sharded D1-->", ""},
		{"1.8<!--bench: Cache/sharded-->", "stale"},
		{"on 2026-01-04<!--bench: date Cache-->", ""},
		{"51µ<!--bench: Redis/token-bucket/serial/admit-->", ""},
		{"16<!--bench: Redis/token-bucket/serial/admit allocs/op-->", ""},
		{"+28%<!--bench: Redis/token-bucket/serial/admit vs Redis/token-bucket/serial/redis_rate-->", ""}, // 51000 / 40000
		{"28%<!--bench: Redis/token-bucket/serial/admit vs Redis/token-bucket/serial/redis_rate-->", ""},
		{"−22%<!--bench: Redis/token-bucket/serial/redis_rate vs Redis/token-bucket/serial/admit-->", ""},
		{"22%<!--bench: Redis/token-bucket/serial/redis_rate vs Redis/token-bucket/serial/admit-->", "stale"},
		{"31×<!--bench: Redis/token-bucket/serial/admit vs Redis/token-bucket/serial/redis_rate-->", "A vs B is a percentage"},
		{"31%<!--bench: Redis/token-bucket/serial/admit-->", "needs two rows"},
		{"1.3<!--bench: " + ap + " / -->", "cannot read"},
		{"run 2026-01-02T03:04:05Z<!--bench: date-->", ""},
		{"run 2026-01-02T03:04Z<!--bench: date-->", ""},
		{"on 2026-01-02<!--bench: date-->", ""},
		{"on 2026-01-03<!--bench: date-->", "is not quick.txt's, 2026-01-02T03:04:05Z"},
		{"on 2026-01-03T04:05Z<!--bench: date Redis-->", ""},
		{"counted 2026-01-02T03:04:05Z<!--bench: date Instr-->", ""},
		{"Go 1.26.0<!--bench: go-->", ""},
		{"go1.26.0<!--bench: go-->", ""},
		{"Go 1.25.0<!--bench: go-->", "is not quick.txt's, go1.26.0"},
	} {
		n, errs := checkFigures("doc.md", tc.line, src)
		if n != 1 {
			t.Errorf("%s: found %d markers, want 1", tc.line, n)
			continue
		}
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", tc.line, errs[0])
		case tc.want != "" && len(errs) == 0:
			t.Errorf("%s: no error, want one with %q", tc.line, tc.want)
		case tc.want != "" && !strings.Contains(errs[0].Error(), tc.want):
			t.Errorf("%s: %v, want an error with %q", tc.line, errs[0], tc.want)
		}
	}
}

// TestCheckFiguresLines: errors name the line, and a line may hold several
// figures.
func TestCheckFiguresLines(t *testing.T) {
	src, err := loadSources(writeResults(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	text := "no figure here: 12 ns\n" +
		"61 ns<!--bench: Serial/allow/token-bucket/atomic-packed-->, 151 ns<!--bench: Serial/allow/token-bucket/xtime-rate-->\n" +
		"and 99 ns<!--bench: Serial/allow/token-bucket/xtime-rate-->\n"
	n, errs := checkFigures("README.md", text, src)
	if n != 3 || len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "README.md:3: 99 ns is stale") {
		t.Errorf("checkFigures = %d, %v; want 3 figures and one error on line 3", n, errs)
	}
}
