package policy_test

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestTiersInTheDatapath: the kernel's programs judge by a tier set's
// entries as the compiler means them, packets in and out: an Admin Deny
// drops what a NetworkPolicy would allow, an Admin Accept lets in what it
// would not, a Pass hands over to it, a Baseline Deny applies only where
// no NetworkPolicy isolates, and the maps (MapsAllow) say what the
// programs do. Both families.
func TestTiersInTheDatapath(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	ns := func(name string) *model.Namespace {
		return &model.Namespace{Name: name, Labels: map[string]string{"house": name}}
	}
	mk := func(namespace, name string, v4, v6 string) *model.Pod {
		return &model.Pod{ID: model.PodID{Namespace: namespace, Name: name}, Labels: map[string]string{"app": name},
			IPs: []netip.Addr{netip.MustParseAddr(v4), netip.MustParseAddr(v6)}}
	}
	server := mk("gryffindor", "server", "10.244.1.5", "fd00:10:244:1::5")
	friend := mk("hufflepuff", "friend", "10.244.1.6", "fd00:10:244:1::6")
	rival := mk("slytherin", "rival", "10.244.1.7", "fd00:10:244:1::7")
	cl := policy.NewCluster()
	for _, n := range []string{"gryffindor", "hufflepuff", "slytherin"} {
		cl.SetNamespace(n, ns(n))
	}
	for _, p := range []*model.Pod{server, friend, rival} {
		cl.SetPod(p.ID, p)
	}
	comp := policy.NewCompiler()
	var have *policy.Tables
	apply := func() {
		t.Helper()
		want := comp.Compile(cl, func(*model.Pod) bool { return true }, nil)
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		have = want
	}
	house := func(h string) []model.PolicyPeer {
		return []model.PolicyPeer{{Namespaces: labels.SelectorFromSet(labels.Set{"house": h}), Pods: labels.Everything()}}
	}
	progs := dp.Programs()
	port := uint16(41000)
	// reaches sends a new connection's SYN from src to the server's
	// 8080 through both programs (sender's egress, receiver's ingress).
	reaches := func(src *model.Pod, fam int) bool {
		t.Helper()
		port++
		syn := pkt.TCP(netip.AddrPortFrom(src.IPs[fam], port), netip.AddrPortFrom(server.IPs[fam], 8080), pkt.TCPOpts{SYN: true, Seq: 1}, nil)
		passed := runProg(t, progs.FromPod, syn) != tcShot && runProg(t, progs.ToPod, syn) != tcShot
		if m, err := policy.MapsAllow(dp.Maps(), src.IPs[fam], server.IPs[fam], model.TCP, 8080); err != nil || m != passed {
			t.Errorf("%s -> server: the programs say %v, the maps (MapsAllow) %v (%v)", src.ID, passed, m, err)
		}
		return passed
	}
	gryffindor := labels.SelectorFromSet(labels.Set{"house": "gryffindor"})
	np := &model.Policy{ID: model.PolicyID{Namespace: "gryffindor", Name: "friends-only"}, Pods: labels.Everything(), IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Namespaces: labels.SelectorFromSet(labels.Set{"house": "hufflepuff"}), Pods: labels.Everything()}}}}}
	deny := &model.ClusterPolicy{Name: "deny-friends", Tier: model.AdminTier, Priority: 20, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Deny, Peers: house("hufflepuff"), Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8000, EndPort: 8999}}}}}
	accept := &model.ClusterPolicy{Name: "accept-rival", Tier: model.AdminTier, Priority: 10, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Accept, Peers: house("slytherin"), Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8080}}}}}
	pass := &model.ClusterPolicy{Name: "pass-friends", Tier: model.AdminTier, Priority: 1, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Pass, Peers: house("hufflepuff")}}}
	baseline := &model.ClusterPolicy{Name: "baseline-deny", Tier: model.BaselineTier, Priority: 1, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Deny, Peers: house("slytherin")}}}
	for fam := range 2 {
		for _, p := range []*model.Policy{np} {
			cl.SetPolicy(p.ID, nil)
		}
		for _, n := range []string{deny.Name, accept.Name, pass.Name, baseline.Name} {
			cl.SetClusterPolicy(n, nil)
		}
		apply()
		if !reaches(friend, fam) || !reaches(rival, fam) {
			t.Fatal("no policy: a connection dropped") // the positive control
		}
		cl.SetPolicy(np.ID, np)
		apply()
		if !reaches(friend, fam) || reaches(rival, fam) {
			t.Fatal("NetworkPolicy of hufflepuff only: want friend in, rival out")
		}
		cl.SetClusterPolicy(deny.Name, deny)
		cl.SetClusterPolicy(accept.Name, accept)
		apply()
		if reaches(friend, fam) {
			t.Error("Admin Deny of hufflepuff on 8000-8999: the friend's connection to 8080 passed")
		}
		if !reaches(rival, fam) {
			t.Error("Admin Accept of slytherin on 8080: the rival's connection was dropped (the NetworkPolicy must not be asked)")
		}
		cl.SetClusterPolicy(pass.Name, pass)
		apply()
		if !reaches(friend, fam) {
			t.Error("Admin Pass of hufflepuff before the Deny: NetworkPolicy decides, and allows it")
		}
		cl.SetPolicy(np.ID, nil)
		cl.SetClusterPolicy(accept.Name, nil)
		cl.SetClusterPolicy(baseline.Name, baseline)
		apply()
		if reaches(rival, fam) || !reaches(friend, fam) {
			t.Error("no NetworkPolicy, Baseline Deny of slytherin: want rival out, friend (passed, no NetworkPolicy, no baseline rule) in")
		}
	}
	var drops uint64
	if err := cube.Each(dp.Maps(), policy.MapDrops, func(k datapath.PolicyDropKey, v []uint64) bool {
		for _, n := range v {
			drops += n
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if drops == 0 {
		t.Error("connections denied, none counted in pol_drops")
	}
}
