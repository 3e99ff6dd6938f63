#!/bin/sh
# Mutation testing of admit with gremlins: `make mutate` runs this script.
# docs/stress.md ("Mutation testing") records the scores, the equivalent
# mutants and how long a run takes.
#
# Each package is its own gremlins run: gremlins gathers the package's
# coverage from its own tests, mutates only covered lines, and runs only that
# package's tests against each mutant, so a mutant of internal/kernel must be
# killed by internal/kernel's tests, not by a variant's conformance suite.
#
# Environment:
#   MUTATE_PKGS     the packages (default: the six below)
#   MUTATE_WORKERS  gremlins workers (default 2; each runs one `go test`)
#   MUTATE_COEF     timeout coefficient (default 5): a mutant's tests are
#                   stopped, and the mutant counted as timed out, after this
#                   many times the package's coverage run
#   MUTATE_OUT      where the logs and JSON reports go (default: a new
#                   directory under $TMPDIR)
set -eu

GREMLINS_VERSION=v0.6.0
GO=${GO:-go}
PKGS=${MUTATE_PKGS:-./internal/kernel . ./atomic ./internal/keyed ./locked ./sharded}
WORKERS=${MUTATE_WORKERS:-2}
COEF=${MUTATE_COEF:-5}
TMP=${TMPDIR:-/tmp}
OUT=${MUTATE_OUT:-$(mktemp -d "$TMP/admit-mutate-XXXXXX")}
mkdir -p "$OUT"

cd "$(dirname "$0")/../.."

# gremlins is pinned here and installed outside the module, so that the
# library's go.mod never names it.
BIN="$TMP/admit-gremlins-$GREMLINS_VERSION"
if [ ! -x "$BIN/gremlins" ]; then
	GOBIN="$BIN" GOFLAGS= $GO install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION"
fi

# gremlins has no flag for test flags; `go test` takes them from GOFLAGS.
#   -short     the packages' short mode, as in `make test` (fewer rounds)
#   -count=1   no cached test results: gremlins times the coverage run to
#              set each mutant's timeout, and a cached run would time at ~0
#   -trimpath  builds of the workers' copies of the module share the build
#              cache (without it, a copy's directory is part of every key)
GOFLAGS="${GOFLAGS:+$GOFLAGS }-short -count=1 -trimpath"
export GOFLAGS

# The default mutators, plus the bitwise ones (the packed words) and && <-> ||.
OPS="--invert-bitwise --invert-bwassign --invert-logical"

summary="$OUT/summary.txt"
: >"$summary"
start=$(date +%s)
for pkg in $PKGS; do
	name=$(echo "$pkg" | sed 's#^\./##; s#/#-#g; s#^\.$#root#')
	# For the root package gremlins walks the whole module: keep the files
	# of the root directory only (paths relative to it without a slash).
	ex=
	if [ "$pkg" = . ]; then ex="--exclude-files /"; fi
	echo "== $pkg"
	t0=$(date +%s)
	"$BIN/gremlins" unleash --workers "$WORKERS" --timeout-coefficient "$COEF" \
		$OPS $ex -o "$OUT/$name.json" "$pkg" 2>&1 |
		sed 's/\x1b\[[0-9;]*m//g' >"$OUT/$name.log"
	t1=$(date +%s)
	grep -E 'LIVED|TIMED OUT|NOT VIABLE' "$OUT/$name.log" | sed "s#^ *#  $pkg: #" || true
	killed=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\), Not covered: \([0-9]*\).*/\1 \2 \3/p' "$OUT/$name.log")
	other=$(sed -n 's/^Timed out: \([0-9]*\), Not viable: \([0-9]*\).*/\1 \2/p' "$OUT/$name.log")
	if [ -z "$killed" ]; then
		echo "mutate: gremlins failed on $pkg; see $OUT/$name.log" >&2
		tail -20 "$OUT/$name.log" >&2
		exit 1
	fi
	echo "$pkg $killed $other $((t1 - t0))" >>"$summary"
done
end=$(date +%s)

echo
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then rev="$rev with uncommitted changes"; fi
echo "commit $rev; gremlins $GREMLINS_VERSION, $($GO version | cut -d' ' -f3-), $(nproc 2>/dev/null || echo ?) cores, workers $WORKERS, coefficient $COEF"
echo "GOFLAGS=$GOFLAGS; $(date -u +%Y-%m-%dT%H:%MZ)"
awk 'BEGIN { printf "%-18s %7s %6s %9s %10s %11s %8s %6s\n", "package", "killed", "lived", "timed-out", "not-viable", "not-covered", "score", "secs" }
{ k = $2; l = $3; tot = k + l + $5
  printf "%-18s %7d %6d %9d %10d %11d %7.1f%% %6d\n", $1, k, l, $5, $6, $4, (tot ? 100 * (k + $5) / tot : 0), $7 }' "$summary"
echo "total: $((end - start)) s; logs and JSON reports in $OUT"
