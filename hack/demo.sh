#!/usr/bin/env bash
# `make demo`: the whole of ferrofed on this machine, from a fresh clone. It runs on one
# of two clusters, said in its first lines:
#
#   local    a real single-node Kubernetes (hack/local-cluster.sh) when this machine can
#            run one (root, and `hack/local-cluster.sh preflight` passes): the chart with
#            its webhook, the operator in its pod, two member nodes as pods, the sample
#            Gateway and a copy with drainDelay 0s (2 replicas each) drained by the
#            kubelet, and one rolling restart of each under load (hack/demo local);
#   envtest  kube-apiserver and etcd only, otherwise: the operator and the gateway run
#            as processes here (below, from "1. build").
#
# Every long step shows its elapsed time; a failed one names itself and its log;
# Ctrl-C, DEMO_EXIT_AFTER or a failure stops everything the demo started (on the local
# node: `hack/local-cluster.sh down` when the demo started the node, which restores
# the host; the demo's namespace and release only, when the node was already up).
#
# envtest:
#  1. builds ferrofed, the demo helper (hack/demo), the member node (test/doubles/members), the
#     local control plane (hack/controlplane.sh) and helm (hack/tools.sh); second runs
#     reuse all of them;
#  2. starts kube-apiserver and etcd, installs charts/ferrofed (webhook off: the operator
#     runs here, outside the cluster, with --enable-webhook=false) and runs the operator;
#  3. starts two member nodes on loopback, applies the sample Gateway from config/samples
#     with those members in its inline configuration, and prints the grace period and
#     probes the operator derived, read back from the live Deployment;
#  4. starts the gateway (`ferrofed serve`) from the ferrofed.toml the operator rendered
#     into the ConfigMap, read back from the API, and prints a curl for each route, the
#     data plane's with a demo client's bearer token (.demo/client-token);
#  5. on Ctrl-C (or after DEMO_EXIT_AFTER seconds) sends the gateway SIGTERM, shows its
#     four drain steps, and stops everything it started, also when a step fails.
#
# State and logs live in .demo/ (git-ignored).
#
#   DEMO_CLUSTER=local|envtest  force the cluster (default: local when preflight passes)
#   DEMO_EXIT_AFTER=N   stop by itself N seconds after the gateway is up (envtest) or
#                       after the rollouts (local): smoke runs, CI
#   DEMO_SAMPLE=FILE    the Gateway to apply instead of the first in config/samples
#   DEMO_STATE=DIR      where binaries, state and logs go instead of .demo/
#   DEMO_RPS=N          the load's requests a second during the rollouts (local; 150)
set -euo pipefail
# Job control: every process started below gets its own process group, so Ctrl-C
# reaches this script alone (which then drains the gateway first), and stopping a group
# also stops what that process started (envtest's etcd and kube-apiserver).
set -m

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
state="${DEMO_STATE:-$root/.demo}"
exit_after="${DEMO_EXIT_AFTER:-}"
t0="$(date +%s.%N)"
mode=""
namespace=demo
issuer="https://demo-issuer.ferrofed.local"
audience="ferrofed-demo"
scope="ferrofed.operator"
# The data plane asks every request for a bearer token (auth.data_plane = "required",
# the default): the demo's client reads and searches every resource type.
client_scope="system/*.rs"

if [[ -t 1 ]]; then bold=$'\033[1m'; dim=$'\033[2m'; reset=$'\033[0m'; else bold=""; dim=""; reset=""; fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$reset"; }
info() { printf '    %s\n' "$*"; }
fail() { printf '\n%sdemo: %s%s\n' "$bold" "$*" "$reset" >&2; exit 1; }
if [[ -n "$exit_after" && ! "$exit_after" =~ ^[0-9]+$ ]]; then fail "DEMO_EXIT_AFTER=$exit_after is not a number of seconds"; fi

