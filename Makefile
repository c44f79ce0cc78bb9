# netcube: every target runs as root (BPF, network namespaces, cgroups).
GO      ?= go
SHELL   := /bin/bash
BIN     := bin
# Tests share the machine's namespaces, cgroups and bpffs: run packages one at a time.
TESTFLAGS ?= -p 1 -count=1 -timeout 30m

.PHONY: all deps tools e2e-tools generate proto manifests build images test fuzz reliability e2e netpol conformance-cnp demo sandbox sandbox-down bench bench-observability bench-slices bench-sync bench-scale bench-scale-l2 bench-compare bench-podnet bench-nodeport bench-synflood bench-failover bench-policy bench-cluster-policy bench-cluster-policy-latency lint clean

all: build

deps:            ## install system packages (idempotent)
	bash hack/install-deps.sh

tools:           ## build (or reuse cached) kube-apiserver, etcd, helm and the hubble CLI from the Go module proxy; bin/hubble links the CLI
	mkdir -p $(BIN) && ln -sf "$$(bash hack/build-tools.sh | tail -n 1)/hubble" $(BIN)/hubble

e2e-tools:       ## build (or reuse cached) kubelet, kube-scheduler, kubectl, agnhost, CoreDNS, e2e.test and ginkgo
	bash hack/build-e2e.sh >/dev/null

manifests:       ## render deploy/netcube.yaml from the Helm chart (its CRDs first)
	$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1)/helm template netcube deploy/helm/netcube --include-crds > deploy/netcube.yaml

generate:        ## regenerate the cubes' hook header from the registry, then the BPF object and its Go bindings from bpf/
	$(GO) generate ./pkg/cubes/
	$(GO) generate ./pkg/datapath/ ./internal/bpftest/

proto:           ## regenerate pkg/hubble/{flowpb,observerpb,peerpb} from api/hubble (buf and the Go plugins, built from the Go module proxy)
	bash hack/proto.sh

# The commit the binaries are built from, "-dirty" when the tree has changes
# beyond the reports (docs/benchmarks): the lab's reports name it (lab/bench.Commit).
BUILD_COMMIT = $$(git rev-parse HEAD 2>/dev/null)$$(git status --porcelain -- ':/' ':(top,exclude)docs/benchmarks' 2>/dev/null | grep -q . && echo -dirty)

build:
	$(GO) build -ldflags "-X main.commit=$$(git rev-parse --short=12 HEAD 2>/dev/null) -X github.com/netcube/netcube/lab/bench.builtCommit=$(BUILD_COMMIT)" -o $(BIN)/ ./cmd/... ./lab/cmd/...

images: build     ## the agent's, hubble-relay's (cilium's, hack/build-tools.sh) and the pause image as archives (bin/images/), from static builds (and cyclonus's worker, for netcube-lab netpol)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/static/ ./cmd/netcube-agent ./cmd/netcube-cni ./cmd/netcube-operator ./cmd/netcube
	CGO_ENABLED=0 $(GO) build -o $(BIN)/static/cyclonus-worker github.com/mattfenwick/cyclonus/cmd/worker
	mkdir -p $(BIN)/images && $(BIN)/netcube-lab image agent --bin $(BIN)/static --out $(BIN)/images/netcube-agent.tar
	$(BIN)/netcube-lab image pause --out $(BIN)/images/pause.tar
	$(BIN)/netcube-lab image hubble-relay --bin "$$(bash hack/build-tools.sh | tail -n 1)" --out $(BIN)/images/hubble-relay.tar

test: deps build tools e2e-tools ## every test: unit, datapath (BPF_PROG_RUN), socket-LB, control plane (real kube-apiserver), sandbox, upstream e2e smoke on real nodes
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) NETCUBE_E2E_DIR=$$(bash hack/build-e2e.sh 2>/dev/null | tail -n 1) \
		$(GO) test $(TESTFLAGS) ./...
	$(MAKE) fuzz FUZZ_PROGRAMS=20000x FUZZ_MANIFESTS=60000x

