#!/usr/bin/env bash
# tables.sh RAW: the benchstat tables of one results file, headline first.
# Each table is preceded by the exact benchstat command that printed it; run
# from bench/ to reproduce one. The first column of a -col /impl table is the
# base the others are compared with.
set -euo pipefail
cd "$(dirname "$0")"
raw=${1:?usage: tables.sh results/PROFILE.txt}

table() { # table TITLE BENCHSTAT-ARGS...
	local title=$1
	shift
	printf '## %s\n\n$ go tool benchstat' "$title"
	printf " '%s'" "$@"
	printf ' %s\n\n' "$raw"
	"${GO:-go}" tool benchstat "$@" "$raw" 2>&1 | { grep -vE '^(goos|goarch|pkg|cpu|go-version|cpu-model|cores): ' || true; }
	echo
}

ns='.unit:sec/op'

table "Headline: one key, serial, token bucket: admit atomic (packed) vs x/time/rate" \
	-filter ".name:Serial /algo:token-bucket $ns" -row /path \
	-col '/impl@(xtime-rate atomic-packed atomic-packed-coarse)'
table "Headline: one key, serial, admitted path: the floor (time.Since + one CAS, same harness) vs admit atomic (packed)" \
	-filter ".name:Serial /path:allow /algo:token-bucket $ns" -row /path \
	-col '/impl@(floor-since+cas atomic-packed)'
table "Headline: hot key, every goroutine on one key, by -cpu (the unlabelled row is -cpu 1): x/time/rate and uber vs admit atomic (packed)" \
	-filter ".name:HotKey /algo:token-bucket $ns" -row /gomaxprocs \
	-col '/impl@(xtime-rate uber-ratelimit-nowait atomic-packed)'
table "Headline: keyed, existing keys: go-limiter vs admit atomic (the table, full and hashed keys) and sharded (the map store)" \
	-filter ".name:Keyed /algo:token-bucket $ns" -row /keys,/dist \
	-col '/impl@(go-limiter xtime-rate atomic-packed atomic-hashed sharded)'
table "Floors" \
	-filter ".name:Floor $ns" -row /op
table "Serial, one key: every implementation, admitted and denied path (deny vs allow)" \
	-filter ".name:Serial $ns" -table /algo -row /impl -col /path
table "Hot key: every implementation over -cpu (vs -cpu 1, the unlabelled column)" \
	-filter ".name:HotKey $ns" -table /algo -row /impl -col /gomaxprocs
table "Keyed, existing keys: every implementation, uniform and Zipf(1.1) (zipf vs uniform)" \
	-filter ".name:Keyed $ns" -table /keys -row /algo,/impl -col /dist
table "New-key churn: every call a new key" \
	-filter ".name:Churn $ns" -row /algo,/impl
table "AllowN, mixed n on 1,000 keys" \
	-filter ".name:AllowN $ns" -row /algo,/impl
table "policy.Service.Check" \
	-filter ".name:Policy $ns" -row /impl -col /pairs
table "Eviction on vs off, 100,000 keys (on vs off)" \
	-filter ".name:Eviction $ns" -row /algo,/impl -col /evict
table "Composite limits: a token bucket under a fixed window vs the token bucket alone, frozen clock (tb+fw vs tb)" \
	-filter ".name:Composite $ns" -row /path,/keys,/impl -col /limits
table "Observer: policy.Service.Check with an observer attached vs without, every goroutine at once (vs none)" \
	-filter ".name:Observer $ns" -row /pairs -col '/observer@(none tally prom otel tally-timed)'
table "Observer: allocations per Check" \
	-filter '.name:Observer .unit:allocs/op' -row /pairs -col '/observer@(none tally prom otel tally-timed)'
table "Memory: bytes per key after inserting N keys (one sample)" \
	-filter '.name:Memory .unit:bytes/key' -table /keys -row /algo,/impl
