#!/usr/bin/env bash
# Release check: every compose file's stop_grace_period outlasts its gateway's drain.
#
#   hack/checks/release-compose.sh [PATH...]    (default: examples/compose, the quickstart)
#
# For each service that mounts a ferrofed.toml (the file its --config names, else its one
# mounted *.toml), it reads server.drain_delay_ms, server.shutdown_timeout_ms and
# server.bindings_drain_timeout_ms from that file and the service's stop_grace_period.
# It copies no default from the code: a file that leaves one of them out fails. Exits 1,
# naming the file and the values, when stop_grace_period does not outlast
# delay + shutdown + bindings.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ $# -eq 0 ]]; then cd "$root"; set -- examples/compose; fi
# shellcheck source=hack/checks/gracecheck.sh
source "$root/hack/checks/gracecheck.sh"
gracecheck compose "$@"
