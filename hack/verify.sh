#!/usr/bin/env bash
# Fails when gofmt, go vet, the linters (make lint) or any generated file disagrees with
# the tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "verify: gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
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