# ---- processes ------------------------------------------------------------------------
pids=()
names=()
# start NAME LOG CMD...: runs CMD in the background, in its own process group.
start() {
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  pids+=("$!")
  names+=("$name")
}
# stop_pid PID NAME: SIGTERM to the process group, SIGKILL after 20 s.
stop_pid() {
  local pid=$1 name=$2 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    info "$name did not stop in 20 s: SIGKILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ "$mode" == local ]]; then
    local_cleanup "$rc"
    exit "$rc"
  fi
  if ((${#pids[@]} > 0)); then
    step "Stopping what the demo started"
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
      if kill -0 "${pids[i]}" 2>/dev/null; then
        stop_pid "${pids[i]}" "${names[i]}"
        info "stopped ${names[i]}"
      fi
    done
  fi
  rm -f "$state/kubeconfig"
  if ((rc != 0)); then
    printf '\n%sdemo: failed (exit %d); logs are in %s%s\n' "$bold" "$rc" "${state#"$root"/}/logs/" "$reset" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'fail "interrupted"' INT TERM

# wait_until SECONDS WHAT CMD...: polls CMD every 0.5 s.
wait_until() {
  local seconds=$1 what=$2 i
  shift 2
  for ((i = 0; i < seconds * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  fail "timed out after ${seconds}s waiting for $what"
}

# ---- which cluster -----------------------------------------------------------------------
sample="${DEMO_SAMPLE:-$(grep -l '^kind: Gateway' config/samples/*.yaml 2>/dev/null | head -1 || true)}"
[[ -n "$sample" && -f "$sample" ]] || fail "config/samples holds no Gateway (or DEMO_SAMPLE names no file)"
why=""
case "${DEMO_CLUSTER:-}" in
"")
  if why="$(hack/local-cluster.sh preflight 2>&1)"; then
    mode=local
  else
    mode=envtest
    why="the real node cannot start here: $why"
  fi
  ;;
local)
  why="$(hack/local-cluster.sh preflight 2>&1)" || fail "DEMO_CLUSTER=local, but the real node cannot start here: $why"
  mode=local
  why="DEMO_CLUSTER=local; $why"
  ;;
envtest)
  mode=envtest
  why="DEMO_CLUSTER=envtest"
  ;;
*) fail "DEMO_CLUSTER=$DEMO_CLUSTER: want local or envtest" ;;
esac
if [[ "$mode" == local ]]; then
  printf '%sdemo: on the real local node%s (hack/local-cluster.sh: kubelet, containerd, kube-proxy): %s\n' "$bold" "$reset" "$why"
else
  printf '%sdemo: on the envtest control plane%s (kube-apiserver and etcd, no kubelet: the operator and the gateway run as processes here): %s\n' "$bold" "$reset" "$why"
fi
info "DEMO_CLUSTER=local|envtest forces one; DEMO_EXIT_AFTER=N stops by itself"

# ---- the real node -------------------------------------------------------------------------
release=ferrofed
release_ns="ferrofed-system"
cluster_started=""
cluster_was_up=""
release_installed=""
namespace_used=""
step_pid=""
demo_pid=""
interrupted=""
current_step=""
current_log=""

# run_step WHAT LOG CMD...: runs CMD with its output in LOG, showing the elapsed time
# (in place with the log's last line on a terminal, every 15 s otherwise); when it
# fails, shows the log's last lines and fails naming WHAT and LOG.
run_step() {
  local what=$1 log=$2 start=$SECONDS next=15 rc=0
  shift 2
  current_step="$what"
  current_log="$log"
  "$@" >"$log" 2>&1 &
  step_pid=$!
  while kill -0 "$step_pid" 2>/dev/null; do
    if [[ -t 1 ]]; then
      printf '\r\033[K    %s: %d s  %s' "$what" $((SECONDS - start)) "$(tail -n1 "$log" 2>/dev/null | cut -c1-70)"
    elif ((SECONDS - start >= next)); then
      info "$what: $((SECONDS - start)) s"
      next=$((next + 15))
    fi
    sleep 1 &
    wait $! 2>/dev/null || true
  done
  wait "$step_pid" || rc=$?
  step_pid=""
  [[ -t 1 ]] && printf '\r\033[K'
  if ((rc != 0)); then
    tail -n 20 "$log" | sed 's/^/    | /' >&2
    fail "$what failed (exit $rc); its log: ${log#"$root"/}"
  fi
  info "$what: done in $((SECONDS - start)) s"
}

local_cleanup() {
  local rc=$1 start=$SECONDS
  if [[ -n "$step_pid" ]] && kill -0 "$step_pid" 2>/dev/null; then
    kill -TERM -- "-$step_pid" 2>/dev/null || kill -TERM "$step_pid" 2>/dev/null || true
    wait "$step_pid" 2>/dev/null || true
  fi
  if [[ -n "$demo_pid" ]] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -INT "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  if ((rc != 0)) && [[ -z "$interrupted" && -n "$namespace_used" ]]; then
    # What the pods and the operator said, before the teardown removes them.
    local kc
    kc="$(hack/local-cluster.sh kubeconfig)"
    "$root/bin/cluster/kubectl" --kubeconfig "$kc" get all,events -n demo -o wide >"$logs/namespace-demo.txt" 2>&1 || true
    "$root/bin/cluster/kubectl" --kubeconfig "$kc" logs -n "$release_ns" deployment/ferrofed-operator --tail=300 >"$logs/operator.log" 2>&1 || true
    info "kept for a look: ${logs#"$root"/}/namespace-demo.txt (pods, events), ${logs#"$root"/}/operator.log; the node's component logs stay in /var/lib/ferrofed-cluster/logs"
  fi
  step "Stopping what the demo started"
  if [[ -n "$cluster_started" ]]; then
    info "hack/local-cluster.sh down: pods deleted while the kubelet runs, every component stopped, the host restored"
    hack/local-cluster.sh down >"$logs/cluster-down.log" 2>&1 || info "hack/local-cluster.sh down failed: see ${logs#"$root"/}/cluster-down.log"
    grep -E 'host restored|warning|differs|    ' "$logs/cluster-down.log" | sed 's/^local-cluster: //; s/^/    /' || true
    info "node down in $((SECONDS - start)) s (log: ${logs#"$root"/}/cluster-down.log)"
  else
    local kc
    kc="$(hack/local-cluster.sh kubeconfig)"
    if [[ -n "$namespace_used" ]]; then
      "$root/bin/cluster/kubectl" --kubeconfig "$kc" delete namespace demo --wait --timeout=150s >/dev/null 2>&1 ||
        info "namespace demo not deleted in 150 s"
      info "deleted namespace demo"
    fi
    if [[ -n "$release_installed" ]]; then
      "$root/bin/helm" uninstall "$release" --namespace "$release_ns" --kubeconfig "$kc" --wait >/dev/null 2>&1 ||
        info "helm uninstall $release failed"
      info "uninstalled release $release (the Gateway CRD stays: helm.sh/resource-policy keep)"
    fi
    [[ -n "$cluster_was_up" ]] && info "the local cluster was up before the demo: left running (hack/local-cluster.sh down stops it)"
  fi
  rm -f "$state/token" "$state/client-token"
  if ((rc != 0)); then
    if [[ -n "$interrupted" ]]; then
      printf '\n%sdemo: interrupted; everything it started is stopped%s\n' "$bold" "$reset" >&2
    else
      printf '\n%sdemo: failed at "%s" (exit %d); its log: %s; all logs in %s%s\n' "$bold" "${current_step:-setup}" "$rc" \
        "${current_log#"$root"/}" "${logs#"$root"/}/" "$reset" >&2
    fi
  fi
}

if [[ "$mode" == local ]]; then
  rm -rf "$state/logs"
  mkdir -p "$state/bin" "$state/logs"
  logs="$state/logs"
  trap 'interrupted=1; fail "interrupted"' INT TERM

  step "Building (cached: second runs only check)"
  run_step "the node components (kubelet, kube-apiserver, ..., etcd; bin/cluster)" "$logs/cluster-build.log" hack/local-cluster.sh build
  run_step "helm (bin/helm)" "$logs/helm-build.log" hack/tools.sh helm
  demo="$state/bin/demo"
  kubectl="$root/bin/cluster/kubectl"
  helm="$root/bin/helm"
  kubeconfig="$(hack/local-cluster.sh kubeconfig)"

  cluster_was_up=""
  if hack/local-cluster.sh status >/dev/null 2>&1; then
    cluster_was_up=1
    step "Using the local node that is already up ($kubeconfig)"
  else
    step "Starting the local node (hack/local-cluster.sh up; \`down\` restores the host at the end)"
    cluster_started=1
    run_step "etcd, kube-apiserver, containerd, controller-manager, scheduler, kubelet, kube-proxy" "$logs/cluster-up.log" env CLUSTER_SKIP_IMAGES=1 hack/local-cluster.sh up
    grep -E 'node Ready|cluster up' "$logs/cluster-up.log" | sed 's/^local-cluster: /    /' || true
  fi
  "$kubectl" --kubeconfig "$kubeconfig" get nodes -o wide | sed 's/^/    /'

  step "Building the images and the demo helper from this tree (the images imported into containerd: no registry)"
  run_step "ferrofed and the member server, CGO_ENABLED=0, then ctr images import" "$logs/images.log" hack/local-cluster.sh images
  grep -E 'imported|images done' "$logs/images.log" | sed 's/^local-cluster: /    /' || true
  # CGO_ENABLED=0 like the images: a cold build reuses their client-go and controller-runtime.
  run_step "the demo helper (hack/demo, CGO_ENABLED=0)" "$logs/build.log" env CGO_ENABLED=0 go build -o "$state/bin/" ./hack/demo

  step "Installing the chart with its webhook: helm upgrade --install $release charts/ferrofed --wait"
  "$helm" status "$release" --namespace "$release_ns" --kubeconfig "$kubeconfig" >/dev/null 2>&1 || release_installed=1
  run_step "helm install (the operator pod becoming Ready)" "$logs/helm.log" "$helm" upgrade --install "$release" charts/ferrofed \
    --namespace "$release_ns" --create-namespace --kubeconfig "$kubeconfig" \
    --set image.repository=ferrofed.local/ferrofed --set image.tag=e2e --set image.pullPolicy=Never --wait --timeout 4m
  "$kubectl" --kubeconfig "$kubeconfig" get pods --namespace "$release_ns" -o wide | sed 's/^/    /'
  info "webhook: $("$kubectl" --kubeconfig "$kubeconfig" get validatingwebhookconfigurations -o jsonpath='{range .items[*]}{.metadata.name} -> Service {.webhooks[0].clientConfig.service.namespace}/{.webhooks[0].clientConfig.service.name}{"\n"}{end}' | grep ferrofed || echo none)"

  current_step="the demo on the node (hack/demo local)"
  current_log="the output above"
  namespace_used=1
  "$demo" local --kubeconfig "$kubeconfig" --kubectl "$kubectl" --namespace demo --sample "$sample" \
    --rps "${DEMO_RPS:-150}" --state "$state" --exit-after "${exit_after:--1}" --t0 "$t0" &
  demo_pid=$!
  trap 'interrupted=1; kill -INT "$demo_pid" 2>/dev/null || true' INT TERM
  rc=0
  while :; do
    if wait "$demo_pid"; then rc=0; else rc=$?; fi
    kill -0 "$demo_pid" 2>/dev/null || break
  done
  demo_pid=""
  trap 'interrupted=1; fail "interrupted"' INT TERM
  [[ -n "$interrupted" ]] && fail "interrupted"
  ((rc == 0)) || fail "the demo on the node failed (exit $rc)"
  exit 0
fi

# ---- 1. build ------------------------------------------------------------------------
rm -rf "$state/logs"
mkdir -p "$state/bin" "$state/logs"
logs="$state/logs"

step "Building (cached: second runs only check)"
hack/controlplane.sh >/dev/null 2> >(sed 's/^/    /' >&2)
hack/tools.sh helm >/dev/null 2> >(sed 's/^/    /' >&2)
k8s="$root/bin/k8s"
kubectl="$k8s/kubectl"
helm="$root/bin/helm"
info "building ferrofed, the demo helper and the member node (go build; the first build takes a few minutes)"
start_build=$SECONDS
version="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
start "go build" "$logs/build.log" go build -ldflags "-X main.version=$version" -o "$state/bin/" . ./hack/demo ./test/doubles/members/fhirmember
build="${pids[-1]}"
while kill -0 "$build" 2>/dev/null; do
  sleep 1
  if kill -0 "$build" 2>/dev/null && (((SECONDS - start_build) % 20 == 0)); then info "  still building ($((SECONDS - start_build)) s)"; fi
done
wait "$build" || { cat "$logs/build.log" >&2; fail "go build failed"; }
ferrofed="$state/bin/ferrofed"
demo="$state/bin/demo"
fhirmember="$state/bin/fhirmember"
info "ferrofed: $("$ferrofed" version)"

# ---- 2. control plane, chart, operator ------------------------------------------------
step "Starting the local control plane (kube-apiserver and etcd from $(cat "$k8s/.versions"))"
rm -f "$state/kubeconfig"
start "control plane" "$logs/controlplane.log" "$demo" controlplane --assets "$k8s" --kubeconfig "$state/kubeconfig"
wait_until 60 "the control plane (see $logs/controlplane.log)" test -f "$state/kubeconfig"
export KUBECONFIG="$state/kubeconfig"
info "$(head -1 "$logs/controlplane.log"); KUBECONFIG=${KUBECONFIG#"$root"/}"

step "Installing the chart: helm install ferrofed charts/ferrofed --set webhook.enabled=false"
"$helm" install ferrofed charts/ferrofed --namespace ferrofed-system --create-namespace \
  --set webhook.enabled=false >"$logs/helm.log" 2>&1 || { cat "$logs/helm.log" >&2; fail "helm install failed"; }
info "$("$helm" list --namespace ferrofed-system --short) $(grep -m1 '^STATUS' "$logs/helm.log")"
info "installed: $("$kubectl" get crd gateways.ferrofed.io -o name), deployment/ferrofed-operator, its ServiceAccount and RBAC"
info "(no kubelet here: the operator runs as a process on this machine instead of in that Deployment)"

step "Running the operator: ferrofed operator --enable-webhook=false --leader-elect=false"
probe_port="$("$demo" freeport)"
start "operator" "$logs/operator.log" "$ferrofed" operator --enable-webhook=false --leader-elect=false \
  --metrics-bind-address=0 --health-probe-bind-address="127.0.0.1:$probe_port"
wait_until 60 "the operator's /readyz (see $logs/operator.log)" "$demo" get "http://127.0.0.1:$probe_port/readyz"
info "ready: http://127.0.0.1:$probe_port/readyz"

# ---- 3. members and the sample Gateway -------------------------------------------------
step "Starting two demo member nodes on loopback (test/doubles/members)"
member_urls=()
for id in member-a member-b; do
  start "$id" "$logs/$id.log" "$fhirmember" -listen 127.0.0.1:0 -id "$id"
  wait_until 20 "$id" grep -q '^http' "$logs/$id.log"
  member_urls+=("$(head -1 "$logs/$id.log")")
  info "$id: ${member_urls[-1]}"
done

gateway_port="$("$demo" freeport)"
token="$("$demo" token --dir "$state" --issuer "$issuer" --audience "$audience" --scope "$scope" \
  --client-out "$state/client-token" --client-scope "$client_scope")"
step "Applying the sample Gateway ($sample) with the demo members in its inline configuration"
"$kubectl" create namespace "$namespace" >/dev/null
name="$("$kubectl" apply --namespace "$namespace" -f "$sample" -o name)"
name="${name##*/}"
# The members, and the demo token issuer of the data plane's client and of the dependency
# report (in place of the sample's issuer), go into spec.config.inline;
# spec.port is a free port here, since the gateway will run on this machine.
cat >"$state/patch.yaml" <<PATCH
spec:
  port: $gateway_port
  config:
    inline: |
      [[registry.members]]
      id = "member-a"
      query_endpoint = "${member_urls[0]}"

      [[registry.members]]
      id = "member-b"
      query_endpoint = "${member_urls[1]}"

      [[auth.issuers]]
      issuer = "$issuer"
      audience = "$audience"
      jwks_file = "$state/jwks.json"
      operator_scope = "$scope"
PATCH
"$kubectl" patch gateway "$name" --namespace "$namespace" --type merge --patch-file "$state/patch.yaml" >/dev/null
info "gateway.ferrofed.io/$name in namespace $namespace"

step "What the operator derived (read back from the live Deployment $namespace/$name)"
generation_ok() {
  [[ "$("$kubectl" get gateway "$name" -n "$namespace" -o jsonpath='{.status.observedGeneration}')" == \
    "$("$kubectl" get gateway "$name" -n "$namespace" -o jsonpath='{.metadata.generation}')" ]] &&
    "$kubectl" get deployment "$name" -n "$namespace" >/dev/null
}
wait_until 60 "the operator to reconcile Gateway $name (see $logs/operator.log)" generation_ok
jp() { "$kubectl" get "$1" "$name" -n "$namespace" -o jsonpath="$2"; }
"$kubectl" get gateway "$name" -n "$namespace" | sed 's/^/    /'
info "(READY stays False: no kubelet runs pods on this control plane; the gateway runs below as a process)"
info ""
info "spec.lifecycle:            $(jp gateway '{.spec.lifecycle}')"
info "status.gracePeriod:        $(jp gateway '{.status.gracePeriod}')"
info "terminationGracePeriodSeconds: $(jp deployment '{.spec.template.spec.terminationGracePeriodSeconds}')"
for p in startupProbe readinessProbe livenessProbe; do
  info "$(printf '%-15s' "$p:") $(jp deployment "{.spec.template.spec.containers[0].$p.httpGet.scheme} {.spec.template.spec.containers[0].$p.httpGet.path} port {.spec.template.spec.containers[0].$p.httpGet.port}, every {.spec.template.spec.containers[0].$p.periodSeconds}s, {.spec.template.spec.containers[0].$p.failureThreshold} failures")"
done
info "strategy:                  $(jp deployment '{.spec.strategy}')"
configmap="$(jp deployment '{.spec.template.spec.volumes[*].configMap.name}')"
configmap="${configmap%% *}"
[[ -n "$configmap" ]] || fail "the Deployment mounts no ConfigMap"

# ---- 4. the gateway ----------------------------------------------------------------------
step "Starting the gateway from ConfigMap $namespace/$configmap (ferrofed.toml, read back from the API)"
"$kubectl" get configmap "$configmap" -n "$namespace" -o jsonpath='{.data.ferrofed\.toml}' >"$state/ferrofed.toml"
[[ -s "$state/ferrofed.toml" ]] || fail "ConfigMap $configmap has no ferrofed.toml"
sed 's/^/    | /' "$state/ferrofed.toml"
# The pod would read the page-token key from the Secret the operator made, mounted at
# /etc/ferrofed/page-token; here it is read back from the API into the state folder.
secret="$(jp deployment '{.spec.template.spec.volumes[?(@.name=="page-token")].secret.secretName}')"
[[ -n "$secret" ]] || fail "the Deployment mounts no page-token Secret"
mkdir -p "$state/page-token"
"$kubectl" get secret "$secret" -n "$namespace" -o jsonpath='{.data.key}' | base64 -d >"$state/page-token/key"
[[ -s "$state/page-token/key" ]] || fail "Secret $secret holds no key"
sed -i "s|/etc/ferrofed/page-token/key|$state/page-token/key|" "$state/ferrofed.toml"
# The drain's outcome goes where the kubelet would read it; here, beside the logs.
sed -i "s|'/dev/termination-log'|'$state/termination-log'|" "$state/ferrofed.toml"
info "(federation.page_token_key_file: the key of Secret $namespace/$secret, which the pods mount)"
"$ferrofed" config check --config "$state/ferrofed.toml" | sed 's/^/    /'
info "(server.listen is the pod's, \":<spec.port>\": every interface of this machine, IPv4 and IPv6)"
start "gateway" "$logs/gateway.log" "$ferrofed" serve --config "$state/ferrofed.toml"
gateway_pid="${pids[-1]}"
wait_until 30 "the gateway's readiness (see $logs/gateway.log)" "$ferrofed" healthcheck --config "$state/ferrofed.toml"
info "$("$ferrofed" healthcheck --config "$state/ferrofed.toml")"

base="http://127.0.0.1:$gateway_port"
base_path="$(jp gateway '{.spec.basePath}')"
[[ "$base_path" == "/" ]] || base="$base$base_path"
step "Try it (each route answered once already; the answer is below its curl)"
printf '%s\n' "$token" >"$state/token"
# try WHAT URL [TOKEN_FILE]: one GET, with the bearer token of TOKEN_FILE when given.
try() {
  local what=$1 url=$2 token_file=${3:-}
  printf '\n    %s%s%s\n' "$bold" "$what" "$reset"
  if [[ -n "$token_file" ]]; then
    info "curl -s -H \"Authorization: Bearer \$(cat ${token_file#"$root"/})\" '$url'"
    info "${dim}$("$demo" get "$url" "$(cat "$token_file")" 2>&1 | cut -c1-300)${reset}"
  else
    info "curl -s '$url'"
    info "${dim}$("$demo" get "$url" 2>&1 | cut -c1-300)${reset}"
  fi
}
try "liveness" "$base/health"
try "readiness" "$base/health/readiness"
try "a federated search over both members (client token, scope $client_scope)" "$base/fhir/Patient?family=Smith" "$state/client-token"
try "a request routed to one member (client token)" "$base/nodes/member-a/fhir/Patient" "$state/client-token"
try "one patient read back by its federated id, {member}.{id} (client token)" "$base/fhir/Patient/member-a.member-a-1" "$state/client-token"
try "the same search without a token: 401 (auth.data_plane = \"required\", the default)" "$base/fhir/Patient?family=Smith"
try "the dependency report (operator token)" "$base/operator/dependencies" "$state/token"
info ""
info "CLIENT_TOKEN=\$(cat ${state#"$root"/}/client-token)   # the demo app's token for /fhir and /nodes, scope $client_scope, valid 24 h"
info "TOKEN=\$(cat ${state#"$root"/}/token)   # a demo issuer's token with scope $scope, valid 24 h"
info "logs: ${logs#"$root"/}/  kubectl: KUBECONFIG=${KUBECONFIG#"$root"/} bin/k8s/kubectl get fgw -A"

# ---- 5. wait, then drain -----------------------------------------------------------------
stop_requested=""
trap 'stop_requested=1' INT TERM
if [[ -n "$exit_after" ]]; then
  step "Running for $exit_after s (DEMO_EXIT_AFTER), then stopping"
  deadline=$((SECONDS + exit_after))
else
  step "Running. Press Ctrl-C to stop: the gateway drains first"
  deadline=""
fi
while [[ -z "$stop_requested" ]]; do
  [[ -n "$deadline" ]] && ((SECONDS >= deadline)) && break
  kill -0 "$gateway_pid" 2>/dev/null || fail "the gateway exited on its own (see $logs/gateway.log)"
  sleep 1 &
  wait $! 2>/dev/null || true
done
trap 'fail "interrupted"' INT TERM

step "Stopping the gateway with SIGTERM: the four-step drain"
kill -TERM "$gateway_pid"
sleep 0.3
info "during the drain delay, readiness:  $("$demo" get "$base/health/readiness" 2>&1 | cut -c1-200)"
info "                      and liveness: $("$demo" get "$base/health" 2>&1 | cut -c1-200)"
wait "$gateway_pid" 2>/dev/null || true
"$demo" drainlog "$logs/gateway.log" | sed 's/^  /    /'
info "(gateway log: ${logs#"$root"/}/gateway.log)"
