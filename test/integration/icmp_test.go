package integration

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestICMPLeavesTheCluster: a pod pings and traceroutes hosts outside the
// cluster, IPv4 and IPv6, with the real clients (iputils ping, traceroute):
// its echo requests are masqueraded and the replies come back; the
// traceroute sees the node, the router beyond it and the far host, by
// the ICMP errors the router and the host send to the node, translated
// back to the pod; a packet too big for the router's next link gets
// fragmentation needed (packet too big), which reaches the pod's socket
// (ping prints it) and its kernel (the route to the far host learns the
// MTU). The positive control of each: a pod pings another node's pod,
// and a ping that fits passes the small link.
func TestICMPLeavesTheCluster(t *testing.T) {
	sb := upWith(t, "ti", sandbox.Config{})
	n1, n2 := sb.Topology.Nodes[0], sb.Topology.Nodes[1]
	client, remote := n1.Pods[0], n2.Pods[0]
	router, far, ext := sb.Topology.Router, sb.Topology.Far, sb.Topology.External

	ping := func(t *testing.T, dst netip.Addr, args ...string) (string, error) {
		t.Helper()
		out, err := sb.Output(client.Name, "ping", append([]string{"-n", "-c", "3", "-i", "0.2", "-W", "2", dst.String()}, args...)...)
		return string(out), err
	}
	for _, fam := range []struct {
		name                              string
		remote, router, far, ext, nodeOut netip.Addr
	}{
		{"IPv4", remote.IP4, router.IP4, far.IP4, ext.IP4, n1.IP4},
		{"IPv6", remote.IP6, router.IP6, far.IP6, ext.IP6, n1.IP6},
	} {
		t.Run(fam.name, func(t *testing.T) {
			// Positive control: inside the cluster, ping works as before.
			if out, err := ping(t, fam.remote); err != nil {
				t.Fatalf("ping another node's pod: %v\n%s", err, out)
			}
			// Outside the cluster: on the nodes' network, and beyond the router.
			for _, dst := range []netip.Addr{fam.ext, fam.far} {
				out, err := ping(t, dst)
				if err != nil || !strings.Contains(out, "3 received") {
					t.Errorf("ping %s from a pod: %v\n%s", dst, err, out)
				}
			}

			// traceroute, UDP probes (the far host answers port
			// unreachable) and ICMP echo probes (it answers the echo).
			for _, mode := range [][]string{nil, {"-I"}} {
				args := append([]string{"-n", "-q", "1", "-w", "2", "-m", "6"}, mode...)
				out, err := sb.Output(client.Name, "traceroute", append(args, fam.far.String())...)
				if err != nil {
					t.Errorf("traceroute %v %s: %v\n%s", mode, fam.far, err, out)
					continue
				}
				hops := traceHops(string(out))
				want := []string{"", fam.router.String(), fam.far.String()} // hop 1: the node, by the address its kernel picks
				if len(hops) != len(want) || hops[1] != want[1] || hops[2] != want[2] || hops[0] == "*" {
					t.Errorf("traceroute %v %s: hops %q, want [node %s %s]\n%s", mode, fam.far, hops, want[1], want[2], out)
				}
			}
		})
	}

	// PMTU discovery over the router's small link (FarMTU).
	for _, fam := range []struct {
		name   string
		far    netip.Addr
		hdr    int // IP + ICMP header bytes
		report *regexp.Regexp
	}{
		{"IPv4", far.IP4, 20 + 8, regexp.MustCompile(`Frag needed and DF set \(mtu = (\d+)\)|mtu=(\d+)`)},
		{"IPv6", far.IP6, 40 + 8, regexp.MustCompile(`Packet too big: mtu=(\d+)|mtu=(\d+)`)},
	} {
		t.Run("PMTU "+fam.name, func(t *testing.T) {
			fits := fmt.Sprint(sandbox.FarMTU - fam.hdr)
			if out, err := ping(t, fam.far, "-M", "do", "-s", fits); err != nil || !strings.Contains(out, "3 received") {
				t.Fatalf("a ping that fits the small link (%s bytes): %v\n%s", fits, err, out)
			}
			out, _ := ping(t, fam.far, "-M", "do", "-s", "1400") // no reply: it cannot pass
			m := fam.report.FindStringSubmatch(out)
			if m == nil || (m[1] != fmt.Sprint(sandbox.FarMTU) && m[2] != fmt.Sprint(sandbox.FarMTU)) {
				t.Fatalf("a ping too big for the small link: the pod's socket got no error naming MTU %d\n%s", sandbox.FarMTU, out)
			}
			route, err := sb.Output(client.Name, "ip", "route", "get", fam.far.String())
			if err != nil || !strings.Contains(string(route), fmt.Sprintf("mtu %d", sandbox.FarMTU)) {
				t.Errorf("the pod's kernel did not learn the path MTU to %s: %v\n%s", fam.far, err, route)
			}
		})
	}
	// The answers came back through the datapath's translation, not by
	// some other path: the client's node counted them.
	stats := natICMPStats(t, n1.PinDir)
	t.Logf("%s: nat_icmp_stats %v", n1.Name, stats)
	if stats[datapath.NatIcmpEchoMasq] == 0 || stats[datapath.NatIcmpErrXlated] == 0 || stats[datapath.NatIcmpErrBad] != 0 {
		t.Errorf("%s: echoes masqueraded %d, errors translated %d, errors dropped %d: want some, some, none", n1.Name,
			stats[datapath.NatIcmpEchoMasq], stats[datapath.NatIcmpErrXlated], stats[datapath.NatIcmpErrBad])
	}
}

// natICMPStats sums a node's nat_icmp_stats over its CPUs.
func natICMPStats(t *testing.T, pinDir string) map[datapath.NatIcmpStat]uint64 {
	t.Helper()
	maps, closeMaps, err := datapath.OpenPinned(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps()
	out := map[datapath.NatIcmpStat]uint64{}
	for s := datapath.NatIcmpStat(0); s < datapath.NatIcmpStatMax; s++ {
		var perCPU []uint64
		if err := maps.Map(nat.MapICMPStats).Lookup(uint32(s), &perCPU); err != nil {
			t.Fatal(err)
		}
		for _, v := range perCPU {
			out[s] += v
		}
	}
	return out
}

// traceHops reads traceroute -n -q 1's hops: the address that answered
// each, or "*".
func traceHops(out string) []string {
	var hops []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] == "traceroute" {
			continue
		}
		hops = append(hops, f[1])
	}
	return hops
}