# make test gives each target a number of inputs (about 15 s here), not a
# time: Go before 1.27 can fail a timed run at its deadline with "context
# deadline exceeded" and no failing input (go.dev/issue/75804), which a
# count does not race.
FUZZTIME ?= 10m
FUZZ_PROGRAMS ?= $(FUZZTIME)
FUZZ_MANIFESTS ?= $(FUZZTIME)
fuzz:            ## fuzz the tc programs (BPF_PROG_RUN) and the manifest translation, FUZZTIME each (make test: a count of inputs each)
	$(GO) test -run '^$$' -fuzz FuzzPrograms -fuzztime $(FUZZ_PROGRAMS) ./pkg/datapath
	$(GO) test -run '^$$' -fuzz FuzzManifests -fuzztime $(FUZZ_MANIFESTS) ./pkg/source/yamldir

RELIABILITY_TESTS := TestConntrackChurnKeepsIdleFlows|TestAgentKillUnderLoad|TestAgentUpgradeUnderTraffic|TestNodeRebootConverges|TestAPIServerOutage|TestMapFullFromTheAPI|TestUpgradeCarriesConntrackOver
RUNS ?= 3
reliability: deps build tools ## the fault tests, long versions (the API server down 10 minutes), RUNS times in a row (3, about 16 minutes each): docs/benchmarks/reliability.md
	rm -f $(BIN)/reliability.jsonl $(BIN)/reliability-runs.txt $(BIN)/reliability.log
	rc=0; for run in $$(seq 1 $(RUNS)); do echo "== reliability run $$run of $(RUNS)"; \
		NETCUBE_RELIABILITY_RUN=$$run NETCUBE_RELIABILITY_LONG=1 NETCUBE_RELIABILITY_OUT=$(CURDIR)/$(BIN)/reliability.jsonl NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) \
		$(GO) test -p 1 -count=1 -timeout 60m -v -run '$(RELIABILITY_TESTS)' ./test/integration ./test/controlplane ./pkg/datapath 2>&1 | \
		tee -a $(BIN)/reliability.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok)|fault record|failed:'; r=$${PIPESTATUS[0]}; \
		echo "$$run $$r" >> $(BIN)/reliability-runs.txt; [ $$r -eq 0 ] || rc=$$r; done; \
	$(BIN)/netcube-lab bench reliability --in $(BIN)/reliability.jsonl --runs $(BIN)/reliability-runs.txt --out docs/benchmarks && exit $$rc

e2e: deps images tools e2e-tools ## Kubernetes' sig-network e2e tests against six real nodes in zones a, b, c and two racks behind a BGP router (BIRD, ECMP) running netcube: docs/conformance/sig-network.md
	$(BIN)/netcube-lab e2e --nodes 6 --routed --report docs/conformance/sig-network.md

netpol: deps images tools e2e-tools ## cyclonus's generated NetworkPolicy cases on real nodes (about an hour): docs/conformance/netpol-cyclonus.md
	$(BIN)/netcube-lab netpol --report docs/conformance/netpol-cyclonus.md

conformance-cnp: deps images tools e2e-tools ## the upstream ClusterNetworkPolicy conformance suite (sigs.k8s.io/network-policy-api v0.3.0, built from the Go module proxy by hack/build-cnp-conformance.sh) on real nodes, every feature: docs/conformance/cluster-network-policy.md
	$(BIN)/netcube-lab cnp --suite "$$(bash hack/build-cnp-conformance.sh | tail -n 1)" --report docs/conformance/cluster-network-policy.md

demo: deps build ## start the sandbox with the example Services and send requests to each
	$(BIN)/netcube-lab demo

sandbox: deps build
	$(BIN)/netcube-lab sandbox up

sandbox-down:
	$(BIN)/netcube-lab sandbox down

bench: deps build tools ## pod->Service vs pod->pod, socket-LB on and off; then bench-nodeport (traffic from outside: tc, XDP, XDP+DSR, kube-proxy)
	$(BIN)/netcube-lab bench datapath
	$(MAKE) bench-nodeport

bench-observability: deps build tools ## what observability costs the traffic: off, default (events, per-cube counts), a hubble client attached; events/s delivered to one client
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench observability

bench-slices: deps build tools ## network slices: the latency class's p99 idle vs with the uplink saturated by bulk slices, the slices' rates, against slices off, kube-proxy iptables and tc-made HTB classes (a reference), at 1 and 10,000 Services: docs/benchmarks/slices.md
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench slices --runs 3 --duration 5s --services 1,10000 --uplink-rate 1G

