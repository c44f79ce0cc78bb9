package datapath_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// tc verdicts
const (
	actOK       = 0
	actShot     = 2
	actRedirect = 7
)

var (
	client4 = netip.MustParseAddrPort("10.244.1.11:40000")
	vip4    = netip.MustParseAddrPort("10.96.0.10:80")
	be4     = netip.MustParseAddrPort("10.244.2.21:8080")
	be4b    = netip.MustParseAddrPort("10.244.1.12:8080")
	pod4    = netip.MustParseAddrPort("10.244.2.22:9000")

	client6 = netip.MustParseAddrPort("[fd00:10:244:1::11]:40000")
	vip6    = netip.MustParseAddrPort("[fd00:10:96::10]:80")
	be6     = netip.MustParseAddrPort("[fd00:10:244:2::21]:8080")
)

var syn = pkt.TCPOpts{SYN: true, Seq: 1000, Window: 64240}
var synAck = pkt.TCPOpts{SYN: true, ACK: true, Seq: 5000, Ack: 1001, Window: 64240}

func frontend(vip netip.AddrPort, p model.Proto) model.Frontend {
	return model.Frontend{Addr: vip.Addr(), Port: vip.Port(), Proto: p}
}

func backends(aps ...netip.AddrPort) []model.Backend {
	var out []model.Backend
	for _, ap := range aps {
		out = append(out, model.Backend{Addr: ap.Addr(), Port: ap.Port()})
	}
	return out
}

func load(t testing.TB) (*datapath.Datapath, *lb.Tables) {
	t.Helper()
	testenv.RequireRoot(t)
	// Conntrack takes what the tests' flows hold (a full table refuses
	// new flows; its memory is allocated per entry).
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{
		"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, "ct_flows": 65536,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp, lb.New(dp.Maps())
}

// step runs one packet through one program and checks verdict and bytes.
type step struct {
	name    string
	toPod   bool // run to_pod (replies) instead of from_pod
	fromNet bool // run from_net (the node's uplink) instead of from_pod
	toNet   bool // run to_net (the uplink's egress) instead of from_pod
	in      []byte
	verdict uint32
	out     []byte // expected output; nil means "unchanged"
}

func run(t *testing.T, dp *datapath.Datapath, s step) {
	t.Helper()
	var prog runner = dp.Programs().FromPod
	switch {
	case s.toPod:
		prog = dp.Programs().ToPod
	case s.fromNet:
		prog = onUplink{dp.Programs().FromNet}
	case s.toNet:
		prog = dp.Programs().ToNet
	}
	out := make([]byte, 1600)
	opts := runOpts(s.in, out)
	dropped := totalDrops(t, dp)
	verdict, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("%s: run: %v", s.name, err)
	}
	if verdict != s.verdict {
		t.Errorf("%s: verdict %d, want %d", s.name, verdict, s.verdict)
	}
	// Every drop is counted under one reason; nothing that goes on is.
	switch n := totalDrops(t, dp) - dropped; {
	case verdict == actShot && n != 1:
		t.Errorf("%s: dropped, with %d drops counted (monitor_drops), want 1", s.name, n)
	case verdict == actOK && n != 0:
		t.Errorf("%s: passed, with %d drops counted (monitor_drops)", s.name, n)
	}
	want := s.out
	if want == nil {
		want = s.in
	}
	if !bytes.Equal(opts.DataOut, want) {
		t.Errorf("%s: output packet differs\n got: %s\nwant: %s", s.name,
			hex.EncodeToString(opts.DataOut), hex.EncodeToString(want))
	}
}

