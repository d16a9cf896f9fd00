# shelljob — see README.md. Every tool is pinned and built from the Go module proxy into ./bin.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := build

LOCALBIN ?= $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
STATICCHECK_VERSION ?= v0.8.2
KIND_VERSION ?= v0.33.0
HELM_VERSION ?= v3.22.0

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
STATICCHECK ?= $(LOCALBIN)/staticcheck-$(STATICCHECK_VERSION)
KIND ?= $(LOCALBIN)/kind-$(KIND_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)

# Packages of the quick suite: everything but the kind end-to-end tests.
UNIT_PKGS = $$(go list ./... | grep -v /test/e2e)

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code from the API markers.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers; copy the CRDs into the chart (test/chart checks they match).
	$(CONTROLLER_GEN) rbac:roleName=shelljob-manager crd:allowDangerousTypes=false webhook paths="./api/...;./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	rm -f charts/shelljob/crds/*.yaml
	cp config/crd/bases/*.yaml charts/shelljob/crds/

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: lint
lint: $(STATICCHECK) ## go vet, staticcheck and (once the chart exists) helm lint.
	go vet -tags e2e ./...
	$(STATICCHECK) -tags e2e ./...
	@if [ -f charts/shelljob/Chart.yaml ]; then $(MAKE) --no-print-directory helm-lint; fi

.PHONY: helm-lint
helm-lint: $(HELM) ## helm lint of the chart, warnings included.
	$(HELM) lint --strict charts/shelljob

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, etcd and kubectl for envtest from source (cached).
	@hack/envtest-assets.sh >/dev/null

.PHONY: unit
unit: envtest-assets $(HELM) ## The quick suite: unit, fuzz seeds, envtest and the chart's golden tests, no cluster.
	HELM=$(HELM) KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" go test -timeout 20m $(UNIT_PKGS)

# Packages whose concurrency the race detector checks in `make test`.
RACE_PKGS = ./bot/... ./internal/faketg/... ./internal/liveoutput/... ./agent/... ./internal/agentclient/... \
	./internal/streamapi/... ./internal/streamclient/...

.PHONY: race
race: envtest-assets ## The concurrent packages (bot, fake Telegram, live output, agent, its client, the stream API and its client) under the race detector.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" go test -race -timeout 45m $(RACE_PKGS)

.PHONY: test
test: lint unit race e2e ## The whole suite: lint, unit and envtest, race, then end to end on kind.

.PHONY: e2e
e2e: $(HELM) $(KIND) ## End-to-end tests on kind: the chart and the fake Telegram installed, the whole stack driven as a chat admin would.
	@HELM=$(HELM) KIND=$(KIND) LOCALBIN=$(LOCALBIN) KIND_WORKERS=$(KIND_WORKERS) hack/e2e.sh

.PHONY: bench
bench: $(HELM) $(KIND) ## Benchmarks; figures go to BENCHMARKS.md.
	@HELM=$(HELM) KIND=$(KIND) LOCALBIN=$(LOCALBIN) KIND_WORKERS=$(KIND_WORKERS) hack/bench.sh

.PHONY: demo
demo: $(HELM) $(KIND) ## The main job: the whole stack on kind, and a terminal chat with the bot through the fake Telegram.
	@HELM=$(HELM) KIND=$(KIND) LOCALBIN=$(LOCALBIN) KIND_WORKERS=$(KIND_WORKERS) hack/demo.sh

##@ Build

.PHONY: build
build: generate ## Build every binary into ./bin.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/ ./cmd/...

##@ Cluster

# KIND_WORKERS is the number of worker nodes beside the control plane.
KIND_WORKERS ?= 1

.PHONY: kind-up
kind-up: $(KIND) ## Create the shelljob kind cluster offline (KIND_WORKERS=1 worker nodes), with the project's images loaded (all builds cached).
	@KIND=$(KIND) LOCALBIN=$(LOCALBIN) KIND_WORKERS=$(KIND_WORKERS) hack/kind-up.sh

.PHONY: kind-down
kind-down: $(KIND) ## Delete the shelljob kind cluster (images stay cached).
	@KIND=$(KIND) hack/kind-down.sh

.PHONY: kind-check
kind-check: ## Check the kind cluster: node, CoreDNS, worker and privileged pods, an interrupted kubectl exec.
	@KUBECTL=$(LOCALBIN)/kubectl hack/kind-check.sh

##@ Deploy

# DEPLOY_CONTEXT is the kubeconfig context to deploy to; the current one when empty.
DEPLOY_CONTEXT ?=
DEPLOY_NAMESPACE ?= shelljob-system
# kubectl built from source by hack/kube-binaries.sh (cached), with DEPLOY_CONTEXT.
deploy_kubectl = kubectl="$$(hack/kube-binaries.sh kubectl)/kubectl $(if $(DEPLOY_CONTEXT),--context $(DEPLOY_CONTEXT))"

.PHONY: deploy
deploy: ## Deploy the operator (config/default: CRDs, RBAC, Deployment) and wait for it.
	@$(deploy_kubectl); \
	$$kubectl apply --server-side --force-conflicts -k config/default; \
	$$kubectl -n $(DEPLOY_NAMESPACE) rollout status deployment/shelljob-operator --timeout=180s

.PHONY: deploy-samples
deploy-samples: ## Create the two default pools of config/samples (shell: 16 workers, plugin: 4).
	@$(deploy_kubectl); $$kubectl apply --server-side -k config/samples

.PHONY: undeploy
undeploy: ## Remove the jobs, the pools and the operator (jobs first, while the operator can still stop them).
	@$(deploy_kubectl); \
	if $$kubectl get crd shelljobs.shell.shelljob.dev >/dev/null 2>&1; then \
	  $$kubectl -n $(DEPLOY_NAMESPACE) delete shelljobs --all --wait --timeout=60s; \
	  $$kubectl -n $(DEPLOY_NAMESPACE) delete shellpools --all --wait --timeout=60s; \
	fi; \
	$$kubectl delete --ignore-not-found -k config/default

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install-tool,$@,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

$(STATICCHECK): | $(LOCALBIN)
	$(call go-install-tool,$@,honnef.co/go/tools/cmd/staticcheck,$(STATICCHECK_VERSION))

$(KIND): | $(LOCALBIN)
	$(call go-install-tool,$@,sigs.k8s.io/kind,$(KIND_VERSION))

$(HELM): | $(LOCALBIN)
	$(call go-install-tool,$@,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

# go-install-tool installs a pinned tool as bin/NAME-VERSION with a bin/NAME link.
define go-install-tool
@[ -f "$(1)" ] || { \
	set -e; \
	echo "Building $(2)@$(3)"; \
	tmp=$$(mktemp -d); \
	GOBIN=$$tmp go install $(2)@$(3); \
	mv $$tmp/* $(1); \
	rm -rf $$tmp; \
	ln -sf $$(basename $(1)) $(LOCALBIN)/$$(basename $(1) | sed 's/-v[0-9].*$$//'); \
}
endef
