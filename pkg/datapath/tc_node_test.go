package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Traffic from outside the cluster, through node 1 (172.30.0.1).
var (
	node4  = netip.MustParseAddr("172.30.0.1")
	node6  = netip.MustParseAddr("fd00:172:30::1")
	np4    = netip.AddrPortFrom(node4, 30080) // NodePort
	np6    = netip.AddrPortFrom(node6, 30080)
	extIP4 = netip.MustParseAddrPort("192.0.2.10:80") // ExternalIP / LoadBalancer IP
	// External clients. Their port is in the SNAT range, so the SNAT port
	// is theirs when free: the expected packets can be written down.
	ext4  = netip.MustParseAddrPort("172.30.0.100:61234")
	ext4b = netip.MustParseAddrPort("172.30.0.101:61234")
	ext6  = netip.MustParseAddrPort("[fd00:172:30::100]:61234")
)

func snat(node netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(node, port) }

// TestExternalPacketFlows: the node program's packet-flow table (kube-proxy's
// cases for NodePort, ExternalIPs and LoadBalancer IPs): with
// externalTrafficPolicy Cluster the packet is DNATed to any endpoint and
// SNATed to the node, and its replies are translated back; with Local only
// local endpoints serve, the client's address is kept, and a node without
// one drops; a Service with no endpoints at all refuses. In BPF_PROG_RUN
// the FIB has no interface to answer for, so translated packets come out
// with verdict OK (handed to the kernel); the sandbox test sends them for
// real.
func TestExternalPacketFlows(t *testing.T) {
	ext, local := model.External, model.External|model.Local
	syn4 := pkt.TCP(ext4, np4, syn, nil)
	syn6 := pkt.TCP(ext6, np6, syn, nil)
	ack4 := pkt.TCP(ext4, np4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("GET /"))

	cases := []struct {
		name     string
		services []model.FrontendBackends
		local    []netip.Addr // pods of this node (router_sources)
		steps    []step
	}{
		{
			name:     "NodePort TCPv4, Cluster: DNAT to any endpoint and SNAT to the node; the reply goes back to the client",
			services: []model.FrontendBackends{{Frontend: frontend(np4, model.TCP), Flags: ext, Backends: backends(be4)}},
			steps: []step{
				{name: "SYN", fromNet: true, in: syn4, verdict: actOK, out: pkt.Rewrite(syn4, snat(node4, 61234), be4)},
				{name: "SYN-ACK from the backend's node", fromNet: true, in: pkt.TCP(be4, snat(node4, 61234), synAck, nil), verdict: actOK,
					out: pkt.TCP(np4, ext4, synAck, nil)},
				{name: "data keeps backend and SNAT port", fromNet: true, in: ack4, verdict: actOK, out: pkt.Rewrite(ack4, snat(node4, 61234), be4)},
				{name: "another client with the same port gets another SNAT port", fromNet: true, in: pkt.TCP(ext4b, np4, syn, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(ext4b, np4, syn, nil), snat(node4, 61235), be4)},
				{name: "whose reply reaches it", fromNet: true, in: pkt.TCP(be4, snat(node4, 61235), synAck, nil), verdict: actOK,
					out: pkt.TCP(np4, ext4b, synAck, nil)},
			},
		},
		{
			name:     "NodePort TCPv6, Cluster",
			services: []model.FrontendBackends{{Frontend: frontend(np6, model.TCP), Flags: ext, Backends: backends(be6)}},
			steps: []step{
				{name: "SYN", fromNet: true, in: syn6, verdict: actOK, out: pkt.Rewrite(syn6, snat(node6, 61234), be6)},
				{name: "SYN-ACK", fromNet: true, in: pkt.TCP(be6, snat(node6, 61234), synAck, nil), verdict: actOK,
					out: pkt.TCP(np6, ext6, synAck, nil)},
			},
		},
		{
			name: "NodePort UDPv4 and UDPv6, Cluster",
			services: []model.FrontendBackends{
				{Frontend: frontend(np4, model.UDP), Flags: ext, Backends: backends(be4)},
				{Frontend: frontend(np6, model.UDP), Flags: ext, Backends: backends(be6)},
			},
			steps: []step{
				{name: "v4 query", fromNet: true, in: pkt.UDP(ext4, np4, []byte("q")), verdict: actOK, out: pkt.UDP(snat(node4, 61234), be4, []byte("q"))},
				{name: "v4 answer", fromNet: true, in: pkt.UDP(be4, snat(node4, 61234), []byte("a")), verdict: actOK, out: pkt.UDP(np4, ext4, []byte("a"))},
				{name: "v6 query", fromNet: true, in: pkt.UDP(ext6, np6, []byte("q")), verdict: actOK, out: pkt.UDP(snat(node6, 61234), be6, []byte("q"))},
				{name: "v6 answer", fromNet: true, in: pkt.UDP(be6, snat(node6, 61234), []byte("a")), verdict: actOK, out: pkt.UDP(np6, ext6, []byte("a"))},
			},
		},
		{
			name:     "ExternalIP (and LoadBalancer IP), Cluster: SNAT to the node as for a NodePort",
			services: []model.FrontendBackends{{Frontend: frontend(extIP4, model.TCP), Flags: ext, Backends: backends(be4)}},
			steps: []step{
				{name: "SYN", fromNet: true, in: pkt.TCP(ext4, extIP4, syn, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(ext4, extIP4, syn, nil), snat(node4, 61234), be4)},
				{name: "SYN-ACK", fromNet: true, in: pkt.TCP(be4, snat(node4, 61234), synAck, nil), verdict: actOK,
					out: pkt.TCP(extIP4, ext4, synAck, nil)},
			},
		},
		{
			name:     "NodePort, Local: a local endpoint, the client's address kept; its reply leaves its pod's veth translated",
			services: []model.FrontendBackends{{Frontend: frontend(np4, model.TCP), Flags: local, Backends: backends(be4b)}},
			steps: []step{
				{name: "SYN", fromNet: true, in: syn4, verdict: actOK, out: pkt.Rewrite(syn4, ext4, be4b)},
				{name: "SYN-ACK from the local pod", in: pkt.TCP(be4b, ext4, synAck, nil), verdict: actOK,
					out: pkt.TCP(np4, ext4, synAck, nil)},
			},
		},
		{
			name:     "NodePort, Cluster, the endpoint a pod of this node: DNAT alone, the client kept (its ingress policy judges the client, not the node)",
			services: []model.FrontendBackends{{Frontend: frontend(np4, model.TCP), Flags: ext, Backends: backends(be4b)}},
			local:    []netip.Addr{be4b.Addr()},
			steps: []step{
				{name: "SYN", fromNet: true, in: syn4, verdict: actOK, out: pkt.Rewrite(syn4, ext4, be4b)},
				{name: "SYN-ACK from the local pod", in: pkt.TCP(be4b, ext4, synAck, nil), verdict: actOK,
					out: pkt.TCP(np4, ext4, synAck, nil)},
			},
		},
		{
			name: "Local without a local endpoint: dropped (another node may serve it); no endpoints at all: refused",
			services: []model.FrontendBackends{
				{Frontend: frontend(np4, model.TCP), Flags: local},
				{Frontend: frontend(np6, model.TCP), Flags: ext},
			},
			steps: []step{
				{name: "Local, v4", fromNet: true, in: syn4, verdict: actShot},
				{name: "Cluster, v6", fromNet: true, in: syn6, verdict: actRedirect, out: pkt.RST(syn6)},
			},
		},
		{
			name: "Local, from inside the cluster: a pod reaches every endpoint through the in-cluster twin (kube-proxy's short-circuit); from outside, only local ones",
			services: []model.FrontendBackends{
				{Frontend: frontend(np4, model.TCP), Flags: local | model.TwoScopes},
				{Frontend: model.Frontend{Addr: np4.Addr(), Port: np4.Port(), Proto: model.TCP, Internal: true}, Flags: ext, Backends: backends(be4)},
			},
			steps: []step{
				{name: "from a pod: the other node's endpoint", in: pkt.TCP(client4, np4, syn, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(client4, np4, syn, nil), client4, be4)},
				{name: "its reply, back from the NodePort", toPod: true, in: pkt.TCP(be4, client4, synAck, nil), verdict: actOK,
					out: pkt.TCP(np4, client4, synAck, nil)},
				{name: "from outside: no local endpoint, dropped", fromNet: true, in: syn4, verdict: actShot},
			},
		},
		{
			name:     "traffic for no external frontend passes: ClusterIPs are not served from outside, nor other ports",
			services: []model.FrontendBackends{{Frontend: frontend(vip4, model.TCP), Backends: backends(be4)}},
			steps: []step{
				{name: "to a ClusterIP", fromNet: true, in: pkt.TCP(ext4, vip4, syn, nil), verdict: actOK},
				{name: "to the node, another port", fromNet: true, in: pkt.TCP(ext4, netip.AddrPortFrom(node4, 22), syn, nil), verdict: actOK},
				{name: "pod-to-pod from another node", fromNet: true, in: pkt.TCP(be4, client4, synAck, nil), verdict: actOK},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dp, cube := load(t)
			if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
				t.Fatal(err)
			}
			for _, fb := range c.services {
				if err := cube.Apply(fb); err != nil {
					t.Fatal(err)
				}
			}
			for _, a := range c.local {
				podSource(t, dp, a, progRunIfindex)
			}
			for _, s := range c.steps {
				run(t, dp, s)
			}
		})
	}
}

