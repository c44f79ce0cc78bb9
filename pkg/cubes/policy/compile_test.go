package policy

import (
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// TestPortPrefixes: a range becomes the fewest aligned prefixes covering
// exactly its ports.
func TestPortPrefixes(t *testing.T) {
	for _, c := range []struct {
		lo, hi uint16
		want   int
	}{{80, 80, 1}, {80, 81, 1}, {80, 82, 2}, {0, 65535, 1}, {1, 65535, 16}, {1024, 2047, 1}, {5000, 5010, 3}} {
		got := slices.Collect(portPrefixes(c.lo, c.hi))
		if len(got) != c.want {
			t.Errorf("%d-%d: %d prefixes %v, want %d", c.lo, c.hi, len(got), got, c.want)
		}
		covered := map[uint32]bool{}
		for _, p := range got {
			size := uint32(1) << (16 - p.bits)
			for port := uint32(p.port); port < uint32(p.port)+size; port++ {
				covered[port] = true
			}
		}
		for port := uint32(0); port <= 65535; port++ {
			if in := port >= uint32(c.lo) && port <= uint32(c.hi); covered[port] != in {
				t.Fatalf("%d-%d: port %d covered %v", c.lo, c.hi, port, covered[port])
			}
		}
	}
}

// TestHostAndIdentities: traffic from this node reaches an isolated pod;
// pods with the same labels share an identity unless an IP block tells
// them apart; a deny-all isolates both directions.
func TestHostAndIdentities(t *testing.T) {
	node := netip.MustParseAddr("172.30.0.11")
	a := &model.Pod{ID: model.PodID{Namespace: "x", Name: "a"}, Labels: map[string]string{"app": "w"}, IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5")}}
	b := &model.Pod{ID: model.PodID{Namespace: "x", Name: "b"}, Labels: map[string]string{"app": "w"}, IPs: []netip.Addr{netip.MustParseAddr("10.244.2.5")}}
	cl := NewCluster()
	cl.SetPod(a.ID, a)
	cl.SetPod(b.ID, b)
	c := NewCompiler()
	tb := c.Compile(cl, func(*model.Pod) bool { return true }, []netip.Addr{node})
	if tb.PeerOf(a.IPs[0]) != tb.PeerOf(b.IPs[0]) {
		t.Error("same namespace and labels, no IP block: want one identity")
	}
	if !tb.Allows(a.IPs[0], b.IPs[0], model.TCP, 80) {
		t.Fatal("no policy: want allowed") // the positive control
	}
	denyAll := &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "deny"}, Pods: labels.Everything(),
		IsolatesIngress: true, IsolatesEgress: true}
	cl.SetPolicy(denyAll.ID, denyAll)
	tb = c.Compile(cl, func(*model.Pod) bool { return true }, []netip.Addr{node})
	if tb.Allows(a.IPs[0], b.IPs[0], model.TCP, 80) || tb.Allows(b.IPs[0], a.IPs[0], model.UDP, 53) {
		t.Error("deny-all: want pod to pod denied")
	}
	if !tb.Allows(node, a.IPs[0], model.TCP, 8080) {
		t.Error("from this node (kubelet's probes): want allowed under deny-all")
	}
	block := &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "block"}, Pods: labels.Everything(), IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Block: &model.IPBlock{CIDR: netip.MustParsePrefix("10.244.1.0/24")}}}}}}
	cl.SetPolicy(block.ID, block)
	tb = c.Compile(cl, func(*model.Pod) bool { return true }, []netip.Addr{node})
	if tb.PeerOf(a.IPs[0]) == tb.PeerOf(b.IPs[0]) {
		t.Error("an IP block holding one pod of two: want two identities")
	}
	cl.SetPolicy(denyAll.ID, nil)
	tb = c.Compile(cl, func(*model.Pod) bool { return true }, []netip.Addr{node})
	if !tb.Allows(a.IPs[0], b.IPs[0], model.TCP, 80) || tb.Allows(b.IPs[0], a.IPs[0], model.TCP, 80) {
		t.Error("ingress from 10.244.1.0/24 only: want a->b allowed, b->a denied")
	}
}

// TestIngressNamedPortWithoutPeers: an ingress rule's named port is the
// selected pod's own. So a rule whose peers match no pod yet is not
// warned about when the pod has the port (one it lacks is), and the
// first peer pod is allowed to that port by adding its entries alone,
// without compiling the policy again.
func TestIngressNamedPortWithoutPeers(t *testing.T) {
	server := &model.Pod{ID: model.PodID{Namespace: "x", Name: "server"}, Labels: map[string]string{"app": "web"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5")}, Ports: []model.NamedPort{{Name: "http", Port: 8080, Proto: model.TCP}}}
	client := &model.Pod{ID: model.PodID{Namespace: "x", Name: "client"}, Labels: map[string]string{"app": "client"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.2.7")}}
	fromClients := func(name, port string) *model.Policy {
		sel, _ := labels.Parse("app=web")
		peer, _ := labels.Parse("app=client")
		return &model.Policy{ID: model.PolicyID{Namespace: "x", Name: name}, Pods: sel, IsolatesIngress: true,
			Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: peer}}, Ports: []model.PolicyPort{{Proto: model.TCP, Name: port}}}}}
	}
	cl := NewCluster()
	cl.SetPod(server.ID, server)
	http, grpc := fromClients("http", "http"), fromClients("grpc", "grpc")
	cl.SetPolicy(http.ID, http)
	cl.SetPolicy(grpc.ID, grpc)
	c := NewCompiler()
	local := func(p *model.Pod) bool { return p.Node == "" }
	tb := c.Compile(cl, local, nil)
	var warned []model.PolicyID
	for _, w := range tb.Warnings {
		warned = append(warned, w.Policy)
	}
	if len(warned) != 1 || warned[0] != grpc.ID {
		t.Fatalf("warnings for %v, want for %v alone (its port is not the server's; http is)", warned, grpc.ID)
	}
	before := c.policies[http.ID].bySet.of(c.pods[server.ID].ruleSet)

	client.Node = "elsewhere"
	cl.SetPod(client.ID, client)
	c.Update([]model.PodID{client.ID}, nil, nil)
	if !tb.Allows(client.IPs[0], server.IPs[0], model.TCP, 8080) {
		t.Fatal("the first client: want allowed to the server's http port, 8080")
	}
	if tb.Allows(client.IPs[0], server.IPs[0], model.TCP, 8081) {
		t.Error("the first client: want denied on 8081, a port no rule names")
	}
	if after := c.policies[http.ID].bySet.of(c.pods[server.ID].ruleSet); after != before {
		t.Error("the first client: the policy was compiled again, want its entries added to the selection it had")
	}
}
