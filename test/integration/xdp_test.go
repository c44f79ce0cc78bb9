package integration

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"

	"github.com/netcube/netcube/lab/sandbox"
)

// xdpCount reads netcube_xdp_packets_total{action} of a node's agent.
func xdpCount(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, action string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(metric(t, sb, node, `netcube_xdp_packets_total{action="`+action+`"}`), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// dropCount is dropsMetric as a number.
func dropCount(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, cube, reason string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(dropsMetric(t, sb, node, reason, cube), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestExternalXDP: with --nodeport-acceleration=xdp, real traffic from a
// client outside the cluster, IPv4 and IPv6, TCP and UDP:
//   - the agent attaches its XDP program to the uplink in native mode
//     (veth has it);
//   - to a NodePort and a LoadBalancer IP whose endpoints are all on the
//     other node, every request is answered, each backend sees the node's
//     address (SNAT), and XDP forwarded the requests (netcube_xdp_packets_total),
//     the replies coming back through tc;
//   - what XDP passes on is still served: an endpoint on the node itself;
//   - a client outside loadBalancerSourceRanges, and a Local NodePort on a
//     node without a local endpoint, get no answer, dropped in XDP (after
//     a control that the same path answers when allowed).
func TestExternalXDP(t *testing.T) {
	sb := upWith(t, "tx", sandbox.Config{NodePortAcceleration: "xdp"})
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	var onNode1, onNode2 []sandbox.Pod
	for _, p := range top.EchoBackends() {
		if p.Node == node1.Name {
			onNode1 = append(onNode1, p)
		} else {
			onNode2 = append(onNode2, p)
		}
	}

	h, done, err := node1.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName("eth0")
	done()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x == nil || !x.Attached || x.AttachMode != nl.XDP_ATTACHED_DRV {
		t.Fatalf("node1's uplink: XDP %+v, want a program attached in native (driver) mode", x)
	}

	manifests := externalService("far", "LoadBalancer", "Cluster", []string{"10.96.0.60", "fd00:10:96::60"}, [2]int{30110, 30111},
		nil, []string{"198.51.100.20", "2001:db8::20"}, onNode2) + "---\n" +
		externalService("near", "NodePort", "Cluster", []string{"10.96.0.61", "fd00:10:96::61"}, [2]int{30112, 30113}, nil, nil, onNode1) + "---\n" +
		externalService("local-node2", "NodePort", "Local", []string{"10.96.0.62", "fd00:10:96::62"}, [2]int{30114, 30115}, nil, nil, onNode2) + "---\n" +
		externalService("local-node1", "NodePort", "Local", []string{"10.96.0.65", "fd00:10:96::65"}, [2]int{30124, 30125}, nil, nil, onNode1) + "---\n" +
		withSourceRanges(externalService("ranged", "LoadBalancer", "Cluster", []string{"10.96.0.63", "fd00:10:96::63"}, [2]int{30116, 30117},
			nil, []string{"198.51.100.21", "2001:db8::21"}, onNode2), top.External.IP4.String()+"/32", top.External.IP6.String()+"/128") + "---\n" +
		withSourceRanges(externalService("walled", "LoadBalancer", "Cluster", []string{"10.96.0.64", "fd00:10:96::64"}, [2]int{30118, 30119},
			nil, []string{"198.51.100.22", "2001:db8::22"}, onNode2), "10.0.0.0/8", "2001:db8:ffff::/48")
	if err := top.WriteManifest("xdp.yaml", manifests); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"198.51.100.20/32", "2001:db8::20/128", "198.51.100.21/32", "2001:db8::21/128", "198.51.100.22/32", "2001:db8::22/128"} {
		if err := top.RouteFromExternal(netip.MustParsePrefix(prefix), node1.Name); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := fromOutside(t, sb, "tcp", net.JoinHostPort(node1.IP4.String(), "30110"), 1, "--timeout", "200ms")
		if rs[0].Err == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NodePort not served 10 s after the Service was written: %s", rs[0].Err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	far := podNames(onNode2)
	for _, c := range []struct{ addr, proto, port string }{
		{node1.IP4.String(), "tcp", "30110"}, {node1.IP4.String(), "udp", "30111"},
		{node1.IP6.String(), "tcp", "30110"}, {node1.IP6.String(), "udp", "30111"},
		{"198.51.100.20", "tcp", "80"}, {"2001:db8::20", "udp", strconv.Itoa(sandbox.PodPort)},
	} {
		addr := net.JoinHostPort(c.addr, c.port)
		t.Run("forwarded by XDP: "+c.proto+" "+addr, func(t *testing.T) {
			snat := node1.IP4
			if strings.Contains(c.addr, ":") {
				snat = node1.IP6
			}
			before := xdpCount(t, sb, node1, "forwarded")
			answeredBy(t, fromOutside(t, sb, c.proto, addr, 40), far, snat)
			if n := xdpCount(t, sb, node1, "forwarded") - before; n < 40 {
				t.Errorf("XDP forwarded %.0f packets for 40 requests, want at least 40", n)
			}
		})
	}
	t.Run("passed to tc: an endpoint on the node itself, which sees the client (no SNAT)", func(t *testing.T) {
		for _, ip := range []netip.Addr{node1.IP4, node1.IP6} {
			client := top.External.IP4
			if ip.Is6() {
				client = top.External.IP6
			}
			answeredBy(t, fromOutside(t, sb, "tcp", net.JoinHostPort(ip.String(), "30112"), 20), podNames(onNode1), client)
		}
	})

	dropped := func(t *testing.T, addr, reason, cube string) {
		t.Helper()
		before, reasonBefore := xdpCount(t, sb, node1, "dropped"), dropCount(t, sb, node1, cube, reason)
		r := fromOutside(t, sb, "tcp", addr, 1, "--timeout", "300ms")[0]
		if !strings.Contains(r.Err, "timeout") {
			t.Errorf("%s: got %+v, want a timeout", addr, r)
		}
		if n := xdpCount(t, sb, node1, "dropped") - before; n < 1 {
			t.Errorf("%s: XDP dropped %.0f packets, want the SYN (and its retries)", addr, n)
		}
		if n := dropCount(t, sb, node1, cube, reason) - reasonBefore; n < 1 {
			t.Errorf("%s: %.0f drops counted as %s, want at least 1", addr, n, reason)
		}
	}
	for _, fam := range []struct{ ranged, walled string }{{"198.51.100.21", "198.51.100.22"}, {"2001:db8::21", "2001:db8::22"}} {
		t.Run("loadBalancerSourceRanges "+fam.ranged, func(t *testing.T) {
			snat := node1.IP4
			if strings.Contains(fam.ranged, ":") {
				snat = node1.IP6
			}
			answeredBy(t, fromOutside(t, sb, "tcp", net.JoinHostPort(fam.ranged, "80"), 10), far, snat)
			dropped(t, net.JoinHostPort(fam.walled, "80"), "source-range", "lb")
		})
	}
	t.Run("Local NodePort without a local endpoint", func(t *testing.T) {
		// The control on node1's own XDP path: a Local NodePort with an
		// endpoint there is served (by tc, the client's address kept).
		answeredBy(t, fromOutside(t, sb, "tcp", net.JoinHostPort(node1.IP4.String(), "30124"), 10), podNames(onNode1), top.External.IP4)
		answeredBy(t, fromOutside(t, sb, "tcp", net.JoinHostPort(node2.IP4.String(), "30114"), 10), far, top.External.IP4)
		dropped(t, net.JoinHostPort(node1.IP4.String(), "30114"), "no-local-endpoint", "lb")
	})
}

// TestExternalDSR: direct server return with real traffic from a client
// outside the cluster to a NodePort on node1 whose endpoints are all on
// node2, IPv4 and IPv6, in tc (--nodeport-mode dsr) and in XDP (hybrid,
// with --nodeport-acceleration xdp). Every request is answered and the
// backend sees the client's own address: the reply can only have left
// node2 from the frontend's address straight to the client, since node1
// never translated it back. In hybrid, UDP is SNATed to node1 (the
// backend sees node1), the control that DSR is what changed. A 20 MB TCP
// transfer each way of the families completes: the SYN's MSS was lowered
// for the frontend's room, so full-size segments still fit the wire.
func TestExternalDSR(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     sandbox.Config
		udpDSR  bool
		xdpUsed bool
	}{
		{"dsr, tc", sandbox.Config{NodePortMode: "dsr"}, true, false},
		{"hybrid, XDP", sandbox.Config{NodePortMode: "hybrid", NodePortAcceleration: "xdp"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := upWith(t, "td", c.cfg)
			top := sb.Topology
			node1 := top.Nodes[0]
			var onNode2 []sandbox.Pod
			for _, p := range top.EchoBackends() {
				if p.Node != node1.Name {
					onNode2 = append(onNode2, p)
				}
			}
			// iperf3's port on the first pod of node2, at NodePort 30122.
			iperfPorts := []sandbox.PortSpec{{Name: "iperf", Port: 5201, Protocol: "TCP"}}
			bulk := "apiVersion: v1\nkind: Service\nmetadata: {name: bulk, namespace: default}\nspec:\n" +
				"  type: NodePort\n  ipFamilyPolicy: RequireDualStack\n  clusterIPs: [10.96.0.71, \"fd00:10:96::71\"]\n" +
				"  ports: [{name: iperf, port: 5201, protocol: TCP, targetPort: 5201, nodePort: 30122}]\n---\n" +
				sandbox.SliceYAML("bulk", false, iperfPorts, onNode2[:1]) + "---\n" + sandbox.SliceYAML("bulk", true, iperfPorts, onNode2[:1])
			manifests := externalService("far", "NodePort", "Cluster", []string{"10.96.0.70", "fd00:10:96::70"}, [2]int{30120, 30121},
				nil, nil, onNode2) + "---\n" + bulk
			if err := top.WriteManifest("dsr.yaml", manifests); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				rs := fromOutside(t, sb, "tcp", net.JoinHostPort(node1.IP4.String(), "30120"), 1, "--timeout", "200ms")
				if rs[0].Err == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("NodePort not served 10 s after the Service was written: %s", rs[0].Err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			before := xdpCount(t, sb, node1, "forwarded")
			for _, ip := range []netip.Addr{node1.IP4, node1.IP6} {
				client := top.External.IP4
				if ip.Is6() {
					client = top.External.IP6
				}
				answeredBy(t, fromOutside(t, sb, "tcp", net.JoinHostPort(ip.String(), "30120"), 20), podNames(onNode2), client)
				udpPeer := ip // hybrid: SNATed to node1
				if c.udpDSR {
					udpPeer = client
				}
				answeredBy(t, fromOutside(t, sb, "udp", net.JoinHostPort(ip.String(), "30121"), 20), podNames(onNode2), udpPeer)
			}
			if n := xdpCount(t, sb, node1, "forwarded") - before; c.xdpUsed != (n >= 40) {
				t.Errorf("XDP forwarded %.0f packets for 40 TCP requests (XDP in use: %v)", n, c.xdpUsed)
			}

			startIperfServer(t, sb, onNode2[0])
			for _, ip := range []netip.Addr{node1.IP4, node1.IP6} {
				out, err := sb.Output(top.External.Name, "timeout", "20", "iperf3", "-c", ip.String(), "-p", "30122", "-n", "20M", "--connect-timeout", "2000")
				if err != nil {
					t.Errorf("20 MB to %s by DSR: %v\n%s", ip, err, out)
				}
			}
		})
	}
}
