package policy

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// ScaleCluster is the benchmark's cluster: pods per namespace spread over
// nodes (addresses 10.200.<ns>.<n>, outside the sandbox's pod CIDRs), and
// policies per namespace, each selecting the pods of one app and allowing
// another app of the namespace (one in four: of any namespace with a team
// label), on a numbered port, a port range or a named port; one in ten
// also allows an IP block with an except.
func ScaleCluster(namespaces, podsPerNS, policiesPerNS int, nodes []string) *Cluster {
	cl := NewCluster()
	for n := 0; n < namespaces; n++ {
		ns := fmt.Sprintf("ns%d", n)
		cl.SetNamespace(ns, &model.Namespace{Name: ns, Labels: map[string]string{"team": fmt.Sprintf("t%d", n%3)}})
		for i := 0; i < podsPerNS; i++ {
			p := &model.Pod{ID: model.PodID{Namespace: ns, Name: fmt.Sprintf("p%d", i)},
				Labels: map[string]string{"app": fmt.Sprintf("a%d", i%5), "tier": fmt.Sprintf("t%d", i%2)},
				Node:   nodes[i%len(nodes)],
				IPs:    []netip.Addr{netip.AddrFrom4([4]byte{10, 200, byte(n), byte(i + 1)})},
				Ports:  []model.NamedPort{{Name: "http", Port: 8080, Proto: model.TCP}}}
			cl.SetPod(p.ID, p)
		}
		for k := 0; k < policiesPerNS; k++ {
			sel, _ := labels.Parse(fmt.Sprintf("app=a%d", k%5))
			from, _ := labels.Parse(fmt.Sprintf("app=a%d", (k+1)%5))
			team, _ := labels.Parse(fmt.Sprintf("team=t%d", k%3))
			peer := model.PolicyPeer{Pods: from}
			if k%4 == 0 {
				peer.Namespaces = team
			}
			port := model.PolicyPort{Proto: model.TCP, Port: uint16(1000 + k)}
			switch k % 3 {
			case 1:
				port.EndPort = port.Port + 10
			case 2:
				port = model.PolicyPort{Proto: model.TCP, Name: "http"}
			}
			rule := model.PolicyRule{Peers: []model.PolicyPeer{peer}, Ports: []model.PolicyPort{port}}
			if k%10 == 0 {
				rule.Peers = append(rule.Peers, model.PolicyPeer{Block: &model.IPBlock{
					CIDR:   netip.MustParsePrefix(fmt.Sprintf("192.168.%d.0/24", k%256)),
					Except: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("192.168.%d.128/25", k%256))}}})
			}
			id := model.PolicyID{Namespace: ns, Name: fmt.Sprintf("pol%d", k)}
			cl.SetPolicy(id, &model.Policy{ID: id, Pods: sel, IsolatesIngress: true, Ingress: []model.PolicyRule{rule}})
		}
	}
	return cl
}
