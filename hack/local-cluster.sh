#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for `make e2e`.
#
#   hack/local-cluster.sh up       build (once, cached), start, wait for the node, import images
#   hack/local-cluster.sh down     stop everything `up` started and restore the host (idempotent)
#   hack/local-cluster.sh status   what runs, and the kubeconfig
#   hack/local-cluster.sh build    only build the binaries into bin/cluster
#   hack/local-cluster.sh images   (re)build the project's images and import them
#   hack/local-cluster.sh storage  (re)install the volume provisioner (StorageClass local-path)
#   hack/local-cluster.sh preflight  whether `up` can start here, changing nothing (exit 0/1)
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy
# are built from Go modules (one `go build`, cached in bin/cluster behind a stamp file);
# containerd, runc and the CNI plugins come from Debian and are installed when missing.
# Pods live on a bridge (cni0) with a private /24 whose gateway address is the node IP;
# a FORWARD rule keeps pod traffic on this machine. No image is pulled: hack/image
# builds images from the project's binaries and `ctr images import` loads them.
# Volumes: rancher's local-path-provisioner, built from its Go module, runs as a pod and
# provisions PersistentVolumes of the default StorageClass `local-path` as folders in
# WORK/local-path (its helper pods run Debian's static busybox as /bin/sh).
# State lives in WORK (default /var/lib/ferrofed-cluster); `down` removes it, keeping
# only the component logs in WORK/logs.
set -euo pipefail

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CLUSTER_BIN_DIR:-$root/bin/cluster}"
WORK="${CLUSTER_WORK_DIR:-/var/lib/ferrofed-cluster}"
NODE_NAME="${CLUSTER_NODE_NAME:-ferrofed-node}"
BRIDGE=cni0
POD_CIDR="${CLUSTER_POD_CIDR:-10.244.77.0/24}"
NODE_IP="${POD_CIDR%.*/*}.1"
SERVICE_CIDR=10.96.0.0/24
API_SERVICE_IP=10.96.0.1
API_PORT=6443
ETCD_PORT=23790 # not 2379: keeps clear of any other etcd on the machine
ETCD_PEER_PORT=23800
KUBECONFIG_PATH="$WORK/kubeconfig"
PAUSE_IMAGE=ferrofed.local/pause:3.10
FERROFED_IMAGE="${FERROFED_IMAGE:-ferrofed.local/ferrofed:e2e}"
MEMBER_IMAGE="${MEMBER_IMAGE:-ferrofed.local/fhir-member:e2e}"
AUDIT_REPO_IMAGE="${AUDIT_REPO_IMAGE:-ferrofed.local/audit-repo:e2e}"
PMIR_IMAGE="${PMIR_IMAGE:-ferrofed.local/pmir:e2e}"
CTR_SOCK="$WORK/containerd/containerd.sock"
# The volume provisioner: rancher's local-path-provisioner from its Go module, its helper
# pods' image a static busybox (Debian's busybox-static) as /bin/sh, the volumes in
# LOCAL_PATH_DIR, the StorageClass STORAGE_CLASS (the cluster's default).
LOCAL_PATH_VERSION="${LOCAL_PATH_VERSION:-v0.0.30}"
LOCAL_PATH_IMAGE="ferrofed.local/local-path-provisioner:$LOCAL_PATH_VERSION"
HELPER_IMAGE=ferrofed.local/busybox:static
LOCAL_PATH_NS=local-path-storage
LOCAL_PATH_DIR="$WORK/local-path"
STORAGE_CLASS=local-path
# Components in start order; `down` stops them in reverse.
COMPONENTS=(etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet kube-proxy)
# Every sysctl kubelet, kube-proxy, the CNI bridge plugin or this script may change.
SYSCTLS=(net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables net.ipv4.conf.all.route_localnet vm.overcommit_memory
  vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes net.netfilter.nf_conntrack_max
  net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait)
# Host paths kubelet, containerd or libcni create outside WORK; removed on `down` when
# `up` found them absent.
HOST_PATHS=(/var/log/containers /var/log/pods /var/lib/cni /run/containerd /var/lib/kubelet /etc/cni /opt/cni)