// TestInternalLocal: a ClusterIP with internalTrafficPolicy Local has only
// this node's endpoints; without one, pods' packets are dropped, not
// refused (kube-proxy's behaviour).
func TestInternalLocal(t *testing.T) {
	dp, cube := load(t)
	for _, fb := range []model.FrontendBackends{
		{Frontend: frontend(vip4, model.TCP), Flags: model.Local, Backends: backends(be4b)},
		{Frontend: frontend(vip6, model.TCP), Flags: model.Local},
	} {
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	syn4, syn6 := pkt.TCP(client4, vip4, syn, nil), pkt.TCP(client6, vip6, syn, nil)
	run(t, dp, step{name: "local endpoint", in: syn4, verdict: actOK, out: pkt.Rewrite(syn4, client4, be4b)})
	run(t, dp, step{name: "no local endpoint", in: syn6, verdict: actShot})
}

// TestTerminatingEndpointKeepsFlows: an endpoint that starts terminating
// leaves the slots but stays in lb_backends (draining): its established
// flows keep it, new ones go elsewhere; once it is gone, its flows are
// balanced again.
func TestTerminatingEndpointKeepsFlows(t *testing.T) {
	dp, cube := load(t)
	apply := func(ready, draining []netip.AddrPort) {
		t.Helper()
		fb := model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Backends: backends(ready...), Draining: backends(draining...)}
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	synA := pkt.TCP(client4, vip4, syn, nil)
	dataA := pkt.TCP(client4, vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("more"))
	clientB := netip.AddrPortFrom(client4.Addr(), 40001)
	synB := pkt.TCP(clientB, vip4, syn, nil)

	apply([]netip.AddrPort{be4}, nil)
	run(t, dp, step{name: "flow A starts on be4", in: synA, verdict: actOK, out: pkt.Rewrite(synA, client4, be4)})
	apply([]netip.AddrPort{be4b}, []netip.AddrPort{be4})
	run(t, dp, step{name: "be4 terminating: flow A stays", in: dataA, verdict: actOK, out: pkt.Rewrite(dataA, client4, be4)})
	run(t, dp, step{name: "a new flow goes to the ready endpoint", in: synB, verdict: actOK, out: pkt.Rewrite(synB, clientB, be4b)})
	apply([]netip.AddrPort{be4b}, nil)
	run(t, dp, step{name: "be4 gone: flow A is balanced again", in: dataA, verdict: actOK, out: pkt.Rewrite(dataA, client4, be4b)})
	if n := cube.Entries()[lb.MapBackends]; n != 1 {
		t.Errorf("%d backends in the map after be4 left, want 1", n)
	}
}

// TestHairpin: a pod reaching itself through its Service is DNATed to
// itself and SNATed to the hairpin address, so that its answer leaves the
// pod and is translated back to come from the Service.
func TestHairpin(t *testing.T) {
	dp, cube := load(t)
	self4 := netip.AddrPortFrom(be4b.Addr(), 61234) // the backend pod, as a client
	self6 := netip.MustParseAddrPort("[fd00:10:244:2::21]:61234")
	hairpin4, hairpin6 := netip.MustParseAddr("169.254.42.1"), netip.MustParseAddr("fd00:6e63::42")
	for _, fb := range []model.FrontendBackends{
		{Frontend: frontend(vip4, model.TCP), Backends: backends(be4b)},
		{Frontend: frontend(vip6, model.TCP), Backends: backends(be6)},
	} {
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	syn4, syn6 := pkt.TCP(self4, vip4, syn, nil), pkt.TCP(self6, vip6, syn, nil)
	for _, s := range []step{
		{name: "v4 SYN to itself", in: syn4, verdict: actOK, out: pkt.Rewrite(syn4, netip.AddrPortFrom(hairpin4, 61234), be4b)},
		{name: "v4 SYN-ACK back", in: pkt.TCP(be4b, netip.AddrPortFrom(hairpin4, 61234), synAck, nil), verdict: actOK,
			out: pkt.TCP(vip4, self4, synAck, nil)},
		{name: "v6 SYN to itself", in: syn6, verdict: actOK, out: pkt.Rewrite(syn6, netip.AddrPortFrom(hairpin6, 61234), be6)},
		{name: "v6 SYN-ACK back", in: pkt.TCP(be6, netip.AddrPortFrom(hairpin6, 61234), synAck, nil), verdict: actOK,
			out: pkt.TCP(vip6, self6, synAck, nil)},
	} {
		run(t, dp, s)
	}
}

// TestLoadBalancerSourceRanges: a LoadBalancer IP with
// loadBalancerSourceRanges admits only clients within them (others are
// dropped), follows changes to the ranges, and admits anyone without.
func TestLoadBalancerSourceRanges(t *testing.T) {
	dp, cube := load(t)
	if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
		t.Fatal(err)
	}
	lb6 := netip.MustParseAddrPort("[2001:db8::7]:80")
	apply := func(fe netip.AddrPort, ranges ...string) {
		t.Helper()
		fb := model.FrontendBackends{Frontend: frontend(fe, model.TCP), Flags: model.External, Backends: backends(be4)}
		if fe.Addr().Is6() {
			fb.Backends = backends(be6)
		}
		for _, r := range ranges {
			fb.Flags |= model.SourceRanges
			fb.SourceRanges = append(fb.SourceRanges, netip.MustParsePrefix(r))
		}
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	try := func(name string, client, fe netip.AddrPort, allowed bool) {
		t.Helper()
		in := pkt.TCP(client, fe, syn, nil)
		s := step{name: name, fromNet: true, in: in, verdict: actShot}
		if allowed {
			be := be4
			if fe.Addr().Is6() {
				be = be6
			}
			node := node4
			if fe.Addr().Is6() {
				node = node6
			}
			s.verdict, s.out = actOK, pkt.Rewrite(in, netip.AddrPortFrom(node, client.Port()), be)
		}
		run(t, dp, s)
	}
	apply(extIP4, "172.30.0.100/32")
	apply(lb6, "fd00:172:30::/64")
	try("v4 client in range", ext4, extIP4, true)
	try("v4 client out of range", ext4b, extIP4, false)
	try("v6 client in range", ext6, lb6, true)

	apply(extIP4, "172.30.0.0/24")
	try("range widened", netip.AddrPortFrom(ext4b.Addr(), 61240), extIP4, true)
	apply(extIP4, "10.0.0.0/8")
	try("range moved away", netip.AddrPortFrom(ext4.Addr(), 61241), extIP4, false)
	apply(extIP4)
	try("no ranges: anyone", netip.AddrPortFrom(ext4.Addr(), 61242), extIP4, true)
	n := 0
	var k datapath.SourceRangeKey
	var v uint8
	for it := dp.Maps().Map(lb.MapSourceRanges).Iterate(); it.Next(&k, &v); {
		if k.RevNatId == revNATOf(t, dp, frontend(extIP4, model.TCP)) {
			n++
		}
	}
	if n != 0 {
		t.Errorf("%d source ranges left for a frontend without any", n)
	}
}
