#!/usr/bin/env bash
# Fails when a tracked file is over 2 MiB, or when gofmt, go vet, the linters (make lint)
# or any generated file disagrees with the tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "verify: gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
# No built binary or bulky artifact in the tree: a 97 MB ferrofed binary once rode along
# in a commit, and a submission over the size limit is refused whole.
large=$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$1 > 2097152 {print $2 " (" $1 " bytes)"}')
if [[ -n "$large" ]]; then
  echo "verify: tracked files over 2 MiB (build into bin/ or /tmp, not the tree):" >&2; echo "$large" >&2; exit 1
fi
go vet ./...
before=$(git status --porcelain)
hack/generate.sh
after=$(git status --porcelain)
if [[ "$before" != "$after" ]] || ! git diff --quiet; then
  echo "verify: generated files drifted; run 'make generate' and commit:" >&2
  git status --porcelain >&2
  git diff --stat >&2
  exit 1
fi
# Last, so that a red lint does not hide a drift.
make --no-print-directory lint
echo "verify: ok"
