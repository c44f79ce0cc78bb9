package e2e

import (
	"regexp"
	"strings"
)

// Focus is what the full run selects: the sig-network tests.
const Focus = `\[sig-network\]`

// Category is why a group of tests is not run. Exactly one applies to
// each skipped test, and the report counts them apart: the tests the
// machine cannot run leave the pass rate "of every test this machine can
// run"; the others stay in it, as tests that did not pass.
type Category string

const (
	// MachineLimit: the test needs what this machine lacks (the
	// internet, SCTP in the kernel, SSH to the nodes).
	MachineLimit Category = "cannot run on this machine"
	// NotDataPlane: the test measures or operates something other than
	// the data plane (benchmarks, kube-proxy's own DaemonSet).
	NotDataPlane Category = "not a data-plane test"
	// Unsupported: netcube lacks the feature the test checks.
	Unsupported Category = "netcube does not support it"
)

// Categories in the order the report lists them.
var Categories = []Category{MachineLimit, NotDataPlane, Unsupported}

// Skip is a group of tests left out of the run, and why.
type Skip struct {
	Pattern  string // a regular expression on the test's full name (ginkgo --skip)
	Category Category
	Reason   string // the one reason, true of every test Pattern catches
	// Tests are the full names of the tests Reason applies to, stated
	// apart from Pattern: TestSkipsCatchExactlyTheirTests fails when
	// Pattern catches any other selected test (a pattern wider than its
	// reason hides a test that could run) or misses one of these.
	Tests []string
}

// Skips are the only tests left out of the full run. A test that can
// tell it cannot run skips itself at run time instead (the report lists
// those with the test's own message): the sandbox's nodes, zones and
// components are as they are, and no pattern here guesses at them.
var Skips = []Skip{
	{
		Pattern: `Networking should recreate its iptables rules if they are deleted`, Category: MachineLimit,
		Reason: "deletes the KUBE- iptables chains on a node over SSH; the sandbox's nodes have no SSH",
		Tests:  []string{"[sig-network] Networking should recreate its iptables rules if they are deleted [Disruptive]"},
	},
	{
		Pattern: `should provider? Internet connection for containers`, Category: MachineLimit,
		Reason: "reaches a host on the internet; the machine has none (pods reaching outside the cluster, masqueraded, are netcube's own tests)",
		Tests: []string{
			"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]",
			"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv6] [Experimental][LinuxOnly]",
			"[sig-network] Networking should provider Internet connection for containers using DNS [Feature:Networking-DNS]",
		},
	},
	{
		Pattern: `Forward PTR lookup should forward PTR records lookup to upstream nameserver`, Category: MachineLimit,
		Reason: "first resolves 8.8.8.8's PTR record (dns.google) through the cluster DNS's default upstream, the public DNS; the machine has no internet (the stubDomain and external-name forwarding tests, the same setup without it, run)",
		Tests:  []string{"[sig-network] DNS configMap nameserver Forward PTR lookup should forward PTR records lookup to upstream nameserver [Slow] [Serial]"},
	},
	{
		Pattern: `\[Provider:GCE\]`, Category: MachineLimit,
		Reason: "resolves google.com and GCE's metadata server from a pod: needs the internet, and a GCE VM besides (it skips itself on any provider but gce); the cluster's own names are the Conformance DNS tests, which run",
		Tests:  []string{"[sig-network] DNS should provide DNS for the cluster [Provider:GCE]"},
	},
	{
		Pattern: `\[Feature:SCTPConnectivity\]`, Category: MachineLimit,
		Reason: "SCTP between pods: this machine's kernel has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT), so no pod can serve or dial it",
		Tests: []string{
			"[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should enforce policy based on Ports [Feature:NetworkPolicy]",
			"[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector [Feature:NetworkPolicy]",
			"[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
			"[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: sctp [LinuxOnly] [Feature:SCTPConnectivity]",
			"[sig-network] Networking Granular Checks: Pods should function for node-pod communication: sctp [LinuxOnly] [Feature:SCTPConnectivity]",
			"[sig-network] Networking Granular Checks: Services should function for endpoint-Service: sctp [Feature:SCTPConnectivity]",
			"[sig-network] Networking Granular Checks: Services should function for node-Service: sctp [Feature:SCTPConnectivity]",
			"[sig-network] Networking Granular Checks: Services should function for pod-Service: sctp [Feature:SCTPConnectivity]",
			"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: sctp [Feature:SCTPConnectivity]",
		},
	},
	{
		Pattern: `Services should work after restarting apiserver \[Disruptive\]`, Category: MachineLimit,
		Reason: "restarts kube-apiserver as a static pod on a control-plane node; the sandbox runs its control plane as processes, not pods (the test would skip itself: \"kube-apiserver is not running as pod\"); netcube's own TestAPIServerOutage stops the API server under an agent and checks the datapath keeps its state and catches up",
		Tests:  []string{"[sig-network] Services should work after restarting apiserver [Disruptive]"},
	},
	{
		Pattern: `Services should work after restarting kube-proxy \[Disruptive\]`, Category: NotDataPlane,
		Reason: "restarts kube-proxy; there is none (netcube replaces it, and the test would skip itself); restarting netcube's agent under traffic is netcube's own test (TestAgentUpgradeUnderTraffic)",
		Tests:  []string{"[sig-network] Services should work after restarting kube-proxy [Disruptive]"},
	},
	{
		Pattern: `\[Feature:KubeProxyNFAcct\]`, Category: NotDataPlane,
		Reason: "reads kube-proxy's own metric of packets its iptables rules accepted for localhost NodePorts (nfacct); netcube has neither kube-proxy's metrics nor iptables rules to count (the test would skip itself)",
		Tests:  []string{"[sig-network] KubeProxy should update metric for tracking accepted packets destined for localhost nodeports [Feature:KubeProxyNFAcct]"},
	},
	{
		Pattern: `\[Feature:KubeProxyDaemonSetMigration\]`, Category: NotDataPlane,
		Reason: "upgrades or downgrades kube-proxy between static pods and a DaemonSet (a cluster-lifecycle test of kube-proxy's deployment); netcube replaces kube-proxy, and its own upgrade under traffic is netcube's test (TestAgentUpgradeUnderTraffic)",
		Tests: []string{
			"[sig-network] kube-proxy migration [Serial] [Disruptive] [Feature:KubeProxyDaemonSetMigration] Downgrade kube-proxy from a DaemonSet to static pods should maintain a functioning cluster [Feature:KubeProxyDaemonSetDowngrade]",
			"[sig-network] kube-proxy migration [Serial] [Disruptive] [Feature:KubeProxyDaemonSetMigration] Upgrade kube-proxy from static pods to a DaemonSet should maintain a functioning cluster [Feature:KubeProxyDaemonSetUpgrade]",
		},
	},
	{
		Pattern: `\[Feature:PerformanceDNS\]|\[Feature:Networking-Performance\]`, Category: NotDataPlane,
		Reason: "benchmarks (iperf2 between nodes, DNS load over many Services) that report numbers and assert no behaviour; netcube's own benchmarks measure the datapath (docs/benchmarks)",
		Tests: []string{
			"[sig-network] Networking IPerf2 [Feature:Networking-Performance] should run iperf2",
			"[sig-network] [Feature:PerformanceDNS] [Serial] Should answer DNS query for maximum number of services per cluster",
		},
	},
}

// SkippedBy is the Skip whose pattern catches name, if any.
func SkippedBy(name string) (Skip, bool) {
	for _, s := range Skips {
		if regexp.MustCompile(s.Pattern).MatchString(name) {
			return s, true
		}
	}
	return Skip{}, false
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