log() { echo "local-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }
need_root() { [[ $EUID -eq 0 ]] || die "run as root (it starts kubelet, containerd and changes iptables)"; }
ctr_() { ctr --address "$CTR_SOCK" -n k8s.io "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# ---------------------------------------------------------------------------- deps

install_deps() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/portmap ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v findmnt >/dev/null || missing+=(util-linux)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing from Debian: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ---------------------------------------------------------------------------- build

# build compiles the Kubernetes components in ONE go build (they share most packages),
# then etcd, the pause program and the image tool. A stamp records the versions.
build() {
  local stamp="$BIN/.versions" want="kubernetes=$KUBERNETES_VERSION etcd=$ETCD_VERSION"
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd pause image)
  local ok=1 b
  for b in "${bins[@]}"; do [[ -x "$BIN/$b" ]] || ok=0; done
  if [[ $ok -eq 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "binaries cached in $BIN ($want)"
    return 0
  fi
  mkdir -p "$BIN"
  local work start total_start=$SECONDS
  work="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  local staging="${KUBERNETES_VERSION/v1./v0.}" minor
  minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"

  log "resolving k8s.io/kubernetes $KUBERNETES_VERSION (staging modules at $staging)"
  mkdir -p "$work/kube"
  printf 'module ferrofed.local/cluster\ngo 1.26\nrequire k8s.io/kubernetes %s\n' "$KUBERNETES_VERSION" >"$work/kube/go.mod"
  (cd "$work/kube" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes)
  local modfile
  modfile="$(cd "$work/kube" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  # k8s.io/kubernetes replaces its staging modules with ./staging/...; pin the
  # published module of the matching version instead.
  sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print "replace " $1 " => " $1 " '"$staging"'"}' >>"$work/kube/go.mod"
  local pkgs=(cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet cmd/kube-proxy cmd/kubectl)
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for b in "${pkgs[@]}"; do printf '\t_ "k8s.io/kubernetes/%s"\n' "$b"; done
    printf ')\n'
  } >"$work/kube/tools.go"
  # Best effort: tidy fills go.sum; the `go get` below is what must succeed.
  (cd "$work/kube" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1) || true
  (cd "$work/kube" && GOFLAGS=-mod=mod go get k8s.io/kubernetes@"$KUBERNETES_VERSION" >/dev/null)

  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  log "building ${pkgs[*]#cmd/} $KUBERNETES_VERSION in one go build (about 6 minutes cold on 2 cores)"
  start=$SECONDS
  local args=()
  for b in "${pkgs[@]}"; do args+=("k8s.io/kubernetes/$b"); done
  (cd "$work/kube" && GOFLAGS=-mod=mod nice -n 10 go build -ldflags "$ldflags" -o "$BIN/" "${args[@]}") &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20
    kill -0 "$pid" 2>/dev/null && log "  still building Kubernetes ($((SECONDS - start)) s; $(find "$BIN" -maxdepth 1 -name 'kube*' -newer "$work/kube/go.mod" | wc -l) of 6 linked)"
  done
  wait "$pid" || die "go build of the Kubernetes components failed"
  log "built the Kubernetes components in $((SECONDS - start)) s"

  if [[ -x "$root/bin/k8s/etcd" ]] && "$root/bin/k8s/etcd" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}"; then
    cp "$root/bin/k8s/etcd" "$BIN/etcd"
    log "etcd $ETCD_VERSION copied from bin/k8s"
  else
    log "building etcd $ETCD_VERSION"
    start=$SECONDS
    mkdir -p "$work/etcd"
    printf 'module ferrofed.local/etcd\ngo 1.26\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$work/etcd/go.mod"
    (cd "$work/etcd" && GOFLAGS=-mod=mod go get go.etcd.io/etcd/server/v3@"$ETCD_VERSION" >/dev/null 2>&1 &&
      GOFLAGS=-mod=mod nice -n 10 go build -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
    log "built etcd in $((SECONDS - start)) s"
  fi

  build_tools
  echo "$want" >"$stamp"
  log "build done in $((SECONDS - total_start)) s: $("$BIN/kubelet" --version)"
}

# build_tools builds the pause program and the image tool (small, seconds).
build_tools() {
  (cd "$root" && CGO_ENABLED=0 go build -ldflags "-s -w" -o "$BIN/pause" ./hack/cluster/pause)
  (cd "$root/hack/image" && CGO_ENABLED=0 go build -o "$BIN/image" .)
}

# build_storage builds the volume provisioner from its Go module (`go install` of the
# tagged module: its own go.mod, so its client-go never meets the project's) and takes
# the static busybox its helper pods run from Debian's busybox-static package (downloaded
# and unpacked, not installed). Both are cached in BIN behind a stamp.
build_storage() {
  local stamp="$BIN/.local-path-version" start=$SECONDS
  mkdir -p "$BIN"
  if [[ -x "$BIN/local-path-provisioner" && -f "$stamp" && "$(cat "$stamp")" == "$LOCAL_PATH_VERSION" ]]; then
    log "local-path-provisioner $LOCAL_PATH_VERSION cached in $BIN"
  else
    log "building github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"
    (cd "$BIN" && env -u GOFLAGS GOBIN="$BIN" CGO_ENABLED=0 nice -n 10 \
      go install -ldflags "-s -w" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION") ||
      die "go install of the local-path-provisioner $LOCAL_PATH_VERSION failed"
    echo "$LOCAL_PATH_VERSION" >"$stamp"
    log "built local-path-provisioner in $((SECONDS - start)) s"
  fi
  if [[ ! -x "$BIN/busybox" ]] || ! "$BIN/busybox" true 2>/dev/null; then
    local work
    work="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    log "taking a static busybox from Debian's busybox-static (downloaded, not installed)"
    if ! (cd "$work" && apt-get download busybox-static >/dev/null 2>&1); then
      apt-get update -qq
      (cd "$work" && apt-get download busybox-static >/dev/null 2>&1) || die "apt-get download busybox-static failed"
    fi
    dpkg-deb -x "$work"/busybox-static_*.deb "$work/root"
    install -m 0755 "$work/root/bin/busybox" "$BIN/busybox"
    # The helper image holds only /bin/sh: busybox's shell runs its own applets (mkdir,
    # rm) without them on PATH, as the provisioner's setup and teardown scripts need.
    env -i "$BIN/busybox" sh -c "mkdir -m 0777 -p '$work/probe/x' && rm -rf '$work/probe'" && [[ ! -e "$work/probe" ]] ||
      die "the busybox from busybox-static does not run mkdir and rm from its shell without them on PATH"
  fi
}

# ---------------------------------------------------------------------------- host state

save_host() {
  mkdir -p "$WORK/saved"
  if [[ ! -f "$WORK/saved/sysctl" ]]; then
    local s v
    : >"$WORK/saved/sysctl.tmp"
    for s in "${SYSCTLS[@]}"; do
      v="$(sysctl -n "$s" 2>/dev/null)" || continue
      printf '%s=%s\n' "$s" "$v" >>"$WORK/saved/sysctl.tmp"
    done
    mv "$WORK/saved/sysctl.tmp" "$WORK/saved/sysctl"
  fi
  if [[ ! -f "$WORK/saved/paths" ]]; then
    local p
    for p in "${HOST_PATHS[@]}"; do [[ -e "$p" ]] || echo "$p"; done >"$WORK/saved/paths"
  fi
  [[ -f "$WORK/saved/snapshot" ]] || host_snapshot >"$WORK/saved/snapshot"
}

# host_snapshot lists what `down` must restore, to compare before and after.
host_snapshot() {
  local s
  for s in "${SYSCTLS[@]}"; do printf 'sysctl %s=%s\n' "$s" "$(sysctl -n "$s" 2>/dev/null || echo -)"; done
  local t
  for t in filter nat mangle raw; do
    iptables -t "$t" -S 2>/dev/null | sed "s/^/iptables $t /"
    ip6tables -t "$t" -S 2>/dev/null | sed "s/^/ip6tables $t /"
  done
  ip -o link show | awk -F': ' '{print "link " $2}' | sed 's/@.*//' | sort
  findmnt -rn -o TARGET | grep -F "$WORK" | sed 's/^/mount /' || true
  local c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do [[ -d "$c" ]] && echo "cgroup $c"; done
  for c in "${HOST_PATHS[@]}"; do [[ -e "$c" ]] && echo "path $c"; done
  true
}

# refuse_foreign_cluster stops `up` on a machine where another Kubernetes already
# runs: `down` removes every KUBE-* and CNI-* iptables chain and the cni0 bridge, which
# would break it. Only checked before this script changed anything (no saved state).
refuse_foreign_cluster() {
  local why
  why="$(foreign_cluster)"
  [[ -z "$why" ]] && return 0
  die "another Kubernetes or CNI seems to run here ($why); \"down\" would remove its rules. CLUSTER_FORCE=1 overrides"
}

# foreign_cluster prints why another Kubernetes or CNI seems to run here, or nothing.
foreign_cluster() {
  [[ -f "$WORK/saved/snapshot" || "${CLUSTER_FORCE:-}" == 1 ]] && return 0
  local why=""
  iptables -S 2>/dev/null | grep -q '^-N KUBE-' && why="iptables chains KUBE-* exist"
  iptables -t nat -S 2>/dev/null | grep -q '^-N \(KUBE\|CNI\)-' && why="nat chains KUBE-*/CNI-* exist"
  ip link show "$BRIDGE" >/dev/null 2>&1 && why="the bridge $BRIDGE exists"
  echo "$why"
}

# preflight says, in one line and without changing anything, whether `up` can start a
# node here (exit 0) or why not (exit 1): `make demo` picks the real node with it.
preflight() {
  local why=""
  if status_quiet 2>/dev/null; then
    echo "the local cluster is already up ($KUBECONFIG_PATH)"
    return 0
  fi
  if [[ $EUID -ne 0 ]]; then
    why="not root (kubelet, containerd and the iptables rules need root)"
  elif [[ "$(uname -s)" != Linux ]]; then
    why="not Linux"
  elif ! command -v go >/dev/null; then
    why="no go on PATH (the node components are built from Go modules)"
  elif [[ ! -w /proc/sys/net/ipv4/ip_forward ]]; then
    why="/proc/sys/net/ipv4/ip_forward is not writable (a container without the network admin capability?)"
  elif ! ls /sys/fs/cgroup/ >/dev/null 2>&1 || [[ -z "$(ls /sys/fs/cgroup/ 2>/dev/null)" ]]; then
    why="no cgroup file system at /sys/fs/cgroup"
  elif command -v iptables >/dev/null && ! iptables -S >/dev/null 2>&1; then
    why="iptables -S fails here (no netfilter access)"
  elif ! command -v containerd >/dev/null && ! command -v apt-get >/dev/null; then
    why="no containerd, and no apt-get to install it"
  else
    why="$(foreign_cluster)"
    [[ -n "$why" ]] && why="another Kubernetes or CNI seems to run here ($why)"
  fi
  if [[ -n "$why" ]]; then
    echo "$why"
    return 1
  fi
  local built="built in $BIN"
  [[ -f "$BIN/.versions" && "$(cat "$BIN/.versions")" == "kubernetes=$KUBERNETES_VERSION etcd=$ETCD_VERSION" ]] ||
    built="not built yet: the first run builds them (about 6 minutes cold)"
  echo "root, Linux, netfilter and cgroups available; node components $built"
}

setup_network() {
  sysctl -qw net.ipv4.ip_forward=1
  # Pod -> ClusterIP -> pod on the same bridge needs bridged replies to pass iptables.
  sysctl -qw net.bridge.bridge-nf-call-iptables=1
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Keep pods on this machine: pod traffic may leave only back into the bridge.
  iptables -N FERROFED-CLUSTER 2>/dev/null || iptables -F FERROFED-CLUSTER
  iptables -A FERROFED-CLUSTER -i "$BRIDGE" ! -o "$BRIDGE" -m comment --comment "ferrofed local cluster: pods stay on this machine" -j DROP
  iptables -C FORWARD -j FERROFED-CLUSTER 2>/dev/null || iptables -I FORWARD 1 -j FERROFED-CLUSTER
  # Keep this machine's own connections to ClusterIPs here too. The filter table sees a
  # packet after kube-proxy's DNAT, so a destination still in the service range is one
  # kube-proxy has no rule for (yet, or any more): refused, as a Service without
  # endpoints is. Without this it takes the default route off the machine, where an
  # egress proxy may answer it (a sandbox's answered "404, server: keryx" to ClusterIP
  # requests while a Service's rules were being rewritten).
  iptables -N FERROFED-SERVICES 2>/dev/null || iptables -F FERROFED-SERVICES
  iptables -A FERROFED-SERVICES -d "$SERVICE_CIDR" -p tcp -m comment --comment "ferrofed local cluster: no ClusterIP traffic leaves this machine" -j REJECT --reject-with tcp-reset
  iptables -A FERROFED-SERVICES -d "$SERVICE_CIDR" -m comment --comment "ferrofed local cluster: no ClusterIP traffic leaves this machine" -j REJECT
  iptables -C OUTPUT -j FERROFED-SERVICES 2>/dev/null || iptables -A OUTPUT -j FERROFED-SERVICES
}

# ---------------------------------------------------------------------------- certificates

# cert NAME CN [O] [SANS]: a key and a certificate signed by the cluster CA.
cert() {
  local name=$1 cn=$2 org=${3:-} sans=${4:-} pki="$WORK/pki" subj usage=clientAuth
  subj="/CN=$cn"
  [[ -n "$org" ]] && subj="/O=$org$subj"
  [[ -n "$sans" ]] && usage="serverAuth,clientAuth"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$pki/$name.key" -out "$pki/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -n "$sans" ]] && echo "subjectAltName=$sans"
  } >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

