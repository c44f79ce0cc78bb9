package adversarial

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestForgedSourcesNeverReachAPod: a pod (CAP_NET_RAW, as the runtime's
// default gives it) sends raw packets posing as another pod of its node,
// as its node, and as a host outside; none reaches the target pod on the
// other node, for IPv4 and IPv6, while the same packet from the pod's own
// address does (the positive control, sent first).
func TestForgedSourcesNeverReachAPod(t *testing.T) {
	sb := up(t, "adv-src", sandbox.Config{Nodes: 2, PodsPerNode: 2})
	top := sb.Topology
	attacker, posed, target := top.Nodes[0].Pods[0], top.Nodes[0].Pods[1], top.Nodes[1].Pods[0]
	node := top.Nodes[0]
	for _, fam := range []struct {
		name     string
		own, dst netip.Addr
		poses    map[string]netip.Addr
	}{
		{"IPv4", attacker.IP4, target.IP4, map[string]netip.Addr{
			"another pod": posed.IP4, "its node": node.IP4, "a host outside": netip.MustParseAddr("192.0.2.77")}},
		{"IPv6", attacker.IP6, target.IP6, map[string]netip.Addr{
			"another pod": posed.IP6, "its node": node.IP6, "a host outside": netip.MustParseAddr("2001:db8::77")}},
	} {
		t.Run(fam.name, func(t *testing.T) {
			marker := "netcube-own-source-" + fam.name
			got := capture(t, sb, target.Name, "eth0", marker, func() {
				send(t, sb, attacker.Name, "", pkt.UDP(netip.AddrPortFrom(fam.own, 40000), netip.AddrPortFrom(fam.dst, 9), []byte(marker)))
			})
			if got.Frames == 0 {
				t.Fatalf("positive control: the attacker's packet from its own address %s never reached %s", fam.own, target.Name)
			}
			for who, src := range fam.poses {
				marker := "netcube-forged-source-" + fam.name
				got := capture(t, sb, target.Name, "eth0", marker, func() {
					send(t, sb, attacker.Name, "", pkt.UDP(netip.AddrPortFrom(src, 40000), netip.AddrPortFrom(fam.dst, 9), []byte(marker)))
				})
				if got.Frames != 0 {
					t.Errorf("a packet posing as %s (%s) reached %s: %v", who, src, target.Name, got.First)
				}
			}
		})
	}
}
