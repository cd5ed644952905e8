# Gridweave SDK. `make` lists the targets; `make test` is what CI runs.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT  ?= 45m
# Packages (and a package's parallel tests) run at once by make test and
# make test-race: as many as CPUs, as go test runs them.
TEST_P        ?= $(shell nproc 2>/dev/null || echo 2)
PKGS          ?= ./...
# The packages whose in-memory tests drive concurrent code (the ledger
# and its stores, the meshes, the fleet, the HTTP service on its
# in-memory backends, leading, the link book, group commit, KubeTorch,
# endpoint swaps, the node agent and kubelet join, rayctl): make test
# runs them with -race.
RACE_PKGS     ?= ./joinkeys/... ./mesh/memmesh/ ./mesh/standby/ ./gridweave/ ./gridweave/fleet/... \
                 ./gridweave/lease/ ./gridweave/identity/ ./gridweave/master/ ./gridweave/scrapetargets/ \
                 ./internal/keyedlock/ ./internal/groupcommit/ ./rayctl/ ./mesh/reflexive/ \
                 ./gridweave/node/peering/ ./gridweave/node/joinagent/ ./gridweave/node/kubeletnode/ \
                 ./gridweave/kubeletjoin/ ./gridweave/linkbook/ ./gridweave/kubetorch/ ./gridweave/endpoints/

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## compile every package and example binary
	$(GO) build $(PKGS)

.PHONY: test
test: ## everything CI runs: modules, gofmt, vet and staticcheck, the race detector on the concurrent in-memory code, the control-plane and Ray caches, unit and real-component tests, then a check for leftover processes; each phase timed
	@.ci/phase "modules" $(GO) mod download
	@# The Ray environment mostly downloads and unpacks (Ray and torch, a few
	@# GB), so it is made beside the compiler-bound lint and race phases;
	@# its output comes after theirs.
	@venv_log=$$(mktemp); \
	.ci/phase "Ray environment" $(MAKE) --no-print-directory ray-venv >"$$venv_log" 2>&1 & venv=$$!; \
	.ci/phase "lint" $(MAKE) --no-print-directory lint && .ci/phase "race" $(MAKE) --no-print-directory test-race; checks=$$?; \
	wait $$venv; made=$$?; cat "$$venv_log"; rm -f "$$venv_log"; \
	[ $$checks -eq 0 ] && [ $$made -eq 0 ]
	@.ci/phase "control-plane build" $(GO) run ./internal/testcluster/cmd/testcluster-build
	@# As many packages at once as CPUs, as go test runs them, but from
	@# kept test binaries (only what a change touched links again), the
	@# slowest of the last run first, without go test's vet checks: the
	@# lint phase ran go vet (every analyzer) on these packages.
	@.ci/phase "tests" bash -c 'set -o pipefail; $(GO) run ./internal/testbinaries/cmd/run-tests -p $(TEST_P) -parallel $(TEST_P) -timeout $(TEST_TIMEOUT) $(PKGS) 2>&1 | tee $${TEST_LOG:-/dev/null}'
	@.ci/phase "Helm chart tests" sh -c 'cd deploy/helm/chartcheck && $(GO) test -count=1 -timeout 20m ./...'   # a module of its own (Helm's Kubernetes modules)
	@.ci/phase "leftover check" $(GO) run ./internal/testcluster/cmd/testcluster-leftovers

.PHONY: run
run: ## the control-plane server in dev mode: SQLite under ./data, in-memory mesh and cluster, join agents, on 127.0.0.1:8800
	for arch in amd64 arm64; do CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -o ./data/agents/join-node-linux-$$arch ./examples/join-node || exit 1; done
	AGENT_DIR=./data/agents KUBERAY_DB=./data/kuberay.db $(GO) run ./examples/server --dev

.PHONY: playground
playground: ## a local cluster to try the server and the launcher: real control plane, KubeRay, kwok GPU nodes; as root, machines join it as real nodes; Ctrl-C stops it
	$(GO) run ./examples/playground

.PHONY: playground-machine
playground-machine: ## as root, with the playground running: a new machine (a network namespace) runs its join command and becomes a real node (containerd and the kubelet) running a pod
	$(GO) run ./examples/playground machine

