# admit: the two commands a newcomer needs are `make demo` and `make test`.

GO ?= go

.PHONY: all test vet unit redis stress stress-short demo fuzz bench lint bench-quick bench-instr bench-cache bench-check bench-redis

all: test

## test: go vet, then every unit test under the race detector (what CI runs),
## the Redis store's against a throwaway redis-server, those of the other
## modules (prom, otel, grpclimit, examples/httpserver), then every benchmark
## of bench/ and of the module once, so none can rot.
test: vet unit allocs redis modules stress-short bench-check

## The modules of their own, each with its go.mod: the integrations whose
## dependencies the core's users never download (Redis, Prometheus,
## OpenTelemetry, gRPC) and the example server. redisstore's tests need a
## redis-server and run in make redis; the others' in make modules.
MODULES := redisstore prom otel grpclimit examples/httpserver
OTHER_MODULES := prom otel grpclimit examples/httpserver

vet:
	$(GO) vet ./...
	@for m in $(MODULES); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...) || exit 1; done

## unit builds with the tag admittest, which compiles in the test seams a
## normal build lacks (the lock-free table's pause point and eviction hook);
## without it the checks that need them skip and say so. allocs,
## stress-short and bench-check build without it: what users run.
unit:
	$(GO) test -race -count=1 -tags admittest -timeout 10m $$($(GO) list ./... | grep -v '/stress$$')

## allocs: the allocation budgets (testing.AllocsPerRun) without the race
## detector, whose runtime allocates on its own and makes such tests skip or
## lie under -race: every test of the module whose name contains "Alloc", and
## the conformance suite's Allocs subtests of each variant. It first checks
## that every function calling AllocsPerRun has "Alloc" in its name, so that
## no budget falls outside the pattern.
.PHONY: allocs
allocs:
	@bad=$$(find . -name '*.go' -not -path './bench/*' -not -path './redisstore/*' | xargs awk '/^func /{f=$$0} /^[^\/]*AllocsPerRun\(/ && f !~ /Alloc/ {print FILENAME ": " f}'); \
	if [ -n "$$bad" ]; then echo "allocs: AllocsPerRun in a function whose name lacks Alloc, which -run 'Alloc' would not select:"; echo "$$bad"; exit 1; fi
	$(GO) test -count=1 -run 'Alloc' ./...
	$(GO) test -count=1 -run '^TestConformance/^algo=/^Allocs$$' ./atomic ./locked ./sharded

## redis: the Redis store's tests (redisstore/, its own module), then its
## allocation budgets without the race detector. Each test starts its own
## redis-server on a free loopback port; without a redis-server binary they
## are skipped, unless ADMIT_REQUIRE_REDIS is set (as in CI).
redis:
	cd redisstore && $(GO) test -race -count=1 -timeout 10m ./...
	cd redisstore && $(GO) test -count=1 -run 'Alloc' ./...

## modules: the tests of prom, otel, grpclimit and examples/httpserver
## (each its own module) under the race detector, then their allocation
## budgets without it.
.PHONY: modules
modules:
	@for m in $(OTHER_MODULES); do \
		echo "cd $$m && $(GO) test -race -count=1 -timeout 10m ./..."; \
		(cd $$m && $(GO) test -race -count=1 -timeout 10m ./... && $(GO) test -count=1 -run Alloc ./...) || exit 1; \
	done

## test-go127: the tests again with Go 1.27.3, the newer of the two Go
## releases admit supports (make test uses the machine's go: Go 1.26 in CI):
## go vet of every module, then the tests of every module but bench/, the
## stress harness aside, without the race detector, which make test runs, so
## that CI stays short (about 2 minutes on 2 cores, the allocation budgets
## included). The go command fetches the toolchain through the module proxy,
## once.
GO127 ?= go1.27.3
.PHONY: test-go127
test-go127: export GOTOOLCHAIN = $(GO127)
test-go127:
	$(GO) version
	$(GO) vet ./...
	@for m in $(MODULES); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...) || exit 1; done
	$(GO) test -count=1 -timeout 10m $$($(GO) list ./... | grep -v '/stress$$')
	@for m in $(MODULES); do \
		echo "cd $$m && $(GO) test -count=1 -timeout 10m ./..."; \
		(cd $$m && $(GO) test -count=1 -timeout 10m ./...) || exit 1; \
	done

## stress-short: the stress harness in short mode (about 30 s on 2 cores,
## TestLostUpdate about 9 s of it; longer on a busy machine).
stress-short:
	$(GO) test -race -short -count=1 -timeout 5m ./stress

