#!/usr/bin/env bash
# Release check: every Kubernetes example's grace period outlasts its gateway's drain.
#
#   hack/checks/kubernetes-example.sh [PATH...]    (default: examples/kubernetes)
#
# For each Gateway resource it reads spec.lifecycle.{drainDelay, shutdownTimeout,
# bindingsDrainTimeout} and the grace period (terminationGracePeriodSeconds, or the one
# the operator derives with the example's terminationHeadroom); for each Deployment
# running `ferrofed serve` it reads server.drain_delay_ms, server.shutdown_timeout_ms and
# server.bindings_drain_timeout_ms from the ferrofed.toml in the ConfigMap mounted at
# --config, and the pod's terminationGracePeriodSeconds. It copies no default from the
# code: an example that leaves one of them out fails. Exits 1, naming the file and the
# values, when a grace period does not outlast delay + shutdown + bindings.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ $# -eq 0 ]]; then cd "$root"; set -- examples/kubernetes; fi
# shellcheck source=hack/checks/gracecheck.sh
source "$root/hack/checks/gracecheck.sh"
gracecheck kubernetes "$@"