bench-sync: deps build tools ## control plane: sync cost at 1k..100k Services against a real kube-apiserver
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench sync --services 1000,10000,30000,100000 --endpoints 1,10 --gzip-lists --page-sizes 2000

bench-scale: deps build tools ## past one machine: 10..200 hollow agents (--datapath=memory) against one kube-apiserver: docs/benchmarks/scale.md
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench scale --agents 10,50,100,200 --services 10000 --endpoints 5 --pods 1000 --policies 100 --rate 10 --pod-rate 10 --duration 30s

bench-scale-l2: deps build tools ## L2 announcer election at 100 hollow agents and 1,000 LoadBalancer Services: API requests and CPU, elected vs all vs one Lease per Service, and an agent killed: docs/benchmarks/scale-l2.md
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench scale-l2 --agents 100 --services 1000 --window 60s --heartbeat-interval 1s --rounds 2 --lease-renew 2s

bench-compare: deps build tools ## netcube vs the real kube-proxy (iptables-nft, iptables-legacy, nftables) at 1..30k Services (netcube to 100k): docs/benchmarks/compare.md
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench compare \
		--services 1,1000,5000,10000,30000,100000 --kube-proxy-max 30000 --kube-proxy-changes-max 10000 --runs 3 --duration 1s --reactions 3 --churn 6s --churn-every 1s

bench-podnet: deps build tools ## pod network: netcube (native, VXLAN, kernel-routed) vs flannel VXLAN + bridge: docs/benchmarks/podnet.md
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench podnet --runs 3 --duration 3s --startups 100

bench-nodeport: deps build tools ## external client->NodePort, backend on the other node: packets/s, TCP throughput, rr p50/p99, node1 on tc, XDP, XDP with DSR and kube-proxy iptables, IPv4 and IPv6 (about 6 minutes): docs/benchmarks/nodeport.{json,md}, plots/nodeport-accel-*.svg
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) $(BIN)/netcube-lab bench nodeport --runs 3 --duration 3s

bench-synflood: deps build ## spoofed SYNs at 10,000/s to a NodePort for 30 s, early drop off and on: held connections kept, new ones served (about 5 minutes): docs/benchmarks/synflood.{json,md}
	$(BIN)/netcube-lab bench synflood --runs 2

bench-failover: deps build ## a LoadBalancer IP's failover in the routed sandbox (BGP to BIRD): a node dying, an agent restarting, new connections failed and the gap (about 3 minutes): docs/benchmarks/failover.{json,md}
	$(BIN)/netcube-lab bench failover --runs 3


bench-policy: deps build tools ## NetworkPolicy per packet: no policy, 1,000 NetworkPolicies, the same without verdict events: docs/benchmarks/policy.{json,md}
	$(BIN)/netcube-lab bench policy --runs 9 --duration 3s

bench-cluster-policy: deps build tools ## ClusterNetworkPolicy per packet: no policy, NetworkPolicy alone, + 100 Admin and 100 Baseline ClusterNetworkPolicies (target >= 0.98 of NP alone), and kube-network-policies v0.8.0 on the same node (about 8 minutes): docs/benchmarks/cluster-policy.{json,md}
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) NETCUBE_KNP_DIR=$$(bash hack/build-kube-network-policies.sh | tail -n 1) $(BIN)/netcube-lab bench policy --runs 5 --duration 3s --cluster-policies 100 --kube-network-policies

bench-cluster-policy-latency: deps build tools ## ClusterNetworkPolicy change latency, API write -> enforced, at 10, 100 and 1,000 ClusterNetworkPolicies (target p99 < 100 ms), and kube-network-policies v0.8.0 against the same API server: docs/benchmarks/cluster-policy-latency.{json,md}
	NETCUBE_TOOLS_DIR=$$(bash hack/build-tools.sh 2>/dev/null | tail -n 1) NETCUBE_KNP_DIR=$$(bash hack/build-kube-network-policies.sh | tail -n 1) $(BIN)/netcube-lab bench policy-latency --policies 1 --cluster-policies 10,100,1000 --changes 50 --kube-network-policies

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal pkg hack lab test)" || (gofmt -l cmd internal pkg hack lab test; exit 1)

clean:
	rm -rf $(BIN)
