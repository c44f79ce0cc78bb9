package adversarial

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestForgedDSROptionNeverReachesAPod: the host outside, routed to a
// pod's address through the pod's node (native routing, nodePortMode
// snat), sends it a SYN: it arrives (the positive control). The same SYN
// carrying netcube's DSR option, naming a frontend of the host's
// choosing, never does (captured in the pod): honoured, it would make the
// pod's replies leave from that forged address and write a reply entry
// for it. A DSR option is honoured only with nodePortMode dsr or hybrid,
// and only from another node of the cluster.
func TestForgedDSROptionNeverReachesAPod(t *testing.T) {
	sb := up(t, "adv-dsr", sandbox.Config{Nodes: 2, PodsPerNode: 1})
	top := sb.Topology
	node, host := top.Nodes[0], top.External
	pod := node.Pods[0]
	if err := top.RouteFromExternal(netip.PrefixFrom(pod.IP4, 32), node.Name); err != nil {
		t.Fatal(err)
	}
	port := uint16(44000)
	reaches := func(marker string, dsr bool) int {
		port++
		syn := pkt.TCP(netip.AddrPortFrom(host.IP4, port), netip.AddrPortFrom(pod.IP4, sandbox.PodPort), pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, []byte(marker))
		if dsr {
			syn = pkt.WithDSR(syn, netip.MustParseAddrPort("10.96.0.1:443")) // the cluster's API Service, say
		}
		return capture(t, sb, pod.Name, "eth0", marker, func() { send(t, sb, host.Name, "", syn) }).Frames
	}
	deadline := time.Now().Add(20 * time.Second)
	for reaches("adv-dsr-plain", false) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("positive control: the host's plain SYN never reached %s at %s", pod.Name, pod.IP4)
		}
	}
	for range 3 {
		if n := reaches("adv-dsr-forged", true); n != 0 {
			t.Errorf("the host's SYN with a forged DSR frontend reached %s (%d frames)", pod.Name, n)
		}
	}
}