kubeconfig() { # kubeconfig FILE CERTNAME
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ferrofed-local
  cluster:
    certificate-authority: $WORK/pki/ca.crt
    server: https://$NODE_IP:$API_PORT
users:
- name: $2
  user:
    client-certificate: $WORK/pki/$2.crt
    client-key: $WORK/pki/$2.key
contexts:
- name: ferrofed-local
  context: {cluster: ferrofed-local, user: $2}
current-context: ferrofed-local
EOF
}

make_pki() {
  local pki="$WORK/pki"
  [[ -f "$pki/done" ]] && return 0
  mkdir -p "$pki"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj "/CN=ferrofed-local-ca" -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" "IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin ferrofed-admin system:masters
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert kube-proxy system:kube-proxy
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
  kubeconfig "$KUBECONFIG_PATH" admin
  local c
  for c in controller-manager scheduler kubelet kube-proxy; do kubeconfig "$WORK/$c.kubeconfig" "$c"; done
  touch "$pki/done"
}

# ---------------------------------------------------------------------------- configs

write_configs() {
  mkdir -p "$WORK/containerd" "$WORK/cni/net.d" "$WORK/logs/pods"
  cat >"$WORK/containerd/config.toml" <<EOF
version = 2
root = "$WORK/containerd/root"
state = "$WORK/containerd/state"
[grpc]
  address = "$CTR_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$WORK/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj would make runc fail.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$WORK/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$WORK/cni/net.d"
EOF
  cat >"$WORK/cni/net.d/10-ferrofed.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "ferrofed",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$WORK/cni/ipam",
               "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
               "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$WORK/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
healthzBindAddress: 127.0.0.1
containerRuntimeEndpoint: unix://$CTR_SOCK
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: $WORK/pki/ca.crt}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
podLogsDir: $WORK/logs/pods
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
maxPods: 60
EOF
}