func TestPacketFlows(t *testing.T) {
	tcp4SYN := pkt.TCP(client4, vip4, syn, nil)
	tcp6SYN := pkt.TCP(client6, vip6, syn, nil)
	udp4 := pkt.UDP(client4, vip4, []byte("query"))
	udp6 := pkt.UDP(client6, vip6, []byte("query"))
	data4 := pkt.TCP(client4, vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("GET / HTTP/1.1\r\n\r\n"))

	cases := []struct {
		name     string
		services map[model.Frontend][]model.Backend
		steps    []step
	}{
		{
			name:     "TCPv4 DNAT to the only backend, reply reverse-NATed to the ClusterIP",
			services: map[model.Frontend][]model.Backend{frontend(vip4, model.TCP): backends(be4)},
			steps: []step{
				{name: "SYN", in: tcp4SYN, verdict: actOK, out: pkt.Rewrite(tcp4SYN, client4, be4)},
				{name: "SYN-ACK from backend", toPod: true, in: pkt.TCP(be4, client4, synAck, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(be4, client4, synAck, nil), vip4, client4)},
				{name: "data with payload", in: data4, verdict: actOK, out: pkt.Rewrite(data4, client4, be4)},
			},
		},
		{
			name:     "TCPv6 DNAT and reverse NAT",
			services: map[model.Frontend][]model.Backend{frontend(vip6, model.TCP): backends(be6)},
			steps: []step{
				{name: "SYN", in: tcp6SYN, verdict: actOK, out: pkt.Rewrite(tcp6SYN, client6, be6)},
				{name: "SYN-ACK", toPod: true, in: pkt.TCP(be6, client6, synAck, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(be6, client6, synAck, nil), vip6, client6)},
			},
		},
		{
			name:     "UDPv4 and UDPv6 DNAT and reverse NAT",
			services: map[model.Frontend][]model.Backend{frontend(vip4, model.UDP): backends(be4), frontend(vip6, model.UDP): backends(be6)},
			steps: []step{
				{name: "v4 query", in: udp4, verdict: actOK, out: pkt.Rewrite(udp4, client4, be4)},
				{name: "v4 answer", toPod: true, in: pkt.UDP(be4, client4, []byte("answer")), verdict: actOK,
					out: pkt.UDP(vip4, client4, []byte("answer"))},
				{name: "v6 query", in: udp6, verdict: actOK, out: pkt.Rewrite(udp6, client6, be6)},
				{name: "v6 answer", toPod: true, in: pkt.UDP(be6, client6, []byte("answer")), verdict: actOK,
					out: pkt.UDP(vip6, client6, []byte("answer"))},
			},
		},
		{
			name:     "traffic that is not for a Service passes untouched",
			services: map[model.Frontend][]model.Backend{frontend(vip4, model.TCP): backends(be4)},
			steps: []step{
				{name: "pod to pod", in: pkt.TCP(client4, pod4, syn, nil), verdict: actOK},
				{name: "ClusterIP, other port", in: pkt.TCP(client4, netip.AddrPortFrom(vip4.Addr(), 81), syn, nil), verdict: actOK},
				{name: "ClusterIP, other protocol", in: udp4, verdict: actOK},
				{name: "reply of no translated flow", toPod: true, in: pkt.TCP(pod4, client4, synAck, nil), verdict: actOK},
			},
		},
		{
			name:     "a direct connection reusing the client port of an ended Service flow is not reverse-NATed",
			services: map[model.Frontend][]model.Backend{frontend(vip4, model.TCP): backends(be4)},
			steps: []step{
				{name: "Service flow SYN", in: tcp4SYN, verdict: actOK, out: pkt.Rewrite(tcp4SYN, client4, be4)},
				{name: "direct SYN, same client port, to the backend", in: pkt.TCP(client4, be4, syn, nil), verdict: actOK},
				{name: "its SYN-ACK reaches the client untouched", toPod: true, in: pkt.TCP(be4, client4, synAck, nil), verdict: actOK},
			},
		},
		{
			// The black hole of issue 14: the direct flow above forgot the
			// Service flow's reply entry; its Service entry, left behind,
			// must not be trusted for the next Service flow on that port.
			name:     "a Service flow whose reply entry was forgotten is balanced afresh, replies reverse-NATed",
			services: map[model.Frontend][]model.Backend{frontend(vip4, model.TCP): backends(be4)},
			steps: []step{
				{name: "Service flow SYN", in: tcp4SYN, verdict: actOK, out: pkt.Rewrite(tcp4SYN, client4, be4)},
				{name: "its SYN-ACK is reverse-NATed", toPod: true, in: pkt.TCP(be4, client4, synAck, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(be4, client4, synAck, nil), vip4, client4)},
				{name: "direct SYN, same client port, to the backend", in: pkt.TCP(client4, be4, syn, nil), verdict: actOK},
				{name: "Service flow SYN again, same client port", in: tcp4SYN, verdict: actOK, out: pkt.Rewrite(tcp4SYN, client4, be4)},
				{name: "its SYN-ACK is reverse-NATed again", toPod: true, in: pkt.TCP(be4, client4, synAck, nil), verdict: actOK,
					out: pkt.Rewrite(pkt.TCP(be4, client4, synAck, nil), vip4, client4)},
			},
		},
		{
			name: "a Service without endpoints refuses at once: RST for TCP, ICMP port unreachable for UDP",
			services: map[model.Frontend][]model.Backend{
				frontend(vip4, model.TCP): nil, frontend(vip6, model.TCP): nil,
				frontend(vip4, model.UDP): nil, frontend(vip6, model.UDP): nil,
			},
			steps: []step{
				{name: "TCPv4 SYN", in: tcp4SYN, verdict: actRedirect, out: pkt.RST(tcp4SYN)},
				{name: "TCPv6 SYN", in: tcp6SYN, verdict: actRedirect, out: pkt.RST(tcp6SYN)},
				{name: "UDPv4", in: udp4, verdict: actRedirect, out: pkt.PortUnreachable(udp4)},
				{name: "UDPv6", in: udp6, verdict: actRedirect, out: pkt.PortUnreachable(udp6)},
				{name: "a RST is never answered", in: pkt.TCP(client4, vip4, pkt.TCPOpts{RST: true, Seq: 1}, nil), verdict: actShot,
					out: pkt.TCP(client4, vip4, pkt.TCPOpts{RST: true, Seq: 1}, nil)},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dp, cube := load(t)
			for fe, bs := range c.services {
				if err := cube.Upsert(fe, bs); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range c.steps {
				run(t, dp, s)
			}
		})
	}
}

// backendOf runs a SYN from client through from_pod and says which backend
// it was sent to.
func backendOf(t *testing.T, dp *datapath.Datapath, client, vip netip.AddrPort, candidates ...netip.AddrPort) netip.AddrPort {
	t.Helper()
	in := pkt.TCP(client, vip, syn, nil)
	out := make([]byte, 1600)
	opts := runOpts(in, out)
	if v, err := dp.Programs().FromPod.Run(opts); err != nil || v != actOK {
		t.Fatalf("run: verdict %d, %v", v, err)
	}
	for _, b := range candidates {
		if bytes.Equal(opts.DataOut, pkt.Rewrite(in, client, b)) {
			return b
		}
	}
	t.Fatalf("packet sent to none of %v: %x", candidates, opts.DataOut)
	return netip.AddrPort{}
}

func TestConntrackPinsFlowToBackend(t *testing.T) {
	dp, cube := load(t)
	fe := frontend(vip4, model.TCP)
	if err := cube.Upsert(fe, backends(be4, be4b)); err != nil {
		t.Fatal(err)
	}

	// New flows spread over both backends (random selection).
	seen := map[netip.AddrPort]int{}
	for port := uint16(1000); port < 1064; port++ {
		seen[backendOf(t, dp, netip.AddrPortFrom(client4.Addr(), port), vip4, be4, be4b)]++
	}
	if len(seen) != 2 {
		t.Fatalf("64 new flows all went to %v; want both backends", seen)
	}

	// One flow keeps its backend, also when another backend joins.
	first := backendOf(t, dp, client4, vip4, be4, be4b)
	for range 20 {
		if got := backendOf(t, dp, client4, vip4, be4, be4b); got != first {
			t.Fatalf("flow moved from %v to %v", first, got)
		}
	}
	extra := netip.MustParseAddrPort("10.244.2.99:8080")
	if err := cube.Upsert(fe, backends(be4, be4b, extra)); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if got := backendOf(t, dp, client4, vip4, be4, be4b, extra); got != first {
			t.Fatalf("after scale-up, flow moved from %v to %v", first, got)
		}
	}

	// When its backend goes away, the flow is balanced again onto a live one.
	var rest []netip.AddrPort
	for _, b := range []netip.AddrPort{be4, be4b, extra} {
		if b != first {
			rest = append(rest, b)
		}
	}
	if err := cube.Upsert(fe, backends(rest...)); err != nil {
		t.Fatal(err)
	}
	if got := backendOf(t, dp, client4, vip4, be4, be4b, extra); got == first {
		t.Fatalf("flow still sent to removed backend %v", first)
	}
}

