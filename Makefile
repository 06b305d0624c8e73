# ferrofed: federation gateway for clinical data, and its Kubernetes operator.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     ?= bin
GO      ?= go
# The local control plane (kube-apiserver, etcd, kubectl built from Go modules); the
# first run builds it (about 6 minutes), later runs reuse bin/k8s.
CONTROLPLANE = $(shell hack/controlplane.sh)

##@ General

.PHONY: help
help: ## Show every target and what it does.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build the ferrofed binary into bin/ferrofed.
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ferrofed .

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-ferrofed (kubectl ferrofed, once bin/ is on the PATH).
	$(GO) build -o $(BIN)/kubectl-ferrofed ./cmd/kubectl-ferrofed

.PHONY: generate
generate: ## Regenerate every generated file (CRDs, deepcopy, chart CRDs, golden files).
	hack/generate.sh

.PHONY: verify
verify: ## Fail when generated files drift from their sources, or code is not gofmt'ed, vetted or lint-clean.
	hack/verify.sh

# The linters: golangci-lint (.golangci.yml) with the Kubernetes API linter
# (sigs.k8s.io/kube-api-linter, on api/ only) compiled in as a golangci-lint module
# plugin, both pinned in .custom-gcl.yml. `golangci-lint custom` would build that binary
# from a git clone, which cannot be made here, so hack/tools.sh builds the same thing
# from the Go module proxy into bin/ (once; about 3 minutes cold on 2 cores).
GOLANGCI_LINT = $(BIN)/golangci-lint-kube-api-linter

.PHONY: lint
lint: ## Run golangci-lint and the Kubernetes API linter (api/) on every package; builds them once.
	@hack/tools.sh golangci-lint >/dev/null
	$(GOLANGCI_LINT) run ./...

.PHONY: controlplane
controlplane: ## Build (once) kube-apiserver, etcd and kubectl from Go modules into bin/k8s.
	@hack/controlplane.sh >/dev/null

##@ Testing

.PHONY: test
test: ## Run every test (needs the local control plane, helm and otelcol; builds them on first use).
	@hack/tools.sh helm otelcol >/dev/null
	KUBEBUILDER_ASSETS="$(CONTROLPLANE)" $(GO) test -count=1 ./...

# BENCHTIME is each benchmark's run: the paired audit benchmark needs slices of some
# size to be more than noise (its figures in the README are from 3s runs).
BENCHTIME ?= 3s

.PHONY: bench
bench: ## Run the benchmarks that back the figures in the issues (BENCHTIME=3s each).
	KUBEBUILDER_ASSETS="$(CONTROLPLANE)" $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count=1 ./...

##@ End-to-end

# The kubeconfig hack/local-cluster.sh writes; `make e2e` uses it when KUBECONFIG is unset.
LOCAL_KUBECONFIG ?= /var/lib/ferrofed-cluster/kubeconfig
E2E_TIMEOUT      ?= 40m

.PHONY: cluster-up
cluster-up: ## Start a real single-node Kubernetes here (root; builds it once, ~6 min cold).
	hack/local-cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and restore every host setting it changed (root).
	hack/local-cluster.sh down

.PHONY: e2e
e2e: ## Run test/e2e (tag e2e) on the cluster KUBECONFIG names, else the local one (then the real-node demo too).
	@kc="$${KUBECONFIG:-}"; \
	if [ -z "$$kc" ] && [ -f "$(LOCAL_KUBECONFIG)" ]; then kc="$(LOCAL_KUBECONFIG)"; fi; \
	if [ -z "$$kc" ] || [ ! -f "$${kc%%:*}" ]; then \
	  echo "e2e: no cluster: set KUBECONFIG to a cluster's kubeconfig, or run 'make cluster-up' (root) first" >&2; exit 1; fi; \
	if [ "$$kc" = "$(LOCAL_KUBECONFIG)" ]; then hack/local-cluster.sh images || exit 1; export FERROFED_E2E_REQUIRE_LOCAL=1; fi; \
	hack/tools.sh helm >/dev/null || exit 1; \
	echo "e2e: KUBECONFIG=$$kc"; \
	KUBECONFIG="$$kc" $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/... || exit 1; \
	if [ "$$kc" = "$(LOCAL_KUBECONFIG)" ]; then \
	  echo "e2e: make demo on the local node (DEMO_EXIT_AFTER=0), its summary checked"; \
	  $(GO) test -tags e2e -count=1 -timeout 12m -v -run '^TestDemoOnTheLocalNode$$' ./test/demo/; fi