# ---------------------------------------------------------------------------- processes

pidfile() { echo "$WORK/run/$1.pid"; }

running() { # running NAME: the pid file names a live process of that binary
  local pf pid
  pf="$(pidfile "$1")"
  [[ -f "$pf" ]] || return 1
  pid="$(cat "$pf")"
  [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == *"/$1"* ]]
}

start() { # start NAME BINARY ARGS...
  local name=$1 bin=$2
  shift 2
  mkdir -p "$WORK/run" "$WORK/logs"
  if running "$name"; then
    log "$name already running (pid $(cat "$(pidfile "$name")"))"
    return 0
  fi
  setsid "$bin" "$@" >"$WORK/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
  log "started $name (pid $!, log $WORK/logs/$name.log)"
}

stop() { # stop NAME: SIGTERM, then SIGKILL after 15 s
  local name=$1 pid
  running "$name" || { rm -f "$(pidfile "$name")"; return 0; }
  pid="$(cat "$(pidfile "$name")")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 150); do
    [[ -d "/proc/$pid" ]] || break
    sleep 0.1
  done
  if [[ -d "/proc/$pid" ]]; then
    log "$name did not stop in 15 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$(pidfile "$name")"
  log "stopped $name"
}

wait_for() { # wait_for WHAT SECONDS COMMAND...: poll until COMMAND succeeds
  local what=$1 secs=$2
  shift 2
  for _ in $(seq 1 $((secs * 2))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "$what not ready in $secs s; see $WORK/logs/"
}

# ---------------------------------------------------------------------------- images

import_image() { # import_image TARBALL
  ctr_ images import "$1" >/dev/null
}

build_pause_image() {
  "$BIN/image" -tag "$PAUSE_IMAGE" -o "$BIN/pause.tar" -file /pause="$BIN/pause" -entrypoint /pause -user 65535 >/dev/null
  import_image "$BIN/pause.tar"
}

# images builds the project's images from its binaries (CGO off, static) and imports
# them: ferrofed itself, and the FHIR member test server (test/doubles/members) once it exists.
# ferrofed lies on the image's PATH, as in the shipped image (examples/Dockerfile): the
# exec probes of a mutual-TLS Gateway run `ferrofed healthcheck`.
# Each is tried even when the other fails; the exit status says whether both worked.
images() {
  local out="$BIN/images" start=$SECONDS failed=0
  mkdir -p "$out"
  [[ -x "$BIN/image" ]] || build_tools
  log "building ferrofed (CGO_ENABLED=0) and its image $FERROFED_IMAGE"
  if (cd "$root" && CGO_ENABLED=0 nice -n 10 go build -ldflags "-s -w -X main.version=e2e" -o "$out/ferrofed" github.com/ferrofed/ferrofed) &&
    "$BIN/image" -tag "$FERROFED_IMAGE" -o "$out/ferrofed.tar" -file /usr/local/bin/ferrofed="$out/ferrofed" \
      -entrypoint /usr/local/bin/ferrofed -env PATH=/usr/local/bin -user 65532:65532 -dir /tmp >/dev/null &&
    import_image "$out/ferrofed.tar"; then
    log "imported $FERROFED_IMAGE"
  else
    log "error: the ferrofed image was not built"
    failed=1
  fi
  local member_pkg=""
  if [[ -d "$root/test/doubles/members" ]]; then
    member_pkg="$(cd "$root" && go list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./test/doubles/members/... 2>/dev/null | head -1)"
  fi
  if [[ -z "$member_pkg" ]]; then
    log "no main package under test/doubles/members: member image skipped"
  elif (cd "$root" && CGO_ENABLED=0 nice -n 10 go build -ldflags "-s -w" -o "$out/fhir-member" "$member_pkg") &&
    "$BIN/image" -tag "$MEMBER_IMAGE" -o "$out/fhir-member.tar" -file /fhir-member="$out/fhir-member" \
      -entrypoint /fhir-member -user 65532:65532 -dir /tmp >/dev/null &&
    import_image "$out/fhir-member.tar"; then
    log "imported $MEMBER_IMAGE ($member_pkg)"
  else
    log "error: the member image was not built"
    failed=1
  fi
  # The audit record repository double (test/doubles/auditrepo) with its control API.
  if (cd "$root" && CGO_ENABLED=0 nice -n 10 go build -ldflags "-s -w" -o "$out/audit-repo" ./test/doubles/auditrepo/cmd/auditrepo) &&
    "$BIN/image" -tag "$AUDIT_REPO_IMAGE" -o "$out/audit-repo.tar" -file /audit-repo="$out/audit-repo" \
      -entrypoint /audit-repo -user 65532:65532 -dir /tmp >/dev/null &&
    import_image "$out/audit-repo.tar"; then
    log "imported $AUDIT_REPO_IMAGE"
  else
    log "error: the audit repository image was not built"
    failed=1
  fi
  # The PMIR Patient Identity Registry double (test/doubles/identityregistry) with its control API.
  if (cd "$root" && CGO_ENABLED=0 nice -n 10 go build -ldflags "-s -w" -o "$out/pmir" ./test/doubles/identityregistry/cmd/pmir) &&
    "$BIN/image" -tag "$PMIR_IMAGE" -o "$out/pmir.tar" -file /pmir="$out/pmir" \
      -entrypoint /pmir -user 65532:65532 -dir /tmp >/dev/null &&
    import_image "$out/pmir.tar"; then
    log "imported $PMIR_IMAGE"
  else
    log "error: the PMIR registry image was not built"
    failed=1
  fi
  log "images done in $((SECONDS - start)) s; in containerd: $(ctr_ images ls -q | grep '^ferrofed.local' | tr '\n' ' ')"
  return $failed
}

# ---------------------------------------------------------------------------- volumes

# storage installs the volume provisioner: its two images, then its namespace, RBAC,
# ConfigMap (volumes as folders under LOCAL_PATH_DIR, created 0777 by the setup script
# and removed by the teardown script, both run by helper pods), Deployment and the
# default StorageClass STORAGE_CLASS (WaitForFirstConsumer, reclaim Delete); it waits
# until the provisioner runs. Idempotent (kubectl apply).
storage() {
  local start=$SECONDS out="$BIN/images"
  mkdir -p "$out" "$LOCAL_PATH_DIR"
  [[ -x "$BIN/local-path-provisioner" && -x "$BIN/busybox" ]] || build_storage
  [[ -x "$BIN/image" ]] || build_tools
  "$BIN/image" -tag "$LOCAL_PATH_IMAGE" -o "$out/local-path-provisioner.tar" \
    -file /usr/local/bin/local-path-provisioner="$BIN/local-path-provisioner" \
    -entrypoint /usr/local/bin/local-path-provisioner -user 65532:65532 -dir /tmp >/dev/null
  import_image "$out/local-path-provisioner.tar"
  # Root (no -user): the helper makes and removes folders in a root-owned host folder.
  "$BIN/image" -tag "$HELPER_IMAGE" -o "$out/busybox.tar" -file /bin/sh="$BIN/busybox" \
    -entrypoint /bin/sh -dir /tmp >/dev/null
  import_image "$out/busybox.tar"
  kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $LOCAL_PATH_NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner, namespace: $LOCAL_PATH_NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: local-path-provisioner, namespace: $LOCAL_PATH_NS}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: local-path-provisioner}
