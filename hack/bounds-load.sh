#!/usr/bin/env bash
# bounds-load.sh: the figures of issue 11. Builds ferrofed from this tree and from a
# baseline commit (default 50f7948, the last before the bounds) in a temporary git
# worktree, then runs hack/boundsload against each binary: the gateway's peak RSS
# under the finding-3 attack (4 members x 16 MiB of {} entries, 3 searches), the
# finding-4 attack (300 searches on 2,000 members served by 4 loopback listeners) and
# the finding-10 query-size attack (100 searches of 900 KB on 4 members), with default
# limits, and the liveness p99 during the finding-4 flood against the same process
# idle. Bounded: every attack is a fixed number of requests with timeouts; each runs
# against a fresh process, one at a time. ATTACK=slowbody and slowdrain are issue 30's:
# 40 clients that never send their routed body, and what the member's other clients
# got, for 20 s, or across a SIGTERM (their baseline is 9b223b7, the last before the fix).
#
#   hack/bounds-load.sh [baseline-commit]        ATTACK=entries|fanout|query|headers|slowbody|slowdrain|all (default all)
#   ATTACK=slowbody hack/bounds-load.sh 9b223b7
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-50f7948}
attack=${ATTACK:-all}
work=$(mktemp -d)
cleanup() {
	git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
go build -o "$work/ferrofed-bounds" .
go build -o "$work/boundsload" ./hack/boundsload
git worktree add --detach "$work/base" "$base" >/dev/null 2>&1
(cd "$work/base" && go build -o "$work/ferrofed-$base" .)

echo "# $(date -u +%FT%TZ) on $(nproc) cores; the machine may be shared: compare the two rows of one run"
"$work/boundsload" -binary "$work/ferrofed-$base" -baseline -attack "$attack"
"$work/boundsload" -binary "$work/ferrofed-bounds" -attack "$attack"
