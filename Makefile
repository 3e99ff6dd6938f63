# admit: the two commands a newcomer needs are `make demo` and `make test`.

GO ?= go

.PHONY: all test vet unit demo fuzz bench lint

all: test

## test: go vet, then every unit test under the race detector (what CI runs).
test: vet unit

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 10m ./...

## demo: replay the walkthrough of the design notes with a fake clock.
demo:
	$(GO) run ./cmd/admit demo

## fuzz: fuzz the rule parser and the rule-book readers (FUZZTIME=1m each).
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseRule$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzParseJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./policy/

## bench: the variants' own quick benchmarks (the full suite arrives in bench/).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./locked/

## lint: formatting and vet, including for 32-bit targets.
lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	GOARCH=386 $(GO) vet ./...
