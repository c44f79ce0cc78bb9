package e2e

import (
	"regexp"
	"strings"
)

// Focus is what the full run selects: the sig-network tests.
const Focus = `\[sig-network\]`

// Skip is a group of tests the sandbox cannot run, and why.
type Skip struct {
	Pattern string // a regular expression on the test's full name
	Reason  string
}

// Skips are the only tests left out of the full run: each needs what a
// two-node sandbox without a cloud does not have.
var Skips = []Skip{
	{`\[Disruptive\]`, "restarts or partitions nodes and components over SSH; the sandbox's nodes have no SSH"},
	{`\[Feature:LoadBalancer\]|LoadBalancer`, "needs a cloud provider to provision load balancers (type=LoadBalancer status); netcube serves LoadBalancer IPs once set (its own tests), but nothing here assigns them"},
	{`\[Feature:Ingress\]|\[Provider:GCE\]`, "GCE-specific (an ingress controller, the GCE provider)"},
	{`\[Feature:KubeProxyDaemonSet`, "upgrades or downgrades a kube-proxy DaemonSet; netcube replaces kube-proxy"},
	{`\[Feature:PerformanceDNS\]|\[Feature:Networking-Performance\]`, "benchmarks (iperf2 and DNS load over many pods), not correctness tests; netcube's own benchmarks measure the datapath"},
	{`should provider? Internet connection for containers`, "reaches a host on the internet; the machine has none (pods reaching outside the cluster, masqueraded, are netcube's own tests)"},
	{`\[Feature:SCTPConnectivity\]`, "SCTP between pods: this machine's kernel has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT), so no pod can serve or dial it"},
	{`Forward PTR lookup should forward PTR records lookup to upstream nameserver`, "first resolves 8.8.8.8's PTR record (dns.google) through the cluster DNS's default upstream, the public DNS; the machine has no internet (the stubDomain and external-name forwarding tests, the same setup without it, run)"},
}

// Smoke is the fast subset `make test` runs: a dozen Service and
// connectivity tests, the health-check node port and hostPort ones, and
// three NetworkPolicy ones, that prove the whole path (kubelet,
// containerd, netcube's CNI plugin and agent from its chart, CoreDNS
// through a Service, policies from the API) end to end.
var Smoke = []string{
	`Services should serve a basic endpoint from pods`,
	`Services should serve multiport endpoints from pods`,
	`Services should be able to create a functioning NodePort service`,
	`Services should have session affinity work for service with type clusterIP`,
	`Services should be able to change the type from ExternalName to ClusterIP`,
	`Services should allow pods to hairpin back to themselves through services`,
	`Services should serve endpoints on same port and different protocols`,
	`Networking Granular Checks: Pods should function for intra-pod communication: http`,
	`Networking Granular Checks: Pods should function for node-pod communication: udp`,
	`EndpointSlice should create Endpoints and EndpointSlices for Pods matching a Service`,
	`DNS should provide DNS for services`,
	`Proxy version v1 should proxy through a service and a pod`,
	`Services should fail health check node port if there are only terminating endpoints`,
	`HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol`,
	`Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy`,
	`Netpol NetworkPolicy between server and client should enforce policy based on PodSelector and NamespaceSelector`,
	`Netpol NetworkPolicy between server and client should allow egress access on one named port`,
}

// SmokeFocus is Smoke as one ginkgo focus expression.
func SmokeFocus() string {
	parts := make([]string, len(Smoke))
	for i, s := range Smoke {
		parts[i] = regexp.QuoteMeta(s)
	}
	return strings.Join(parts, "|")
}

// SkipPattern is every Skip as one ginkgo skip expression.
func SkipPattern() string {
	parts := make([]string, len(Skips))
	for i, s := range Skips {
		parts[i] = s.Pattern
	}
	return strings.Join(parts, "|")
}
