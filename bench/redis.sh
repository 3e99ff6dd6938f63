#!/usr/bin/env bash
# redis.sh: BenchmarkRedis against a throwaway local redis-server, admit's
# redisstore vs go-redis/redis_rate in the same run. Writes
# results/redis.txt (raw output under a header: date, Go version, CPU,
# command) and results/redis.benchstat.txt. COUNT and BENCHTIME override the
# defaults (10 samples of 1s: round trips on a shared machine spread
# widely from one sample to the next).
set -euo pipefail
cd "$(dirname "$0")"
command -v redis-server >/dev/null || { echo "redis.sh: no redis-server on PATH (Debian: apt-get install redis-server)" >&2; exit 1; }

count=${COUNT:-10} benchtime=${BENCHTIME:-1s}
mkdir -p results
raw=results/redis.txt
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
start=$(date +%s)
# The samples are taken in rounds, one of every row per round (-count 1,
# count times): go test's own -count takes a row's samples one after
# another, so a minute when the shared machine is slow would land on one
# row and shift its median against the rows it is compared with.
cmd="for round in \$(seq $count); do go test -run '^\$' -bench '^BenchmarkRedis\$' -benchtime $benchtime -count 1 .; done"
{
	echo "# admit Redis benchmark results: do not edit; regenerate with make bench-redis"
	echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "# host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
	echo "# server: $(redis-server --version), on loopback, same host, persistence off"
	echo "# load-before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# command: $cmd"
	echo "go-version: $("${GO:-go}" env GOVERSION)"
	echo "cpu-model: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "cores: $(nproc)"
} >"$tmp"
bin=$(mktemp -d)
trap 'rm -f "$tmp"; rm -rf "$bin"' EXIT
"${GO:-go}" test -c -o "$bin/bench.test" .
for ((i = 1; i <= count; i++)); do
	ADMIT_REQUIRE_REDIS=1 "$bin/bench.test" -test.run '^$' -test.bench '^BenchmarkRedis$' -test.benchtime "$benchtime" -test.count 1 | tee -a "$tmp" | grep -E '^(Benchmark|ok|FAIL|panic|PASS)' | cut -c1-160 || true
done
if grep -qE '^(FAIL|panic)' "$tmp" || ! grep -q '^Benchmark' "$tmp"; then
	echo "redis.sh: the benchmark failed; see $tmp" >&2
	cp "$tmp" "$raw.failed"
	exit 1
fi
echo "# load-after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp"
echo "# elapsed: $(($(date +%s) - start))s" >>"$tmp"
mv "$tmp" "$raw"
rm -rf "$bin"
trap - EXIT

{
	for metric in sec/op allocs/op roundtrips/op rediscmds/op redis-ns/op; do
		echo "## $metric: admit vs redis_rate, token bucket (base: redis_rate)"
		echo
		echo "\$ go tool benchstat -filter '/algo:token-bucket .unit:$metric' -row /conc -col '/impl@(redis_rate admit admit-keyed admit-batch10)' $raw"
		echo
		"${GO:-go}" tool benchstat -filter "/algo:token-bucket .unit:$metric" -row /conc -col '/impl@(redis_rate admit admit-keyed admit-batch10)' "$raw" | grep -vE '^(goos|goarch|pkg|cpu|go-version|cpu-model|cores): '
		echo
	done
	echo "## sec/op: admit's four algorithms (base: token bucket)"
	echo
	echo "\$ go tool benchstat -filter '/impl:admit .unit:sec/op' -row /conc -col /algo $raw"
	echo
	"${GO:-go}" tool benchstat -filter '/impl:admit .unit:sec/op' -row /conc -col /algo "$raw" | grep -vE '^(goos|goarch|pkg|cpu|go-version|cpu-model|cores): '
} >results/redis.benchstat.txt
echo "wrote bench/$raw and bench/results/redis.benchstat.txt in $(($(date +%s) - start))s"
