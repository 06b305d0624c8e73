#!/usr/bin/env bash
# Builds the command-line tools the chart tests, `make demo` and `make lint` use, from Go
# modules (no prebuilt binary can be downloaded here), and caches them in bin/:
#
#   bin/helm                            helm.sh/helm/v3 (HELM_VERSION)
#   bin/golangci-lint-kube-api-linter   golangci-lint with the Kubernetes API linter
#                                       (sigs.k8s.io/kube-api-linter) compiled in as a
#                                       module plugin, both pinned in .custom-gcl.yml
#
# `hack/tools.sh helm` or `hack/tools.sh golangci-lint` builds one; no argument builds
# both. Each is built in a throwaway module, as hack/controlplane.sh builds the control
# plane: their dependencies would fight the project's own in go.mod. A stamp file per
# tool records its version, so a second run with the same version does nothing.
# Progress goes to stderr; the last line on stdout is the bin/ folder.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${TOOLS_DIR:-$root/bin}"

log() { echo "tools: $*" >&2; }

mkdir -p "$out"
work=""
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; fi
  if [[ -n "$work" ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# cached reports whether bin/$1 is there with the stamp $2 (and logs it).
cached() {
  local bin="$1" want="$2" stamp="$out/.$1-version"
  if [[ -x "$out/$bin" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "$bin cached in $out/$bin ($want)"
    return 0
  fi
  return 1
}

# build runs a go build in the background (so that a long build shows it is alive) in
# the folder $1 with the rest as arguments.
build() {
  local dir="$1" what="$2" start=$SECONDS
  shift 2
  (cd "$dir" && GOFLAGS=-mod=mod go build "$@") &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20
    kill -0 "$pid" 2>/dev/null && log "  still building $what ($((SECONDS - start)) s)"
  done
  wait "$pid"
  pid=""
}

# newWork makes a fresh throwaway folder.
newWork() {
  if [[ -n "$work" ]]; then rm -rf "$work"; fi
  work="$(mktemp -d)"
}

tool_helm() {
  # The stamp also names the build scheme, so that a change of the ldflags below rebuilds.
  local want="$HELM_VERSION k8s-capabilities-from-client-go"
  cached helm "$want" && return 0
  newWork
  log "resolving helm.sh/helm/v3 $HELM_VERSION"
  cat >"$work/go.mod" <<MOD
module ferrofed.local/tools
go 1.26
MOD
  (cd "$work" && GOFLAGS=-mod=mod go get "helm.sh/helm/v3@$HELM_VERSION" >/dev/null 2>&1) ||
    { log "go get helm.sh/helm/v3@$HELM_VERSION failed:"; (cd "$work" && GOFLAGS=-mod=mod go get "helm.sh/helm/v3@$HELM_VERSION"); exit 1; }

  log "building helm $HELM_VERSION (about 3 minutes cold on 2 cores)"
  local start=$SECONDS k8s_minor ldflags pkg
  # As helm's own Makefile does: the Kubernetes version `helm template` and `helm lint`
  # assume (.Capabilities.KubeVersion, the chart's kubeVersion check) is the one of the
  # client-go helm is built with; unset, it would be v1.20.
  IFS=. read -r _ k8s_minor _ < <(cd "$work" && go list -m -f '{{.Version}}' k8s.io/client-go)
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  build "$work" helm -ldflags "$ldflags" -o "$work/helm" helm.sh/helm/v3/cmd/helm
  mv "$work/helm" "$out/helm"
  echo "$want" >"$out/.helm-version"
  log "built $("$out/helm" version --short) in $((SECONDS - start)) s: $out/helm"
}

# customGCL prints the value of key $1 in .custom-gcl.yml: the top-level one, or with
# "plugin." before it that of its only plugin.
customGCL() {
  local key="$1" file="$root/.custom-gcl.yml" v
  if [[ "$key" == plugin.* ]]; then
    v="$(awk -v k="${key#plugin.}" '
      /^plugins:/ { on = 1; next }
      on && /^[^ -]/ { on = 0 }
      on { sub(/^[ -]+/, ""); if (index($0, k ":") == 1) { sub(k ":[ ]*", ""); gsub(/["\047]/, ""); n++; print } }
      END { if (n != 1) exit 1 }' "$file")" || { log "$file: want exactly one plugin with a $key"; exit 1; }
  else
    v="$(sed -n "s/^$key:[ ]*['\"]\{0,1\}\([^'\" #]*\).*/\1/p" "$file")"
  fi
  [[ -n "$v" ]] || { log "$file has no $key"; exit 1; }
  echo "$v"
}

# golangci-lint builds what `golangci-lint custom` builds from .custom-gcl.yml: the
# golangci-lint source with the plugin's import in cmd/golangci-lint/plugins.go. custom
# takes that source from a git clone, which cannot be made here; this takes the same
# release from the Go module proxy.
tool_golangci_lint() {
  local version name plugin pluginVersion want
  version="$(customGCL version)"
  name="$(customGCL name)"
  plugin="$(customGCL plugin.module)"
  pluginVersion="$(customGCL plugin.version)"
  want="$version $plugin@$pluginVersion"
  cached "$name" "$want" && return 0
  newWork
  log "resolving github.com/golangci/golangci-lint/v2 $version and $plugin $pluginVersion"
  local src
  src="$(cd "$work" && go mod download -json "github.com/golangci/golangci-lint/v2@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$src" ]] || { log "go mod download github.com/golangci/golangci-lint/v2@$version failed"; exit 1; }
  cp -r "$src" "$work/golangci-lint"
  chmod -R u+w "$work/golangci-lint"
  printf 'package main\n\nimport (\n\t_ "%s"\n)\n' "$plugin" >"$work/golangci-lint/cmd/golangci-lint/plugins.go"
  (cd "$work/golangci-lint" && GOFLAGS=-mod=mod go get "$plugin@$pluginVersion" >/dev/null 2>&1) ||
    { log "go get $plugin@$pluginVersion failed:"; (cd "$work/golangci-lint" && GOFLAGS=-mod=mod go get "$plugin@$pluginVersion"); exit 1; }

  log "building golangci-lint $version with $plugin (about 3 minutes cold on 2 cores)"
  local start=$SECONDS
  build "$work/golangci-lint" golangci-lint \
    -ldflags "-s -w -X main.version=$version-custom-gcl-kube-api-linter -X main.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -o "$work/$name" ./cmd/golangci-lint
  mv "$work/$name" "$out/$name"
  echo "$want" >"$out/.$name-version"
  log "built $("$out/$name" version --short 2>/dev/null || echo "$name") in $((SECONDS - start)) s: $out/$name"
}

# otelcol builds the collector distribution of hack/otelcol (main.go lists its
# components) with the versions its go.mod and go.sum pin, read-only: a build that would
# need another version fails instead of resolving one. The stamp is the collector release
# and a digest of those three files, so that an edit of any of them rebuilds.
tool_otelcol() {
  local src="$root/hack/otelcol" version digest want
  version="$(sed -n 's#^[[:space:]]*go.opentelemetry.io/collector/otelcol \(v[^ ]*\)$#\1#p' "$src/go.mod")"
  [[ -n "$version" ]] || { log "$src/go.mod requires no go.opentelemetry.io/collector/otelcol"; exit 1; }
  digest="$(cat "$src/main.go" "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-12)"
  want="$version $digest"
  cached otelcol "$want" && return 0
  newWork
  cp "$src/main.go" "$src/go.mod" "$src/go.sum" "$work/"
  log "downloading the modules of the collector $version (hack/otelcol/go.mod)"
  (cd "$work" && go mod download >/dev/null 2>&1) ||
    { log "go mod download in hack/otelcol failed:"; (cd "$work" && go mod download); exit 1; }

  log "building otelcol $version (about 3 minutes cold on 2 idle cores, 5 on busy ones)"
  local start=$SECONDS
  build "$work" otelcol -mod=readonly -trimpath -ldflags "-s -w -X main.version=$version" -o "$work/otelcol" .
  mv "$work/otelcol" "$out/otelcol"
  echo "$want" >"$out/.otelcol-version"
  log "built $("$out/otelcol" --version 2>/dev/null || echo otelcol) in $((SECONDS - start)) s: $out/otelcol"
}

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(helm golangci-lint otelcol)
for t in "${tools[@]}"; do
  case "$t" in
  helm) tool_helm ;;
  golangci-lint) tool_golangci_lint ;;
  otelcol) tool_otelcol ;;
  *) log "unknown tool $t (helm, golangci-lint, otelcol)"; exit 2 ;;
  esac
done
echo "$out"
