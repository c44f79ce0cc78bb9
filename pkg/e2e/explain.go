package e2e

// Explanations say why the tests that fail here fail: a feature netcube
// lacks (with the issue that brings it) or a limit of the sandbox.
var Explanations = []Explanation{
	{`NetworkPolicy|Netpol`, "netcube enforces no NetworkPolicy yet: the policy cube is issue 18, which is judged on these tests"},
	{`sctp|SCTP`, "netcube's load balancer and router handle TCP and UDP only; SCTP Services are not built (no issue yet)"},
	{`Internet connection for containers`, "sandbox limit: the machine has no internet (skipped from the next run on)"},
	{`HostPort validates`, "hostPorts were not served: fixed after this run by chaining the standard portmap plugin (chart value hostPortPlugin); see the closing note's focused re-run"},
	{`should support configurable pod resolv.conf|partial qualified names for the cluster`, "sandbox image gap: the test runs its own DNS server from agnhost's /coredns, which the locally built agnhost lacked in this run (added after it)"},
	{`DNS should provide /etc/hosts entries|DNS should provide DNS for pods for Hostname|DNS should provide DNS for pods for Subdomain`, "sandbox image gap in this run: the probes call getent (glibc's resolver), which the locally built agnhost lacked (added after it)"},
	{`DNS configMap`, "sandbox image gap in this run: the test's upstream DNS server is agnhost's /coredns, missing from the locally built image (added after it)"},
	{`\[Privileged\]`, "sandbox gap in this run: the API server did not allow privileged pods (--allow-privileged, set after this run); the test also needs the distroless-iptables image (conntrack tools), which cannot be built here"},
	{`should check kube-proxy urls`, "reads kube-proxy's /healthz (JSON with lastUpdated) and /proxyMode on the node: netcube answered \"ok\" and had no /proxyMode; both answered as kube-proxy does after this run"},
	{`should be able to handle large requests: udp`, "not yet diagnosed: a 2,000-byte UDP request (an IP-fragmented datagram) through a Service gets no answer, while large TCP requests pass; fragments are in issue 19's fuzzing and fault list"},
	{`should function for service endpoints using hostNetwork`, "not yet diagnosed: a Service whose endpoints are host-network pods is not reached from the test's pod (host-network backends are node addresses)"},
	{`should fail health check node port if there are only terminating endpoints`, "not yet diagnosed: the Service's healthCheckNodePort is not reachable from a pod at the node's address"},
}