## stress: the stress harness in full: yield hooks compiled in, GOMAXPROCS
## swept (about 2.5 min on 2 cores).
stress:
	$(GO) test -race -tags admitstress -count=1 -cpu 1,2,4,8 -timeout 20m ./stress

## demo: replay the walkthrough of the design notes with a fake clock.
demo:
	$(GO) run ./cmd/admit demo

## fuzz: fuzz the rule parser, the rule-book readers and the JSON lexer
## against encoding/json (FUZZTIME=1m each).
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseRule$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzParseJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzJSONLexer$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./policy/

## mutate: mutation testing with gremlins (pinned in tools/mutate/run.sh) of
## internal/kernel, the root package, atomic, internal/keyed, locked and
## sharded, each against its own tests in short mode: the mutants killed and
## alive per package, and the survivors by file and line. About half an hour
## on 2 cores; not part of make test. docs/stress.md, "Mutation testing",
## has the scores and the equivalent mutants.
.PHONY: mutate
mutate:
	GO=$(GO) ./tools/mutate/run.sh

## bench: the full benchmark suite (bench/, its own module) against the peer
## libraries: results in bench/results/full.txt, benchstat tables, and
## docs/benchmarks.md with its charts regenerated. Under 20 minutes on 2 cores.
bench:
	cd bench && ./run.sh full

## bench-quick: the same suite with short samples, no 1,000,000-key setups
## (under 2 minutes): bench/results/quick.txt and docs/benchmarks.md.
bench-quick:
	cd bench && ./run.sh quick

## bench-instr: instructions per serial Allow, and per keyed decision on
## 100,000 primed keys, under valgrind's callgrind, clock excluded:
## bench/results/instr.txt, then docs/benchmarks.md.
BENCH_TMP ?= $(or $(TMPDIR),/tmp)
bench-instr:
	@command -v valgrind >/dev/null || { apt-get update && apt-get install -y valgrind; }
	cd bench && $(GO) build -o $(BENCH_TMP)/admit-instr ./cmd/instr
	cd bench && $(BENCH_TMP)/admit-instr measure -o results/instr.txt
	cd bench && $(GO) run ./cmd/report -results results -docs ../docs

## bench-cache: cache misses per keyed decision on 1,000,000 primed keys,
## uniform, under callgrind's cache simulation (D1 and LL sizes fixed in
## bench/cmd/instr): bench/results/cache.txt, then docs/benchmarks.md.
bench-cache:
	@command -v valgrind >/dev/null || { apt-get update && apt-get install -y valgrind; }
	cd bench && $(GO) build -o $(BENCH_TMP)/admit-instr ./cmd/instr
	cd bench && $(BENCH_TMP)/admit-instr cache -o results/cache.txt
	cd bench && $(GO) run ./cmd/report -results results -docs ../docs

## bench-redis: the Redis store against go-redis/redis_rate on a throwaway
## local redis-server (about 4 minutes): bench/results/redis.txt and
## bench/results/redis.benchstat.txt, quoted in docs/redis.md.
bench-redis:
	cd bench && ./redis.sh

## bench-check: vet bench/ and run each of its benchmarks once (-short keeps
## the 1,000,000-key setups out), then each of the module's own benchmarks
## once, sharded's BytesPerKey on 10,000 keys rather than a million, and
## grpclimit's interceptor benchmarks once (about
## 20 s on 2 cores): part of make test.
bench-check:
	cd bench && $(GO) vet ./...
	cd bench && $(GO) test -count=1 -short -run . -bench . -benchtime=1x ./...
	$(GO) test -count=1 -short -run '^$$' -bench . -benchtime=1x $$($(GO) list ./... | grep -v '/sharded$$')
	$(GO) test -count=1 -short -run '^$$' -bench . -benchtime=1x ./sharded -bytes-per-key.keys=10000
	cd grpclimit && $(GO) test -count=1 -run '^$$' -bench . -benchtime=1x ./...

## lint: formatting and vet, including for 32-bit targets.
## Then docs/benchmarks.md, and the figures README.md and docs/*.md quote,
## checked against bench/results (bench/README.md, "Figures in the docs").
lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	GOARCH=386 $(GO) vet ./...
	@for m in $(MODULES); do echo "cd $$m && GOARCH=386 $(GO) vet ./..."; (cd $$m && GOARCH=386 $(GO) vet ./...) || exit 1; done
	cd bench && $(GO) run ./cmd/report -check