# The server as one static binary (cgo SQLite linked in) and its image,
# reproducible: the same source gives the same bytes and the same digest
# (the build flags live in deploy/image).
SERVER_VERSION ?= 0.1.0

.PHONY: server-static
server-static: ## the server as one static binary: bin/gridweave-server
	$(GO) run ./deploy/image/cmd/build-server-image --binary-only --version $(SERVER_VERSION)

.PHONY: image
image: ## the server's OCI image without Docker: bin/gridweave-server-image.tar and bin/oci-layout/
	rm -rf bin/oci-layout bin/gridweave-server-image.tar
	$(GO) run ./deploy/image/cmd/build-server-image --version $(SERVER_VERSION) \
		--revision "$$(git rev-parse HEAD 2>/dev/null)" --tarball bin/gridweave-server-image.tar --oci-layout bin/oci-layout

# The Ray images, built without Docker from Debian packages (mmdebstrap)
# and PyPI, as root; reproducible and cached (a second build takes
# seconds). WORKER_IMAGE_EXTRAS (the worker) and RAY_IMAGE_EXTRAS (the
# head) add Ray Train with torch: torch (PyPI's CUDA build) or torch-cpu
# (Debian's CPU build).
.PHONY: worker-image
worker-image: ## the GPU worker image (gridweave-worker:latest, Ray and Python 3.11): bin/gridweave-worker-image.tar, what WORKER_IMAGE_TAR serves
	$(GO) run ./deploy/rayimage/cmd/build-ray-image -kind worker -out bin/gridweave-worker-image.tar

.PHONY: ray-image
ray-image: ## the head/CPU image (gridweave-ray:2.54.0-py311) to pair with the worker image: bin/gridweave-head-image.tar
	$(GO) run ./deploy/rayimage/cmd/build-ray-image -kind head -out bin/gridweave-head-image.tar

.PHONY: test-unit
# The test binaries are kept between runs (internal/testbinaries): a run
# links only those a change touched, then runs every test. Four packages
# and eight parallel tests at once, since many tests wait on timers.
test-unit: ## fast tests only: no root, no control plane (-short); only the test binaries a change touched are linked again
	$(GO) run ./internal/testbinaries/cmd/run-tests -short -p 4 -parallel 8 $(PKGS)

# Without go test's vet checks: make lint runs go vet with every analyzer.
.PHONY: test-race
test-race: ## the unit tests of the concurrent in-memory code with the race detector (-race -short)
	$(GO) run ./internal/testbinaries/cmd/run-tests -race -short -p $(TEST_P) -parallel $(TEST_P) $(RACE_PKGS)

.PHONY: vet
vet: ## go vet
	$(GO) vet $(PKGS)

.PHONY: bench
bench: testcluster ## every goal's benchmark, one table: figure, goal, met (as root for all of them; about 15 minutes)
	$(GO) run ./internal/benchgoals/cmd/benchgoals

.PHONY: bench-short
bench-short: ## the quick subset of make bench (the GPU join rate, the launcher, direct vs hub as root; a few minutes)
	$(GO) run ./internal/benchgoals/cmd/benchgoals -short

.PHONY: bench-all
bench-all: ## every Go benchmark of every package, with allocation figures
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (pinned, run from the module proxy)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

.PHONY: testcluster
testcluster: ## build (once, cached) etcd, kube-apiserver, controller-manager, scheduler, kwok, KubeRay operator
	$(GO) run ./internal/testcluster/cmd/testcluster-build

.PHONY: ray-venv
ray-venv: ## create (once, cached) the Python environment with Ray and torch the real-Ray tests use (about 7 GB)
	$(GO) run ./internal/raytest/cmd/raytest-venv

.PHONY: clean-cache
clean-cache: ## remove the cached control-plane binaries, Ray environment and test binaries
	$(GO) run ./internal/testbinaries/cmd/run-tests -clean
	$(GO) run ./internal/testcluster/cmd/testcluster-build -clean
	$(GO) run ./internal/raytest/cmd/raytest-venv -clean
