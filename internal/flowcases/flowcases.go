// Package flowcases is netcube's packet-flow table for Services, in the
// shape of kube-proxy's (source, destination, port, protocol -> the
// endpoints that may answer, REJECT or DROP, masqueraded or not). The same
// table, over the same manifests, runs twice: through node 1's datapath
// programs with BPF_PROG_RUN (pkg/datapath) and as real traffic in the
// sandbox (test/integration).
package flowcases

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/netcube/netcube/lab/sandbox"
)

// Verdicts other than an answer.
const (
	Answered = ""       // some endpoint of Want answers
	Reject   = "reject" // refused at once: TCP RST, ICMP port unreachable
	Drop     = "drop"   // nothing comes back
)

// Case is one row. The client is the sandbox's client pod (on node 1) or
// the external client; every destination is served by node 1.
type Case struct {
	Name     string
	External bool   // from the client outside the cluster, else from the client pod
	Proto    string // "tcp" or "udp"
	To       netip.AddrPort
	Verdict  string   // Answered, Reject or Drop
	Want     []string // Answered: exactly these pods answer
	SNAT     bool     // Answered: the endpoint sees node 1's address, not the client's
	// Control (Drop rows): the row, earlier in the table, that shows the
	// same client reaching the same kind of frontend (same protocol and
	// family) when allowed: a drop is only believed after a delivery.
	Control string
}

// Services of the table (ClusterIPs x.y.0.8x; NodePorts 301xx).
type service struct {
	name, typ          string
	clusterIPs         [2]string
	nodePorts          [2]int // TCP, UDP; 0: none
	extTraffic         string // Cluster or Local
	intLocal           bool
	externalIPs, lbIPs []string
	sourceRanges       []string
	pods               []sandbox.Pod
}

// Addresses the external client sends to node 1 (routes: ExternalRoutes).
var (
	externalIP = [2]string{"192.0.2.50", "2001:db8::50"}
	lbIP       = [2]string{"198.51.100.50", "2001:db8::51"}
	walledIP   = [2]string{"198.51.100.51", "2001:db8::52"}
)

// ExternalRoutes are the prefixes the external client reaches through
// node 1.
func ExternalRoutes() []netip.Prefix {
	var out []netip.Prefix
	for _, a := range [][2]string{externalIP, lbIP, walledIP} {
		for _, s := range a {
			out = append(out, netip.PrefixFrom(netip.MustParseAddr(s), netip.MustParseAddr(s).BitLen()))
		}
	}
	return out
}

func services(t sandbox.Topology) []service {
	all := t.EchoBackends()
	var near, far []sandbox.Pod
	for _, p := range all {
		if p.Node == t.Nodes[0].Name {
			near = append(near, p)
		} else {
			far = append(far, p)
		}
	}
	return []service{
		{name: "flows-all", typ: "LoadBalancer", clusterIPs: [2]string{"10.96.0.80", "fd00:10:96::80"}, nodePorts: [2]int{30180, 30181},
			extTraffic: "Cluster", externalIPs: externalIP[:], lbIPs: lbIP[:], pods: all},
		{name: "flows-empty", typ: "NodePort", clusterIPs: [2]string{"10.96.0.81", "fd00:10:96::81"}, nodePorts: [2]int{30182, 30183}, extTraffic: "Cluster"},
		{name: "flows-itp", typ: "ClusterIP", clusterIPs: [2]string{"10.96.0.82", "fd00:10:96::82"}, intLocal: true, pods: all},
		{name: "flows-itp-far", typ: "ClusterIP", clusterIPs: [2]string{"10.96.0.83", "fd00:10:96::83"}, intLocal: true, pods: far},
		{name: "flows-etp", typ: "NodePort", clusterIPs: [2]string{"10.96.0.84", "fd00:10:96::84"}, nodePorts: [2]int{30184, 30185}, extTraffic: "Local", pods: all},
		{name: "flows-etp-far", typ: "NodePort", clusterIPs: [2]string{"10.96.0.85", "fd00:10:96::85"}, nodePorts: [2]int{30186, 30187}, extTraffic: "Local", pods: far},
		{name: "flows-walled", typ: "LoadBalancer", clusterIPs: [2]string{"10.96.0.86", "fd00:10:96::86"}, nodePorts: [2]int{30188, 30189},
			extTraffic: "Cluster", lbIPs: walledIP[:], sourceRanges: []string{"10.0.0.0/8", "fd00:dead::/64"}, pods: all},
	}
}

