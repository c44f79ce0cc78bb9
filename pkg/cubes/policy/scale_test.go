package policy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// scaleCluster is the benchmark shape: 200 pods in 10 namespaces
// on 2 nodes, 1,000 policies (100 per namespace), each selecting the pods
// of one app and allowing another app of the namespace (or of any
// namespace with a team label), on a numbered port, a port range or a
// named port, and one in ten an IP block.
func scaleCluster() *policy.Cluster {
	cl := policy.NewCluster()
	for n := 0; n < 10; n++ {
		ns := fmt.Sprintf("ns%d", n)
		cl.SetNamespace(ns, &model.Namespace{Name: ns, Labels: map[string]string{"team": fmt.Sprintf("t%d", n%3)}})
		for i := 0; i < 20; i++ {
			p := &model.Pod{ID: model.PodID{Namespace: ns, Name: fmt.Sprintf("p%d", i)},
				Labels: map[string]string{"app": fmt.Sprintf("a%d", i%5), "tier": fmt.Sprintf("t%d", i%2)},
				Node:   fmt.Sprintf("node%d", 1+i%2),
				IPs:    []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(n), byte(i + 1)})},
				Ports:  []model.NamedPort{{Name: "http", Port: 8080, Proto: model.TCP}}}
			cl.SetPod(p.ID, p)
		}
		for k := 0; k < 100; k++ {
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
					CIDR: netip.MustParsePrefix(fmt.Sprintf("192.168.%d.0/24", k)), Except: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("192.168.%d.128/25", k))}}})
			}
			id := model.PolicyID{Namespace: ns, Name: fmt.Sprintf("pol%d", k)}
			cl.SetPolicy(id, &model.Policy{ID: id, Pods: sel, IsolatesIngress: true, Ingress: []model.PolicyRule{rule}})
		}
	}
	return cl
}

// TestPolicyChangeLatency prints how long a change takes from the event to
// the datapath (compile and write the difference into the kernel's maps)
// at the benchmark's scale, and the maps' size per policy. A figure, not a
// timed assertion: `go test ./pkg/cubes/policy -run PolicyChangeLatency -v`.
func TestPolicyChangeLatency(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := datapath.Load(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	cl := scaleCluster()
	c := policy.NewCompiler()
	local := func(p *model.Pod) bool { return p.Node == "node1" }
	host := []netip.Addr{netip.MustParseAddr("172.30.0.11")}
	start := time.Now()
	have := c.Compile(cl, local, host)
	compiled := time.Since(start)
	if err := policy.Sync(dp.Maps(), nil, have); err != nil {
		t.Fatal(err)
	}
	t.Logf("initial: %d identities, %d endpoints, %d entries; compile %v, total %v",
		len(have.Peers), len(have.Endpoints), len(have.Entries), compiled, time.Since(start))
	var lat, comp []time.Duration
	for i := 0; i < 100; i++ {
		// One pod's label changes (the change that touches most).
		p := *cl.Pods[model.PodID{Namespace: "ns1", Name: "p3"}]
		p.Labels = map[string]string{"app": fmt.Sprintf("a%d", i%5), "tier": "t1"}
		cl.SetPod(p.ID, &p)
		start := time.Now()
		want := c.Compile(cl, local, host)
		comp = append(comp, time.Since(start))
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		have = want
	}
	slices.Sort(lat)
	slices.Sort(comp)
	t.Logf("label change -> datapath: p50 %v, p99 %v (target < 10 ms); of which compiling p50 %v, p99 %v",
		lat[len(lat)/2], lat[len(lat)*99/100], comp[len(comp)/2], comp[len(comp)*99/100])
	// pol_entries' key and value, and a trie node's overhead (about 40
	// bytes in the kernel's LPM trie), per policy.
	t.Logf("policy entries per policy: %.1f (about %d bytes each in the kernel)", float64(len(have.Entries))/1000, 20+1+40)
}