.PHONY: e2e-audit-persistent
e2e-audit-persistent: ## Run only the persistent audit spool scenarios (FERROFED_E2E_SPOOL_MODES, default emptydir,persistent,switch) on the cluster KUBECONFIG names (part of make e2e).
	@kc="$${KUBECONFIG:-}"; \
	if [ -z "$$kc" ] && [ -f "$(LOCAL_KUBECONFIG)" ]; then kc="$(LOCAL_KUBECONFIG)"; fi; \
	if [ -z "$$kc" ] || [ ! -f "$${kc%%:*}" ]; then \
	  echo "e2e: no cluster: set KUBECONFIG to a cluster's kubeconfig, or run 'make cluster-up' (root) first" >&2; exit 1; fi; \
	if [ "$$kc" = "$(LOCAL_KUBECONFIG)" ]; then hack/local-cluster.sh images || exit 1; export FERROFED_E2E_REQUIRE_LOCAL=1; fi; \
	hack/tools.sh helm >/dev/null || exit 1; \
	KUBECONFIG="$$kc" $(GO) test -tags e2e -count=1 -timeout 30m -v -run '^TestAuditPersistentSpool$$' ./test/e2e/

##@ Chart, examples and demo

.PHONY: tools
tools: ## Build (once) helm v3.22.0, the linters (.custom-gcl.yml) and otelcol (hack/otelcol) from Go modules into bin/.
	@hack/tools.sh >/dev/null

.PHONY: helm
helm: ## Print the path of the helm the chart tests use (bin/helm), building it once.
	@hack/tools.sh helm >/dev/null
	@echo $(BIN)/helm

.PHONY: lint-chart
lint-chart: ## Run helm lint --strict on charts/ferrofed (with cert-manager, with the webhook off and with the operator's tracing too).
	@hack/tools.sh helm >/dev/null
	$(BIN)/helm lint --strict charts/ferrofed
	$(BIN)/helm lint --strict charts/ferrofed --set certManager.enabled=true
	$(BIN)/helm lint --strict charts/ferrofed --set webhook.enabled=false
	$(BIN)/helm lint --strict charts/ferrofed --set tracing.endpoint=https://otel.example:4318 --set tracing.headersSecret.name=otel-token --set tracing.caSecret.name=otel-ca

.PHONY: check-examples
check-examples: ## Fail when an example's grace period does not outlast its drain (the release checks).
	hack/checks/kubernetes-example.sh
	hack/checks/release-compose.sh

# `make demo` runs on the real local node (hack/local-cluster.sh) when `hack/local-cluster.sh
# preflight` passes (root, netfilter, cgroups), else on the envtest control plane; it says
# which and why first. DEMO_CLUSTER=local|envtest forces one; DEMO_EXIT_AFTER=N stops it.
.PHONY: demo
demo: ## Run it all here: the chart, the operator, two members and the sample Gateway; on a real node, a rolling restart under load (Ctrl-C tears down).
	hack/demo.sh

##@ Operator

.PHONY: install-crds
install-crds: ## Install the Gateway CRD (config/crd/bases) into the cluster KUBECONFIG names.
	$(BIN)/k8s/kubectl apply --server-side -f config/crd/bases

.PHONY: operator
operator: install-crds ## Run the operator here against KUBECONFIG, without the webhook (CEL rules still apply).
	$(GO) run . operator --enable-webhook=false --metrics-bind-address=0 --health-probe-bind-address=:8081

.PHONY: bench-operator
bench-operator: ## Run only the 1,000-Gateway benchmark on envtest (time, peak memory, writes per Gateway).
	KUBEBUILDER_ASSETS="$(CONTROLPLANE)" $(GO) test -run '^$$' -bench Reconcile1000Gateways -count=1 ./test/operator/