// Manifests renders the table's Services and EndpointSlices.
func Manifests(t sandbox.Topology) string {
	var docs []string
	for _, s := range services(t) {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  type: %s\n", s.name, s.typ)
		fmt.Fprintf(&b, "  ipFamilyPolicy: RequireDualStack\n  clusterIP: %s\n  clusterIPs: [%s, %s]\n", s.clusterIPs[0], s.clusterIPs[0], s.clusterIPs[1])
		if s.typ != "ClusterIP" {
			fmt.Fprintf(&b, "  externalTrafficPolicy: %s\n", s.extTraffic)
		}
		if s.intLocal {
			b.WriteString("  internalTrafficPolicy: Local\n")
		}
		if len(s.externalIPs) > 0 {
			fmt.Fprintf(&b, "  externalIPs: [%s]\n", strings.Join(s.externalIPs, ", "))
		}
		if len(s.sourceRanges) > 0 {
			fmt.Fprintf(&b, "  loadBalancerSourceRanges: [%s]\n", strings.Join(s.sourceRanges, ", "))
		}
		fmt.Fprintf(&b, "  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: http%s}\n", nodePort(s.nodePorts[0]))
		fmt.Fprintf(&b, "  - {name: udp, port: %d, protocol: UDP, targetPort: %d%s}\n", sandbox.PodPort, sandbox.PodPort, nodePort(s.nodePorts[1]))
		if len(s.lbIPs) > 0 {
			b.WriteString("status:\n  loadBalancer:\n    ingress:\n")
			for _, ip := range s.lbIPs {
				fmt.Fprintf(&b, "    - ip: %s\n", ip)
			}
		}
		docs = append(docs, b.String())
		if len(s.pods) > 0 {
			docs = append(docs, sandbox.SliceYAML(s.name, false, sandbox.EndpointPorts, s.pods),
				sandbox.SliceYAML(s.name, true, sandbox.EndpointPorts, s.pods))
		}
	}
	return strings.Join(docs, "---\n")
}

func nodePort(p int) string {
	if p == 0 {
		return ""
	}
	return fmt.Sprintf(", nodePort: %d", p)
}

