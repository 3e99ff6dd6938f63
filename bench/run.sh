#!/usr/bin/env bash
# run.sh PROFILE: run the benchmark suite and regenerate the reports.
#
#   quick  every workload and row, 6 samples of 10ms, no 1,000,000-key setups (under 2 minutes)
#   full   every workload and row, 6 samples of 200ms, 1,000,000 keys included (under 20 minutes on 2 cores)
#
# The samples are taken in rounds (see rounds below): one of every row per
# round.
#
# Writes results/PROFILE.txt (raw go test output under a header: date, Go
# version, CPU, command), results/PROFILE.benchstat.txt (benchstat tables),
# then docs/benchmarks.md and docs/img/*.svg from them. COUNT, BENCHTIME and
# CPUS override the profile's settings; BENCH, a regexp on the workloads'
# names (Floor, Serial, HotKey, Keyed, Churn, AllowN, Policy, Eviction, Middleware,
# Composite, Observer, Memory), runs only those, for a quick look at one of them.
set -euo pipefail
cd "$(dirname "$0")"

profile=${1:?usage: run.sh quick|full}
case $profile in
quick)
	count=${COUNT:-6} benchtime=${BENCHTIME:-10ms} short=-test.short target=bench-quick
	;;
full)
	count=${COUNT:-6} benchtime=${BENCHTIME:-200ms} short= target=bench
	;;
*)
	echo "run.sh: unknown profile $profile (quick or full)" >&2
	exit 2
	;;
esac
cpus=${CPUS:-1,2,4,8}
only=${BENCH:-.}

# workloads NAME...: the names among NAME that BENCH selects, as a -bench
# regexp ("" when none is).
workloads() {
	local picked=() n
	for n in "$@"; do
		[[ $n =~ $only ]] && picked+=("$n")
	done
	((${#picked[@]})) && echo "^Benchmark($(IFS='|'; echo "${picked[*]}"))\$"
	return 0
}

mkdir -p results
raw=results/$profile.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"${GO:-go}" test -c -o "$tmp/bench.test" .

cmdline() { # cmdline ARGS...: the go test command line of the test binary's ARGS
	local cmd="go test -run '^\$'" a
	for a in "$@"; do
		a=${a/#-test./-}
		[[ $a =~ ^[-A-Za-z0-9.,=/_]*$ ]] || a="'$a'"
		cmd+=" $a"
	done
	echo "$cmd"
}

run() { # run ARGS...: one go test invocation, appended to the raw file
	echo "# command: $(cmdline "$@") ." >>"$tmp/raw"
	(cd "$tmp" && ./bench.test -test.run '^$' "$@") | tee -a "$tmp/raw" | grep -E '^(Benchmark|ok|FAIL|panic)' | cut -c1-150 || true
}

# rounds N ARGS...: N go test invocations of ARGS with -count 1, appended to
# the raw file: one sample of every row per round. go test's own -count N
# takes a row's N samples one after another, so a minute when the shared
# machine is slow lands on one row and shifts its median against the rows
# it is compared with; in rounds, every row of a ratio meets the same
# moments.
rounds() {
	local n=$1
	shift
	echo "# command: for round in \$(seq $n); do $(cmdline "$@") -count 1 .; done" >>"$tmp/raw"
	for ((i = 1; i <= n; i++)); do
		(cd "$tmp" && ./bench.test -test.run '^$' "$@" -test.count 1) | tee -a "$tmp/raw" | grep -E '^(Benchmark|ok|FAIL|panic)' | cut -c1-150 || true
	done
}

start=$(date +%s)
{
	# Comment lines ('#') are kept out of benchstat's configuration, so that
	# results of different days still compare; the key: value lines are
	# configuration, and split benchstat's tables when they differ.
	echo "# admit benchmark results, profile $profile: do not edit; regenerate with make $target"
	echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "# host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
	echo "# cpu-mhz: $(awk -F': ' '/^cpu MHz/ {print $2; exit}' /proc/cpuinfo)"
	echo "# load-before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# profile: $profile count=$count benchtime=$benchtime cpus=$cpus short=$([ -n "$short" ] && echo yes || echo no)"
	echo "go-version: $("${GO:-go}" env GOVERSION)"
	echo "cpu-model: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "cores: $(nproc)"
} >"$tmp/raw"

# The serial, keyed, service, composite and observer workloads at the machine's own GOMAXPROCS;
# the hot key swept over -cpu; memory once per setting (bytes/key is a count).
if re=$(workloads Floor Serial Keyed Churn AllowN Policy Eviction Middleware Composite Observer) && [[ -n $re ]]; then
	rounds "$count" -test.bench "$re" -test.benchtime "$benchtime" $short
fi
if re=$(workloads HotKey) && [[ -n $re ]]; then
	rounds "$count" -test.bench "$re" -test.benchtime "$benchtime" -test.cpu "$cpus" $short
fi
if re=$(workloads Memory) && [[ -n $re ]]; then
	run -test.bench "$re" -test.benchtime 1x -test.count 1 $short
fi

if ! grep -q '^Benchmark' "$tmp/raw"; then
	echo "run.sh: no benchmark ran (BENCH=$only selects none of the workloads?)" >&2
	exit 1
fi
if grep -qE '^(FAIL|panic)' "$tmp/raw"; then
	echo "run.sh: a benchmark failed; see $tmp/raw" >&2
	cp "$tmp/raw" "$raw.failed"
	exit 1
fi
echo "# load-after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp/raw"
echo "# elapsed: $(($(date +%s) - start))s" >>"$tmp/raw"
mv "$tmp/raw" "$raw"

./tables.sh "$raw" >"results/$profile.benchstat.txt"
"${GO:-go}" run ./cmd/report -results results -docs ../docs
echo "wrote bench/$raw, bench/results/$profile.benchstat.txt, docs/benchmarks.md, docs/img/ in $(($(date +%s) - start))s"