func TestUDPv4ZeroChecksumStaysZero(t *testing.T) {
	dp, cube := load(t)
	if err := cube.Upsert(frontend(vip4, model.UDP), backends(be4)); err != nil {
		t.Fatal(err)
	}
	in := pkt.UDP(client4, vip4, []byte("no checksum"))
	in[14+20+6], in[14+20+7] = 0, 0 // UDP over IPv4 may omit its checksum
	want := pkt.Rewrite(in, client4, be4)
	want[14+20+6], want[14+20+7] = 0, 0
	run(t, dp, step{name: "zero checksum", in: in, verdict: actOK, out: want})
}

// TestHostBackend: a NodePort whose backend is the node itself (a
// host-network pod) is delivered to the node's own stack with its client's
// address (no SNAT to itself: a packet from the node's own address would
// be a martian), and the node's replies, leaving through the uplink, get
// the NodePort back as their source. Both Cluster and Local policies, IPv4
// and IPv6.
func TestHostBackend(t *testing.T) {
	for _, c := range []struct {
		name                string
		node, client, other netip.Addr
		flags               model.FrontendFlags
	}{
		{"IPv4, Cluster", netip.MustParseAddr("172.30.0.11"), netip.MustParseAddr("172.30.0.12"), netip.MustParseAddr("172.30.0.13"), model.External},
		{"IPv4, Local", netip.MustParseAddr("172.30.0.11"), netip.MustParseAddr("172.30.0.12"), netip.MustParseAddr("172.30.0.13"), model.External | model.Local},
		{"IPv6, Cluster", netip.MustParseAddr("fd00:172:30::11"), netip.MustParseAddr("fd00:172:30::12"), netip.MustParseAddr("fd00:172:30::13"), model.External},
	} {
		t.Run(c.name, func(t *testing.T) {
			dp, cube := load(t)
			node4, node6 := c.node, netip.MustParseAddr("fd00:172:30::11")
			if c.node.Is6() {
				node4 = netip.MustParseAddr("172.30.0.11")
				node6 = c.node
			}
			if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
				t.Fatal(err)
			}
			nodePort := netip.AddrPortFrom(c.node, 31312)
			host := netip.AddrPortFrom(c.node, 8083)
			client := netip.AddrPortFrom(c.client, 40000)
			err := cube.Apply(model.FrontendBackends{
				Frontend: frontend(nodePort, model.TCP), Flags: c.flags,
				Backends: backends(host),
			})
			if err != nil {
				t.Fatal(err)
			}
			in := pkt.TCP(client, nodePort, syn, nil)
			reply := pkt.TCP(host, client, synAck, nil)
			stranger := pkt.TCP(host, netip.AddrPortFrom(c.other, 40000), synAck, nil)
			for _, s := range []step{
				{name: "the node's own traffic out of the uplink passes untouched", toNet: true, in: stranger, verdict: actOK},
				{name: "SYN to the NodePort goes up the node's stack, client kept", fromNet: true, in: in, verdict: actOK,
					out: pkt.Rewrite(in, client, host)},
				{name: "the node's SYN-ACK leaves from the NodePort", toNet: true, in: reply, verdict: actOK,
					out: pkt.Rewrite(reply, nodePort, client)},
				{name: "later packets stay on the node", fromNet: true,
					in:      pkt.TCP(client, nodePort, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, nil),
					verdict: actOK,
					out:     pkt.Rewrite(pkt.TCP(client, nodePort, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, nil), client, host)},
				{name: "another client's traffic with the node is still untouched", toNet: true, in: stranger, verdict: actOK},
			} {
				run(t, dp, s)
			}
		})
	}
}