rules:
- apiGroups: [""]
  resources: [nodes, persistentvolumeclaims, configmaps, pods, pods/log]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: local-path-provisioner, namespace: $LOCAL_PATH_NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: local-path-provisioner}
subjects: [{kind: ServiceAccount, name: local-path-provisioner, namespace: $LOCAL_PATH_NS}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: local-path-provisioner}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: local-path-provisioner}
subjects: [{kind: ServiceAccount, name: local-path-provisioner, namespace: $LOCAL_PATH_NS}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: $LOCAL_PATH_NS}
data:
  config.json: |-
    {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$LOCAL_PATH_DIR"]}],
     "cmdTimeoutSeconds": 60}
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      terminationGracePeriodSeconds: 1
      tolerations:
      - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
      containers:
      - name: helper-pod
        image: $HELPER_IMAGE
        imagePullPolicy: Never
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: local-path-provisioner, namespace: $LOCAL_PATH_NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: local-path-provisioner}}
  template:
    metadata: {labels: {app: local-path-provisioner}}
    spec:
      serviceAccountName: local-path-provisioner
      terminationGracePeriodSeconds: 2
      containers:
      - name: local-path-provisioner
        image: $LOCAL_PATH_IMAGE
        imagePullPolicy: Never
        args: [start, --config, /etc/config/config.json, --provisioner-name, rancher.io/local-path,
               --namespace, $LOCAL_PATH_NS, --configmap-name, local-path-config,
               --service-account-name, local-path-provisioner, --helper-image, $HELPER_IMAGE]
        env:
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: CONFIG_MOUNT_PATH, value: /etc/config/}
        volumeMounts: [{name: config, mountPath: /etc/config/}]
        resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 128Mi}}
      volumes:
      - {name: config, configMap: {name: local-path-config}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
YAML
  kc -n "$LOCAL_PATH_NS" rollout status deployment/local-path-provisioner --timeout=90s >/dev/null ||
    die "the local-path-provisioner did not start; kubectl -n $LOCAL_PATH_NS logs deployment/local-path-provisioner"
  log "volume provisioner local-path-provisioner $LOCAL_PATH_VERSION running: StorageClass $STORAGE_CLASS (default) in $LOCAL_PATH_DIR, $((SECONDS - start)) s"
}

