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

## fuzz: fuzz the rule parser (FUZZTIME=1m by default).
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseRule -fuzztime $(FUZZTIME) .

## bench: the variants' own quick benchmarks (the full suite arrives in bench/).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./locked/

## lint: formatting and vet, including for 32-bit targets.
lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	GOARCH=386 $(GO) vet ./...