// Cases are the rows, each in IPv4 and IPv6.
func Cases(t sandbox.Topology) []Case {
	node1 := t.Nodes[0]
	names := func(ps []sandbox.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	var all, near []string
	for _, s := range services(t) {
		if s.name == "flows-all" {
			all = names(s.pods)
		}
	}
	for _, p := range t.EchoBackends() {
		if p.Node == node1.Name {
			near = append(near, p.Name)
		}
	}
	var out []Case
	for fam, fname := range []string{"IPv4", "IPv6"} {
		ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
		svc := func(name string) netip.Addr {
			for _, s := range services(t) {
				if s.name == name {
					return ip(s.clusterIPs[fam])
				}
			}
			panic(name)
		}
		nodeIP := node1.IP4
		if fam == 1 {
			nodeIP = node1.IP6
		}
		at := netip.AddrPortFrom
		pp := uint16(sandbox.PodPort)
		rows := []Case{
			{Name: "pod -> ClusterIP: every ready endpoint", Proto: "tcp", To: at(svc("flows-all"), 80), Want: all},
			{Name: "pod -> ClusterIP: every ready endpoint", Proto: "udp", To: at(svc("flows-all"), pp), Want: all},
			{Name: "pod -> ClusterIP without endpoints: REJECT", Proto: "tcp", To: at(svc("flows-empty"), 80), Verdict: Reject},
			{Name: "pod -> ClusterIP without endpoints: REJECT", Proto: "udp", To: at(svc("flows-empty"), pp), Verdict: Reject},
			{Name: "pod -> ClusterIP, internalTrafficPolicy Local: this node's endpoints", Proto: "tcp", To: at(svc("flows-itp"), 80), Want: near},
			{Name: "pod -> ClusterIP, internalTrafficPolicy Local, none here: DROP", Proto: "tcp", To: at(svc("flows-itp-far"), 80), Verdict: Drop,
				Control: "pod -> ClusterIP, internalTrafficPolicy Local: this node's endpoints"},
			{Name: "pod -> NodePort of its node: every ready endpoint", Proto: "tcp", To: at(nodeIP, 30180), Want: all},
			{Name: "external -> NodePort, externalTrafficPolicy Cluster: every endpoint, masqueraded", External: true, Proto: "tcp", To: at(nodeIP, 30180), Want: all, SNAT: true},
			{Name: "external -> NodePort, externalTrafficPolicy Cluster: every endpoint, masqueraded", External: true, Proto: "udp", To: at(nodeIP, 30181), Want: all, SNAT: true},
			{Name: "external -> NodePort without endpoints: REJECT", External: true, Proto: "tcp", To: at(nodeIP, 30182), Verdict: Reject},
			{Name: "external -> NodePort without endpoints: REJECT", External: true, Proto: "udp", To: at(nodeIP, 30183), Verdict: Reject},
			{Name: "external -> NodePort, externalTrafficPolicy Local: this node's endpoints, client kept", External: true, Proto: "tcp", To: at(nodeIP, 30184), Want: near},
			{Name: "external -> NodePort, externalTrafficPolicy Local, none here: DROP", External: true, Proto: "tcp", To: at(nodeIP, 30186), Verdict: Drop,
				Control: "external -> NodePort, externalTrafficPolicy Local: this node's endpoints, client kept"},
			{Name: "external -> ExternalIP: every endpoint, masqueraded", External: true, Proto: "tcp", To: at(ip(externalIP[fam]), 80), Want: all, SNAT: true},
			{Name: "external -> LoadBalancer IP: every endpoint, masqueraded", External: true, Proto: "tcp", To: at(ip(lbIP[fam]), 80), Want: all, SNAT: true},
			{Name: "external -> LoadBalancer IP, outside loadBalancerSourceRanges: DROP", External: true, Proto: "tcp", To: at(ip(walledIP[fam]), 80), Verdict: Drop,
				Control: "external -> LoadBalancer IP: every endpoint, masqueraded"},
		}
		full := map[string]string{}
		for i, r := range rows {
			rows[i].Name = fmt.Sprintf("%s %s %s %s", fname, r.Proto, r.To, r.Name)
			full[r.Name] = rows[i].Name
		}
		for _, r := range rows {
			if r.Control != "" {
				r.Control = full[r.Control]
			}
			out = append(out, r)
		}
	}
	return out
}

// Controls checks, as the table runs, that every Drop row's control row
// ran before it on the same client, protocol and family, and delivered.
type Controls struct {
	answered map[string]Case
}

// Answered records a row that delivered.
func (c *Controls) Answered(r Case) {
	if c.answered == nil {
		c.answered = map[string]Case{}
	}
	c.answered[r.Name] = r
}

// Check says what is wrong with a Drop row's control ("" if nothing).
func (c *Controls) Check(r Case) string {
	ctl, ok := c.answered[r.Control]
	switch {
	case r.Control == "":
		return "a DROP row without a control row (a drop proves nothing until the same path is shown delivering)"
	case !ok:
		return "control row " + r.Control + " did not run before it, or did not deliver"
	case ctl.External != r.External || ctl.Proto != r.Proto || ctl.To.Addr().Is6() != r.To.Addr().Is6():
		return "control row " + r.Control + " is not the same client, protocol and family"
	}
	return ""
}