# ---------------------------------------------------------------------------- up

up() {
  need_root
  local t0=$SECONDS
  install_deps
  build
  build_tools
  [[ "${CLUSTER_SKIP_STORAGE:-}" == 1 ]] || build_storage
  if status_quiet; then
    log "already up"
    status
    return 0
  fi
  if [[ -d "$WORK/run" ]] && ls "$WORK/run"/*.pid >/dev/null 2>&1; then
    log "a partial cluster is left from an earlier run: taking it down first"
    down
  fi
  local t1=$SECONDS
  trap 'log "up failed: component logs in $WORK/logs; run \"$0 down\" to clean up"' ERR
  [[ -d "$WORK/logs" ]] && rm -rf "$WORK/logs.prev" && mv "$WORK/logs" "$WORK/logs.prev"
  mkdir -p "$WORK/run" "$WORK/logs"
  refuse_foreign_cluster
  save_host
  setup_network
  make_pki
  write_configs

  start etcd "$BIN/etcd" --name=ferrofed --data-dir="$WORK/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="ferrofed=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls="" \
    --unsafe-no-fsync=true --quota-backend-bytes=2147483648
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

  local pki="$WORK/pki"
  start kube-apiserver "$BIN/kube-apiserver" --bind-address="$NODE_IP" --advertise-address="$NODE_IP" \
    --secure-port="$API_PORT" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
    --client-ca-file="$pki/ca.crt" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --profiling=false --event-ttl=30m
  wait_for kube-apiserver 90 "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" get --raw /readyz

  start containerd /usr/bin/containerd --config "$WORK/containerd/config.toml"
  wait_for containerd 30 ctr --address "$CTR_SOCK" version
  build_pause_image

  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$WORK/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$WORK/controller-manager.kubeconfig" --authorization-kubeconfig="$WORK/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --cluster-cidr="$POD_CIDR" --allocate-node-cidrs=false \
    --profiling=false
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$WORK/scheduler.kubeconfig" \
    --authentication-kubeconfig="$WORK/scheduler.kubeconfig" --authorization-kubeconfig="$WORK/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false

  local t_kubelet=$SECONDS
  start kubelet "$BIN/kubelet" --config="$WORK/kubelet.yaml" --kubeconfig="$WORK/kubelet.kubeconfig" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --root-dir="$WORK/kubelet" --cert-dir="$WORK/kubelet/pki"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig="$WORK/kube-proxy.kubeconfig" --proxy-mode=iptables \
    --cluster-cidr="$POD_CIDR" --hostname-override="$NODE_NAME" --nodeport-addresses="$NODE_IP/32" \
    --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
    --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256 --profiling=false

  log "waiting for node $NODE_NAME to be Ready"
  wait_for "node $NODE_NAME" 120 kc get node "$NODE_NAME"
  kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=120s >/dev/null || die "node $NODE_NAME not Ready; see $WORK/logs/kubelet.log"
  log "node Ready $((SECONDS - t_kubelet)) s after kubelet started"
  wait_for "default ServiceAccount" 60 kc -n default get serviceaccount default
  local t_ready=$SECONDS
  # The volume provisioner (CLUSTER_SKIP_STORAGE=1: none, and no StorageClass).
  [[ "${CLUSTER_SKIP_STORAGE:-}" == 1 ]] || storage
  local t_storage=$SECONDS

  if [[ "${CLUSTER_SKIP_IMAGES:-}" != 1 ]]; then
    # A separate process, so `set -e` holds inside (it does not in an `||` list).
    bash "$0" images || log "warning: building the project's images failed; fix the tree and run \"$0 images\""
  fi
  trap - ERR
  log "cluster up: started in $((t_ready - t1)) s, volume provisioner $((t_storage - t_ready)) s (whole command $((SECONDS - t0)) s)"
  echo "$((t_ready - t1))" >"$WORK/run/startup-seconds"
  status
}

status_quiet() {
  local c
  for c in "${COMPONENTS[@]}"; do running "$c" || return 1; done
  kc get --raw /readyz >/dev/null 2>&1
}

status() {
  local c state=0
  for c in "${COMPONENTS[@]}"; do
    if running "$c"; then
      printf '  %-24s running (pid %s)\n' "$c" "$(cat "$(pidfile "$c")")"
    else
      printf '  %-24s stopped\n' "$c"
      state=1
    fi
  done
  if [[ $state -eq 0 ]]; then
    kc get nodes -o wide 2>/dev/null | sed 's/^/  /' || true
    echo "KUBECONFIG=$KUBECONFIG_PATH"
    echo "export KUBECONFIG=$KUBECONFIG_PATH"
  fi
  return $state
}

# ---------------------------------------------------------------------------- down

# remove_chains IPTABLES: drop rules in built-in chains that jump to KUBE-*, CNI-* or
# FERROFED-* chains, then flush and delete those chains, in every table.
remove_chains() {
  local ipt=$1 t rule chain
  for t in filter nat mangle raw; do
    "$ipt" -t "$t" -S >/dev/null 2>&1 || continue
    "$ipt" -t "$t" -S | grep -E '^-A [A-Z]+ .*-j (KUBE-|CNI-|FERROFED-)' | grep -Ev '^-A (KUBE-|CNI-|FERROFED-)' |
      while read -r rule; do
        # shellcheck disable=SC2086
        eval "$ipt -t $t ${rule/-A/-D}" 2>/dev/null || true
      done
    for chain in $("$ipt" -t "$t" -S | awk '/^-N (KUBE-|CNI-|FERROFED-)/ {print $2}'); do
      "$ipt" -t "$t" -F "$chain" 2>/dev/null || true
    done
    for chain in $("$ipt" -t "$t" -S | awk '/^-N (KUBE-|CNI-|FERROFED-)/ {print $2}'); do
      "$ipt" -t "$t" -X "$chain" 2>/dev/null || true
    done
  done
}

# shims_of_ours: containerd-shim processes started by our containerd (matched by our
# socket path on their command line), so nothing else's shims are touched.
shims_of_ours() {
  local p
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/exe" 2>/dev/null)" == *containerd-shim* ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$CTR_SOCK" && echo "${p#/proc/}"
  done
  true
}

down() {
  need_root
  local t0=$SECONDS
  [[ -d "$WORK" ]] || { log "nothing to take down ($WORK absent)"; return 0; }
  set +e
  # 1. Pods go while kubelet runs, so volumes are unmounted and CNI DEL runs. With the
  #    controllers stopped first, nothing recreates them.
  stop kube-controller-manager
  stop kube-scheduler
  if running kubelet && running kube-apiserver && running containerd; then
    log "deleting every pod while kubelet runs"
    timeout 90 "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" delete pods --all -A --grace-period=3 --timeout=80s >/dev/null 2>&1
    timeout 20 "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" delete pods --all -A --grace-period=0 --force >/dev/null 2>&1
    for _ in $(seq 1 40); do
      [[ -z "$(ctr_ tasks ls -q 2>/dev/null)" ]] && break
      sleep 0.5
    done
  fi
  stop kube-proxy
  stop kubelet
  # 2. Leftover tasks (if kubelet was already gone) are killed; then containerd stops.
  if running containerd; then
    local task
    for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$task" >/dev/null 2>&1; done
    sleep 1
  fi
  stop containerd
  local shim
  for shim in $(shims_of_ours); do kill -KILL "$shim" 2>/dev/null; done
  stop kube-apiserver
  stop etcd
  # 3. Network: veths on the bridge, the bridge, the iptables chains, conntrack entries;
  #    only when `up` got as far as changing the host (it saved its state first), so a
  #    `down` on a machine this script never set up touches nothing of anyone else's.
  if [[ ! -f "$WORK/saved/snapshot" ]]; then
    log "no saved host state in $WORK/saved: network, cgroups and sysctls left as they are"
  else
    local veth
    for veth in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'); do
      ip link del "$veth" 2>/dev/null
    done
    ip link del "$BRIDGE" 2>/dev/null
    remove_chains iptables
    remove_chains ip6tables
    nft delete table ip kube-proxy 2>/dev/null
    nft delete table ip6 kube-proxy 2>/dev/null
    conntrack -D -s "$POD_CIDR" >/dev/null 2>&1
    conntrack -D -d "$POD_CIDR" >/dev/null 2>&1
    conntrack -D -d "$SERVICE_CIDR" >/dev/null 2>&1
  fi
  # 4. Every mount under WORK, deepest first (kubelet bind-mounts its root dir onto itself).
  local m
  for _ in 1 2 3; do
    for m in $(findmnt -rn -o TARGET | grep -F "$WORK" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
  done
  # 4b. The provisioner's volumes: folders under LOCAL_PATH_DIR whose claims were not
  #     deleted before `down` (their teardown helper pods would have removed them).
  if [[ -d "$LOCAL_PATH_DIR" ]]; then
    local vols
    vols="$(find "$LOCAL_PATH_DIR" -mindepth 1 -maxdepth 1 | wc -l)"
    [[ "$vols" -gt 0 ]] && log "removing $vols volume folder(s) of the local-path provisioner left in $LOCAL_PATH_DIR"
    rm -rf --one-file-system "$LOCAL_PATH_DIR"
  fi
  # 5. Cgroups kubelet made (cgroupfs driver), deepest first.
  if [[ -f "$WORK/saved/snapshot" ]]; then
    local c
    for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
      [[ -d "$c" ]] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  fi
  # 6. Sysctls and host paths.
  if [[ -f "$WORK/saved/sysctl" ]]; then
    local kv
    while read -r kv; do sysctl -qw "$kv" 2>/dev/null || log "warning: could not restore $kv"; done <"$WORK/saved/sysctl"
  fi
  if [[ -f "$WORK/saved/paths" ]]; then
    local p
    while read -r p; do
      [[ -n "$p" && -e "$p" ]] || continue
      if [[ "$p" == /var/log/containers ]]; then find "$p" -maxdepth 1 -type l -delete 2>/dev/null; fi
      rm -rf "$p"
    done <"$WORK/saved/paths"
  fi
  # 7. Compare with the snapshot taken before `up` changed anything.
  if [[ -f "$WORK/saved/snapshot" ]]; then
    local diffs
    diffs="$(diff <(sort "$WORK/saved/snapshot") <(host_snapshot | sort) | grep '^[<>]')"
    if [[ -n "$diffs" ]]; then
      log "warning: the host differs from before \"up\" (< before, > now):"
      printf "    %s\n" "${diffs//$'\n'/$'\n    '}" >&2
    else
      log "host restored: sysctls, iptables, links, mounts, cgroups and paths as before \"up\""
    fi
  fi
  # 8. The state, keeping the logs.
  local left
  left="$(findmnt -rn -o TARGET | grep -cF "$WORK")"
  if [[ "$left" -eq 0 ]]; then
    find "$WORK" -mindepth 1 -maxdepth 1 ! -name logs ! -name logs.prev -exec rm -rf {} +
  else
    log "warning: $left mounts remain under $WORK; state kept"
  fi
  set -e
  log "down in $((SECONDS - t0)) s"
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
build) build && build_storage ;;
storage) need_root; storage ;;
images) need_root; images ;;
preflight) preflight ;;
kubeconfig) echo "$KUBECONFIG_PATH" ;;
*)
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
