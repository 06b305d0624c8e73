#!/usr/bin/env bash
# Builds the command-line tools the chart tests and `make demo` use, from Go modules
# (no prebuilt binary can be downloaded here), and caches them in bin/:
#
#   bin/helm   helm.sh/helm/v3 (HELM_VERSION)
#
# Helm is built in a throwaway module, as hack/controlplane.sh builds the control plane:
# its Kubernetes dependencies would fight the project's own in go.mod. A stamp file
# records the version, so a second run with the same version does nothing. Progress goes
# to stderr; the last line on stdout is the bin/ folder.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${TOOLS_DIR:-$root/bin}"
stamp="$out/.helm-version"
# The stamp also names the build scheme, so that a change of the ldflags below rebuilds.
want="$HELM_VERSION k8s-capabilities-from-client-go"

log() { echo "tools: $*" >&2; }

mkdir -p "$out"
if [[ -x "$out/helm" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  log "helm $HELM_VERSION cached in $out/helm"
  echo "$out"
  exit 0
fi

work="$(mktemp -d)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

log "resolving helm.sh/helm/v3 $HELM_VERSION"
cat >"$work/go.mod" <<MOD
module ferrofed.local/tools
go 1.26
MOD
(cd "$work" && GOFLAGS=-mod=mod go get "helm.sh/helm/v3@$HELM_VERSION" >/dev/null 2>&1) ||
  { log "go get helm.sh/helm/v3@$HELM_VERSION failed:"; (cd "$work" && GOFLAGS=-mod=mod go get "helm.sh/helm/v3@$HELM_VERSION"); exit 1; }

log "building helm $HELM_VERSION (about 3 minutes cold on 2 cores)"
start=$SECONDS
# As helm's own Makefile does: the Kubernetes version `helm template` and `helm lint`
# assume (.Capabilities.KubeVersion, the chart's kubeVersion check) is the one of the
# client-go helm is built with; unset, it would be v1.20.
IFS=. read -r _ k8s_minor _ < <(cd "$work" && go list -m -f '{{.Version}}' k8s.io/client-go)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
(cd "$work" && GOFLAGS=-mod=mod go build -ldflags "$ldflags" -o "$work/helm" helm.sh/helm/v3/cmd/helm) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 20
  kill -0 "$pid" 2>/dev/null && log "  still building helm ($((SECONDS - start)) s)"
done
wait "$pid"
pid=""
mv "$work/helm" "$out/helm"
echo "$want" >"$stamp"
log "built $("$out/helm" version --short) in $((SECONDS - start)) s: $out/helm"
echo "$out"
