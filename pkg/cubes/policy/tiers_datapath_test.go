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
	// reachesOver sends a new flow's first packet (a SYN, a datagram, an
	// INIT) from src to the server's port through both programs
	// (sender's egress, receiver's ingress).
	reachesOver := func(src *model.Pod, fam int, proto model.Proto, dport uint16) bool {
		t.Helper()
		port++
		from, to := netip.AddrPortFrom(src.IPs[fam], port), netip.AddrPortFrom(server.IPs[fam], dport)
		first := map[model.Proto][]byte{
			model.TCP:  pkt.TCP(from, to, pkt.TCPOpts{SYN: true, Seq: 1}, nil),
			model.UDP:  pkt.UDP(from, to, []byte("x")),
			model.SCTP: pkt.SCTPInit(from, to),
		}[proto]
		passed := runProg(t, progs.FromPod, first) != tcShot && runProg(t, progs.ToPod, first) != tcShot
		if m, err := policy.MapsAllow(dp.Maps(), src.IPs[fam], server.IPs[fam], proto, dport); err != nil || m != passed {
			t.Errorf("%s -> server %v/%d: the programs say %v, the maps (MapsAllow) %v (%v)", src.ID, proto, dport, passed, m, err)
		}
		return passed
	}
	reaches := func(src *model.Pod, fam int) bool { t.Helper(); return reachesOver(src, fam, model.TCP, 8080) }
	gryffindor := labels.SelectorFromSet(labels.Set{"house": "gryffindor"})
	np := &model.Policy{ID: model.PolicyID{Namespace: "gryffindor", Name: "friends-only"}, Pods: labels.Everything(), IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Namespaces: labels.SelectorFromSet(labels.Set{"house": "hufflepuff"}), Pods: labels.Everything()}}}}}
	deny := &model.ClusterPolicy{Name: "deny-friends", Tier: model.AdminTier, Priority: 20, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Deny, Peers: house("hufflepuff"), Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8000, EndPort: 8999}}}}}
	accept := &model.ClusterPolicy{Name: "accept-rival", Tier: model.AdminTier, Priority: 10, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Accept, Peers: house("slytherin"), Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8080}}}}}
	pass := &model.ClusterPolicy{Name: "pass-friends", Tier: model.AdminTier, Priority: 1, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Pass, Peers: house("hufflepuff")}}}
	// The suite's SCTP tests cannot run on this kernel (no SCTP sockets);
	// the programs judge SCTP packets all the same.
	sctpDeny := &model.ClusterPolicy{Name: "deny-friends-sctp", Tier: model.AdminTier, Priority: 0, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Deny, Peers: house("hufflepuff"), Ports: []model.PolicyPort{{Proto: model.SCTP, Port: 9003}}}}}
	sctpAccept := &model.ClusterPolicy{Name: "accept-rival-sctp", Tier: model.AdminTier, Priority: 0, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Accept, Peers: house("slytherin"), Ports: []model.PolicyPort{{Proto: model.SCTP, Port: 9003}}}}}
	baseline := &model.ClusterPolicy{Name: "baseline-deny", Tier: model.BaselineTier, Priority: 1, Namespaces: gryffindor, Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Deny, Peers: house("slytherin")}}}
	for fam := range 2 {
		for _, p := range []*model.Policy{np} {
			cl.SetPolicy(p.ID, nil)
		}
		for _, n := range []string{deny.Name, accept.Name, pass.Name, baseline.Name, sctpDeny.Name, sctpAccept.Name} {
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
		if !reachesOver(friend, fam, model.SCTP, 9003) || reachesOver(rival, fam, model.SCTP, 9003) {
			t.Fatal("before the SCTP policies: want the friend's SCTP in (passed), the rival's out (baseline)") // their controls
		}
		cl.SetClusterPolicy(sctpDeny.Name, sctpDeny)
		cl.SetClusterPolicy(sctpAccept.Name, sctpAccept)
		apply()
		if reachesOver(friend, fam, model.SCTP, 9003) {
			t.Error("Admin Deny of hufflepuff over SCTP 9003: the friend's INIT passed")
		}
		if !reachesOver(friend, fam, model.UDP, 9003) || !reaches(friend, fam) {
			t.Error("Admin Deny over SCTP 9003: the friend's UDP 9003 or TCP 8080 was dropped")
		}
		if !reachesOver(rival, fam, model.SCTP, 9003) {
			t.Error("Admin Accept of slytherin over SCTP 9003: the rival's INIT was dropped")
		}
		if reachesOver(rival, fam, model.UDP, 9003) || reachesOver(rival, fam, model.SCTP, 9004) {
			t.Error("Admin Accept over SCTP 9003 only: the rival's UDP 9003 or SCTP 9004 passed the Baseline Deny")
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
