package policy_test

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestIPv6BlockAdmitsNoIPv4: the datapath keys IPv4 addresses v4-mapped in
// its 16-byte prefix map, where ::/0 holds them all; an ipBlock of ::/0
// (or any IPv6 cidr holding ::ffff:0:0/96) still admits only IPv6
// clients. Rows: the policy's cidr, a client outside the cluster, and
// whether the isolated pod's ingress lets the client's SYN in (BPF_PROG_RUN
// of to_pod). Each refusal follows an admission on the same path.
func TestIPv6BlockAdmitsNoIPv4(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := datapath.Load(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	server := &model.Pod{ID: model.PodID{Namespace: "x", Name: "server"}, Labels: map[string]string{"app": "server"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")}}
	cl := policy.NewCluster()
	cl.SetPod(server.ID, server)
	comp := policy.NewCompiler()
	var have *policy.Tables
	sel, _ := labels.Parse("app=server")
	id := model.PolicyID{Namespace: "x", Name: "blocks"}
	v4, v6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	for i, c := range []struct {
		cidrs  []string
		client netip.Addr
		admit  bool
	}{
		{[]string{"0.0.0.0/0"}, v4, true}, // the controls: an IPv4 client admitted on this path
		{[]string{"::/0"}, v6, true},
		{[]string{"::/0"}, v4, false},
		{[]string{"::/0", "192.0.2.0/24"}, v4, true},
		{[]string{"::/0", "198.51.100.0/24"}, v4, false},
		{[]string{"::/64"}, v4, false}, // does not hold ::ffff:0:0/96: nothing to carve
		{[]string{"::/80"}, v4, false},
		{[]string{"::ffff:0:0/96"}, v4, true}, // the mapped block is IPv4 (0.0.0.0/0)
		// An IPv6 packet from a v4-mapped source (never legitimate on the
		// wire) is keyed as the IPv4 client it names: refused.
		{[]string{"::/0"}, netip.MustParseAddr("::ffff:192.0.2.1"), false},
	} {
		var peers []model.PolicyPeer
		for _, s := range c.cidrs {
			p := netip.MustParsePrefix(s)
			if p.Addr().Is4In6() { // as pkg/k8s reads it
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			peers = append(peers, model.PolicyPeer{Block: &model.IPBlock{CIDR: p}})
		}
		cl.SetPolicy(id, &model.Policy{ID: id, Pods: sel, IsolatesIngress: true, Ingress: []model.PolicyRule{{Peers: peers}}})
		want := comp.Compile(cl, func(*model.Pod) bool { return true }, nil)
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		have = want
		dst := server.IPs[0]
		if c.client.Is6() {
			dst = server.IPs[1]
		}
		syn := pkt.TCP(netip.AddrPortFrom(c.client, uint16(41000+i)), netip.AddrPortFrom(dst, 8080), pkt.TCPOpts{SYN: true, Seq: 1}, nil)
		if admitted := runProg(t, dp.Programs().ToPod, syn) != tcShot; admitted != c.admit {
			t.Errorf("ipBlocks %v, client %s: admitted %v, want %v", c.cidrs, c.client, admitted, c.admit)
		}
	}
}
