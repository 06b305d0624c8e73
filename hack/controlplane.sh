#!/usr/bin/env bash
# Builds the local control plane that envtest, `make demo` and the install test use:
# kube-apiserver and kubectl from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3,
# all from Go modules (no download of prebuilt binaries is possible here).
# The binaries land in bin/k8s/ (git-ignored); a stamp file records the versions, so a
# second run with the same versions does nothing. Prints the folder on its last line,
# ready for KUBEBUILDER_ASSETS.
set -euo pipefail

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${CONTROLPLANE_DIR:-$root/bin/k8s}"
stamp="$out/.versions"
want="kubernetes=$KUBERNETES_VERSION etcd=$ETCD_VERSION"

log() { echo "controlplane: $*" >&2; }

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$out/kube-apiserver" && -x "$out/etcd" && -x "$out/kubectl" ]]; then
  log "cached in $out ($want)"
  echo "$out"
  exit 0
fi

mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
staging="${KUBERNETES_VERSION/v1./v0.}"

log "resolving k8s.io/kubernetes $KUBERNETES_VERSION (staging modules at $staging)"
mkdir -p "$work/kube"
cat >"$work/kube/go.mod" <<MOD
module ferrofed.local/controlplane
go 1.26
require k8s.io/kubernetes $KUBERNETES_VERSION
MOD
(cd "$work/kube" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes)
modfile="$(cd "$work/kube" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
# Every staging module k8s.io/kubernetes replaces with ./staging/... is pinned to the
# published module of the matching version instead.
sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print "replace " $1 " => " $1 " '"$staging"'"}' >>"$work/kube/go.mod"
cat >"$work/kube/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
(cd "$work/kube" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)
(cd "$work/kube" && GOFLAGS=-mod=mod go get k8s.io/kubernetes@"$KUBERNETES_VERSION" >/dev/null)

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
log "building kube-apiserver and kubectl $KUBERNETES_VERSION (about 6 minutes cold on 2 cores)"
start=$SECONDS
(cd "$work/kube" && GOFLAGS=-mod=mod go build -ldflags "$ldflags" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 30
  kill -0 "$pid" 2>/dev/null && log "  still building kube-apiserver and kubectl ($((SECONDS - start)) s)"
done
wait "$pid"
log "built kube-apiserver and kubectl in $((SECONDS - start)) s"

log "building etcd $ETCD_VERSION"
mkdir -p "$work/etcd"
cat >"$work/etcd/go.mod" <<MOD
module ferrofed.local/etcd
go 1.26
require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
start=$SECONDS
(cd "$work/etcd" && GOFLAGS=-mod=mod go get go.etcd.io/etcd/server/v3@"$ETCD_VERSION" >/dev/null 2>&1 && GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
log "built etcd in $((SECONDS - start)) s"

echo "$want" >"$stamp"
"$out/kube-apiserver" --version >&2
log "ready in $out"
echo "$out"