// TestFragments: every fragment of a datagram to a Service goes where its
// first went, translated as the whole datagram would be (the fragments of
// the translated datagram, byte for byte), on the way out and back, IPv4
// and IPv6; so do the fragments of a datagram to a pod, untranslated. A
// later fragment whose first was never seen passes untouched to a pod
// (no policy selects it), and is dropped to a ClusterIP, which it cannot
// be balanced to (TestEveryDropHasItsReason: its reason).
func TestFragments(t *testing.T) {
	dp, cube := load(t)
	for _, fe := range []model.Frontend{frontend(vip4, model.UDP), frontend(vip6, model.UDP)} {
		be := be4
		if fe.Addr.Is6() {
			be = be6
		}
		if err := cube.Upsert(fe, backends(be)); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("fragment"), 250) // 2,000 bytes: three fragments at 1,000
	for _, c := range []struct {
		name                string
		client, vip, be, to netip.AddrPort
	}{
		{"IPv4", client4, vip4, be4, pod4},
		{"IPv6", client6, vip6, be6, netip.MustParseAddrPort("[fd00:10:244:2::22]:9000")},
	} {
		t.Run(c.name, func(t *testing.T) {
			query := pkt.UDP(c.client, c.vip, big)
			want := pkt.Fragments(pkt.Rewrite(query, c.client, c.be), 1000, 7)
			for i, in := range pkt.Fragments(query, 1000, 7) {
				run(t, dp, step{name: fmt.Sprintf("query fragment %d", i), in: in, verdict: actOK, out: want[i]})
			}
			answer := pkt.UDP(c.be, c.client, big)
			want = pkt.Fragments(pkt.Rewrite(answer, c.vip, c.client), 1000, 8)
			for i, in := range pkt.Fragments(answer, 1000, 8) {
				run(t, dp, step{name: fmt.Sprintf("answer fragment %d", i), toPod: true, in: in, verdict: actOK, out: want[i]})
			}
			direct := pkt.UDP(c.client, c.to, big)
			for i, in := range pkt.Fragments(direct, 1000, 9) {
				run(t, dp, step{name: fmt.Sprintf("fragment %d to a pod", i), in: in, verdict: actOK})
			}
			orphan := pkt.Fragments(direct, 1000, 10)[1]
			run(t, dp, step{name: "a later fragment of an unseen datagram to a pod", in: orphan, verdict: actOK, out: orphan})
			orphan = pkt.Fragments(query, 1000, 10)[1]
			run(t, dp, step{name: "a later fragment of an unseen datagram to a ClusterIP", in: orphan, verdict: actShot})
		})
	}
}
