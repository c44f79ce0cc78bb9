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

// ScaleSpread is where a ScaleCluster's changed namespace (ns1) stands:
// SpreadSame, it holds its share of the policies (a change's entries
// grow with them); SpreadOther, it holds at most 10 and the others the
// rest (a change's own work stays the same: its cost should too).
type ScaleSpread string

const (
	SpreadSame  ScaleSpread = "same"
	SpreadOther ScaleSpread = "other"
)

// ScaleClusterSpread is ScaleCluster with ns1's policies cut to 10 for
// SpreadOther.
func ScaleClusterSpread(namespaces, podsPerNS, policiesPerNS int, nodes []string, spread ScaleSpread) *Cluster {
	cl := ScaleCluster(namespaces, podsPerNS, policiesPerNS, nodes)
	if spread == SpreadOther {
		for k := 10; k < policiesPerNS; k++ {
			cl.SetPolicy(model.PolicyID{Namespace: "ns1", Name: fmt.Sprintf("pol%d", k)}, nil)
		}
	}
	return cl
}

// ScaleChange is one kind of the benchmarks' changes to a ScaleCluster
// whose first node is the compiled one: Make changes the cluster the
// i-th time and returns what Compiler.Update takes.
type ScaleChange struct {
	Name string
	Make func(cl *Cluster, i int) (pods []model.PodID, namespaces []string, policies []model.PolicyID)
}

// ScaleChanges are the changes the benchmarks time:
//   - label: a pod of the compiled node relabelled (it leaves the
//     policies selecting its old labels and joins those selecting the
//     new);
//   - class: a pod of the other node given a label no other pod has,
//     and then back: a class made and emptied each time (the policies
//     whose peers match it gain and lose its entries);
//   - policy: a policy's rule rewritten to another peer and port.
func ScaleChanges() []ScaleChange {
	return []ScaleChange{
		{"label", func(cl *Cluster, i int) ([]model.PodID, []string, []model.PolicyID) {
			id := model.PodID{Namespace: "ns1", Name: "p2"}
			p := *cl.Pods[id]
			p.Labels = map[string]string{"app": fmt.Sprintf("a%d", i%5), "tier": "t0"}
			cl.SetPod(id, &p)
			return []model.PodID{id}, nil, nil
		}},
		{"class", func(cl *Cluster, i int) ([]model.PodID, []string, []model.PolicyID) {
			id := model.PodID{Namespace: "ns1", Name: "p1"}
			p := *cl.Pods[id]
			p.Labels = map[string]string{"app": "a1", "tier": "t1"}
			if i%2 == 0 {
				p.Labels["role"] = "prober"
			}
			cl.SetPod(id, &p)
			return []model.PodID{id}, nil, nil
		}},
		{"policy", func(cl *Cluster, i int) ([]model.PodID, []string, []model.PolicyID) {
			id := model.PolicyID{Namespace: "ns1", Name: "pol0"}
			pol := *cl.Policies[id]
			from, _ := labels.Parse(fmt.Sprintf("app=a%d", i%5))
			pol.Ingress = []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: from}},
				Ports: []model.PolicyPort{{Proto: model.TCP, Port: uint16(20000 + i%1000)}}}}
			cl.SetPolicy(id, &pol)
			return nil, nil, []model.PolicyID{id}
		}},
	}
}
