#!/usr/bin/env bash
# Regenerates every generated file. Each generator appends itself here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Operator (issue 3): deepcopy, the Gateway CRD, the operator's RBAC from its markers
# and the webhook configuration, then the golden files of the controllers' builders.
go tool controller-gen object paths=./api/...
go tool controller-gen \
  crd rbac:roleName=ferrofed-operator webhook \
  paths=./api/... paths=./controllers/... paths=./internal/webhook/... \
  output:crd:artifacts:config=config/crd/bases \
  output:rbac:artifacts:config=config/rbac \
  output:webhook:artifacts:config=config/webhook
go test ./controllers/... ./cmd/kubectl-ferrofed/ -run 'Golden' -count=1 -update >/dev/null

# Chart (issue 4): the CRDs, the operator's ClusterRole rules and its webhooks copied
# into charts/ferrofed from the files above, then the chart's golden files.
hack/generate-chart.sh
