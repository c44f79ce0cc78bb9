package e2e

// Explanations say why the tests that fail here fail: a feature netcube
// lacks (with the issue that brings it), a limit of the sandbox, or a
// fix made after the committed run (with what verified it).
var Explanations = []Explanation{
	{`sctp|SCTP`, "machine limit: this kernel has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT), so no pod can serve or dial it; netcube serves SCTP Services (ClusterIP, NodePort, LoadBalancer, on the tc path, any targetPort: the CRC32c is updated when a port changes), proven here by BPF_PROG_RUN packet rows, so the remaining limit is the kernel"},
	{`should be able to switch session affinity for LoadBalancer service with Local traffic policy`, "a limit of announcing LoadBalancer IPs on the link (ARP/NDP), which MetalLB's L2 mode and Cilium's L2 announcements share: a client reaches the address through one node, the first that answered its ARP, and with externalTrafficPolicy Local that node serves it with its own endpoints only; the test, written for a cloud load balancer that spreads clients over every node with endpoints, expects more than one backend once affinity is off, and this node has one. It applies to a run on one flat segment (netcube-lab e2e without --routed); make e2e runs routed, where the router's ECMP spreads clients over every node with an endpoint"},
	{`should set TCP CLOSE_WAIT timeout`, "kube-proxy's own behaviour, and a sandbox limit: it reads the kernel's conntrack table on the client's node for the 1-hour CLOSE_WAIT timeout kube-proxy sets there; netcube routes pod traffic past netfilter (its conntrack is its own, with its own timeouts: issue 19), so the table has no such entry; and its distroless-iptables image is not built here"},
}
