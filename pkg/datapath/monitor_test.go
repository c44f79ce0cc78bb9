package datapath_test

import (
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/model"
)

// drops reads monitor_drops: packets dropped so far, by reason.
func drops(t testing.TB, dp *datapath.Datapath) map[datapath.MonDrop]uint64 {
	t.Helper()
	out := map[datapath.MonDrop]uint64{}
	m := dp.Maps().Map(monitor.MapDrops)
	for _, d := range events.DropReasons() {
		var perCPU []uint64
		if err := m.Lookup(uint32(d), &perCPU); err != nil {
			t.Fatalf("monitor_drops[%d]: %v", d, err)
		}
		for _, n := range perCPU {
			out[d] += n
		}
	}
	return out
}

func totalDrops(t testing.TB, dp *datapath.Datapath) (n uint64) {
	for _, v := range drops(t, dp) {
		n += v
	}
	return n
}

// eventReader reads what the programs wrote to monitor_events since the last
// call (the reader is the test's: no agent runs).
type eventReader struct {
	rd *ringbuf.Reader
}

func readEvents(t *testing.T, dp *datapath.Datapath) *eventReader {
	t.Helper()
	km := dp.Maps().Map(monitor.MapEvents).(interface{ Unwrap() *ebpf.Map })
	rd, err := ringbuf.NewReader(km.Unwrap())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	return &eventReader{rd: rd}
}

func (e *eventReader) drain(t *testing.T) []events.Event {
	t.Helper()
	var out []events.Event
	for {
		e.rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
		rec, err := e.rd.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Decode(rec.RawSample, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// fragmentsOf is a pod's UDP datagram to vip4, in three fragments of
// datagram id.
func fragmentsOf(id uint32) [][]byte {
	return pkt.Fragments(pkt.UDP(client4, vip4, []byte("sixteen bytes..!")), 8, id)
}

// TestEveryDropHasItsReason: each drop the programs can be made to make
// in BPF_PROG_RUN (11 of the 13 reasons: the policy cube's tests cause
// its two) is counted under its reason (and no other), and, with
// drops asked for, reported as one event naming the reason, the cube, the
// hook and the packet; the same packet with what it lacked goes on, with
// nothing counted (the positive control before each). With events off,
// drops are still counted, and nothing is written.
func TestEveryDropHasItsReason(t *testing.T) {
	other := netip.MustParseAddr("10.99.0.1")
	cases := []struct {
		name    string
		setup   func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables)
		prog    string
		allowed []byte // the positive control: passes, nothing counted
		dropped []byte
		verdict uint32 // of the dropped packet
		reason  datapath.MonDrop
		cube    string
		point   string
		ctSize  uint32 // conntrack's entries (0: load's default)
	}{
		{
			name: "a Service without endpoints refuses (RST)",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Backends: backends(be4)})
				apply(t, tables, model.FrontendBackends{Frontend: frontend(vip6, model.TCP)})
			},
			prog: "from_pod", allowed: pkt.TCP(client4, vip4, syn, nil), dropped: pkt.TCP(client6, vip6, syn, nil),
			verdict: actRedirect, reason: datapath.MonDropNoEndpoints, cube: "lb", point: "from-pod",
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint drops",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				setNodeAddrs(t, dp)
				apply(t, tables, model.FrontendBackends{Frontend: frontend(np4, model.TCP), Flags: model.External, Backends: backends(be4)})
				apply(t, tables, model.FrontendBackends{Frontend: frontend(extIP4, model.TCP), Flags: model.External | model.Local})
			},
			prog: "from_net", allowed: pkt.TCP(ext4, np4, syn, nil), dropped: pkt.TCP(ext4, extIP4, syn, nil),
			verdict: actShot, reason: datapath.MonDropNoLocalEndpoint, cube: "lb", point: "from-network",
		},
		{
			name: "a client outside loadBalancerSourceRanges drops",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				setNodeAddrs(t, dp)
				apply(t, tables, model.FrontendBackends{Frontend: frontend(extIP4, model.TCP), Flags: model.External | model.SourceRanges,
					SourceRanges: []netip.Prefix{netip.MustParsePrefix("172.30.0.100/32")}, Backends: backends(be4)})
			},
			prog: "from_net", allowed: pkt.TCP(ext4, extIP4, syn, nil), dropped: pkt.TCP(ext4b, extIP4, syn, nil),
			verdict: actShot, reason: datapath.MonDropSourceRange, cube: "lb", point: "from-network",
		},
		{
			name: "SNAT for Cluster without a node address of the family drops",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				if err := nat.SetNodeAddrs(dp.Maps(), node4, netip.Addr{}); err != nil {
					t.Fatal(err)
				}
				apply(t, tables, model.FrontendBackends{Frontend: frontend(np4, model.TCP), Flags: model.External, Backends: backends(be4)})
				apply(t, tables, model.FrontendBackends{Frontend: frontend(np6, model.TCP), Flags: model.External, Backends: backends(be6)})
			},
			prog: "from_net", allowed: pkt.TCP(ext4, np4, syn, nil), dropped: pkt.TCP(ext6, np6, syn, nil),
			verdict: actShot, reason: datapath.MonDropNoNodeAddr, cube: "nat", point: "from-network",
		},
		{
			name: "SNAT ports exhausted: the 17th client on one port finds the 16 probed ports held",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				setNodeAddrs(t, dp)
				apply(t, tables, model.FrontendBackends{Frontend: frontend(np4, model.TCP), Flags: model.External, Backends: backends(be4)})
				// Clients on the same port in the SNAT range: each gets the
				// next port of the 16 probed from it (snat.h).
				for i := 1; i <= 15; i++ {
					if v := runProg(t, onUplink{dp.Programs().FromNet}, pkt.TCP(extClient(i), np4, syn, nil)); v != actOK {
						t.Fatalf("client %d: verdict %d", i, v)
					}
				}
			},
			prog: "from_net", allowed: pkt.TCP(extClient(16), np4, syn, nil), dropped: pkt.TCP(extClient(17), np4, syn, nil),
			verdict: actShot, reason: datapath.MonDropSNATNoPort, cube: "nat", point: "from-network",
		},
		{
			name: "conntrack full of established flows: a new flow is refused its entries",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Backends: backends(be4)})
				// Two established flows (two entries each) fill the
				// table's four: none may be evicted (early drop takes
				// only flows not yet established).
				for _, port := range []uint16{30001, 30002} {
					c := netip.AddrPortFrom(client4.Addr(), port)
					if v := runProg(t, dp.Programs().FromPod, pkt.TCP(c, vip4, syn, nil)); v != actOK {
						t.Fatalf("flow from port %d: verdict %d", port, v)
					}
					if v := runProg(t, dp.Programs().ToPod, pkt.TCP(be4, c, synAck, nil)); v != actOK {
						t.Fatalf("flow from port %d's reply: verdict %d", port, v)
					}
					if v := runProg(t, dp.Programs().FromPod, pkt.TCP(c, vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, nil)); v != actOK {
						t.Fatalf("flow from port %d's ACK: verdict %d", port, v)
					}
				}
			},
			ctSize: 4,
			prog:   "from_pod", allowed: pkt.TCP(netip.AddrPortFrom(client4.Addr(), 30002), vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("x")),
			dropped: pkt.TCP(netip.AddrPortFrom(client4.Addr(), 30003), vip4, syn, nil),
			verdict: actShot, reason: datapath.MonDropCTCreate, cube: "ct", point: "from-pod",
		},
		{
			name: "a UDP header too short to rewrite: the translation fails",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.UDP), Backends: backends(be4)})
			},
			prog: "from_pod", allowed: pkt.UDP(client4, vip4, []byte("q")),
			// The ports, but not the length and checksum the rewrite
			// updates: a datagram cut after 4 bytes of its header.
			dropped: pkt.UDP(netip.AddrPortFrom(client4.Addr(), 40001), vip4, nil)[:14+20+4],
			verdict: actShot, reason: datapath.MonDropNATRewrite, cube: "nat", point: "from-pod",
		},
		{
			name: "an IPv6 extension header hides the ports of a packet to a ClusterIP",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				apply(t, tables, model.FrontendBackends{Frontend: frontend(vip6, model.UDP), Backends: backends(be6)})
			},
			prog: "from_pod", allowed: pkt.UDP(client6, vip6, []byte("q")),
			dropped: pkt.WithExtHeader(pkt.UDP(client6, vip6, []byte("q")), 60), // destination options
			verdict: actShot, reason: datapath.MonDropExtHeader, cube: "lb", point: "from-pod",
		},
		{
			name: "a later fragment to a ClusterIP whose first fragment was not seen",
			setup: func(t *testing.T, dp *datapath.Datapath, tables *lb.Tables) {
				apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.UDP), Backends: backends(be4)})
				// The first fragment of datagram 7 (the positive control's).
				if v := runProg(t, dp.Programs().FromPod, fragmentsOf(7)[0]); v == actShot {
					t.Fatalf("a first fragment dropped")
				}
			},
			prog: "from_pod", allowed: fragmentsOf(7)[1], dropped: fragmentsOf(8)[1],
			verdict: actShot, reason: datapath.MonDropFragUnseen, cube: "lb", point: "from-pod",
		},
		{
			name: "VXLAN: a destination in no node's pod CIDR drops",
			setup: func(t *testing.T, dp *datapath.Datapath, _ *lb.Tables) {
				overlayTo(t, dp, be4.Addr())
			},
			prog: "to_overlay", allowed: pkt.TCP(client4, be4, syn, nil), dropped: pkt.TCP(client4, netip.AddrPortFrom(other, 80), syn, nil),
			verdict: actShot, reason: datapath.MonDropNoTunnel, cube: "router", point: "to-overlay",
		},
		{
			name: "VXLAN: a frame that is not IP drops",
			setup: func(t *testing.T, dp *datapath.Datapath, _ *lb.Tables) {
				overlayTo(t, dp, be4.Addr())
			},
			prog: "to_overlay", allowed: pkt.TCP(client4, be4, syn, nil), dropped: arpFrame(),
			verdict: actShot, reason: datapath.MonDropMalformed, cube: "router", point: "to-overlay",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dp, tables := load(t)
			if c.ctSize != 0 {
				dp, tables = loadSized(t, c.ctSize)
			}
			if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagDrops); err != nil {
				t.Fatal(err)
			}
			evs := readEvents(t, dp)
			c.setup(t, dp, tables)
			prog := program(dp, c.prog)

			before := drops(t, dp)
			if v := runProg(t, prog, c.allowed); v == actShot {
				t.Fatalf("positive control dropped (verdict %d)", v)
			}
			if got := drops(t, dp); !equalCounts(got, before) {
				t.Fatalf("positive control counted a drop: %v -> %v", before, got)
			}
			if got := evs.drain(t); len(got) != 0 {
				t.Fatalf("positive control reported %v", got)
			}

			if v := runProg(t, prog, c.dropped); v != c.verdict {
				t.Fatalf("verdict %d, want %d", v, c.verdict)
			}
			after := drops(t, dp)
			for _, d := range events.DropReasons() {
				want := before[d]
				if d == c.reason {
					want++
				}
				if after[d] != want {
					t.Errorf("monitor_drops[%s] = %d, want %d", events.DropReason(d).Name, after[d], want)
				}
			}
			got := evs.drain(t)
			if len(got) != 1 {
				t.Fatalf("events %v, want one", got)
			}
			e := got[0]
			if e.Type != "drop" || e.Drop != events.DropReason(c.reason).Name || e.Cube != c.cube || e.Point != c.point {
				t.Errorf("event %+v, want a drop %s by %s at %s", e, events.DropReason(c.reason).Name, c.cube, c.point)
			}
			if e.Len != uint32(len(c.dropped)) {
				t.Errorf("event length %d, want %d", e.Len, len(c.dropped))
			}

			// Events off: still counted, nothing written.
			if err := monitor.SetFlags(dp.Maps(), 0); err != nil {
				t.Fatal(err)
			}
			runProg(t, prog, c.dropped)
			if n := drops(t, dp)[c.reason]; n != after[c.reason]+1 {
				t.Errorf("with events off, monitor_drops[%s] = %d, want %d", events.DropReason(c.reason).Name, n, after[c.reason]+1)
			}
			if got := evs.drain(t); len(got) != 0 {
				t.Errorf("with events off, reported %v", got)
			}
		})
	}
}

// TestTraceEvents: with trace asked for, a new Service flow's first packet
// reports its backend (and its SNAT source); its later packets report
// nothing; its end reports what each way carried (packets, bytes);
// without trace, nothing is reported or counted.
func TestTraceEvents(t *testing.T) {
	dp, tables := load(t)
	setNodeAddrs(t, dp)
	apply(t, tables, model.FrontendBackends{Frontend: frontend(np4, model.TCP), Flags: model.External, Backends: backends(be4)})
	evs := readEvents(t, dp)
	prog := onUplink{dp.Programs().FromNet}

	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagDrops|datapath.MonFlagTrace); err != nil {
		t.Fatal(err)
	}
	runProg(t, prog, pkt.TCP(ext4b, np4, syn, nil))
	got := evs.drain(t)
	if len(got) != 2 {
		t.Fatalf("events %v, want the backend and the SNAT", got)
	}
	if e := got[0]; e.Trace != "service-backend" || e.To != be4 || e.Src != ext4b || e.Dst != np4 || e.ServiceID == 0 {
		t.Errorf("first event %+v, want %s -> %s to backend %s", e, ext4b, np4, be4)
	}
	if e := got[1]; e.Trace != "snat" || e.To.Addr() != node4 || e.Cube != "nat" {
		t.Errorf("second event %+v, want SNAT to %s", e, node4)
	}
	ack := pkt.TCP(ext4b, np4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("hello"))
	runProg(t, prog, ack)
	if got := evs.drain(t); len(got) != 0 {
		t.Errorf("a later packet reported %v", got)
	}

	// The backend's answer (to this node's SNAT address), then the
	// client's reset: the flow's end, with what each way carried.
	snat := got[1].To
	answer := pkt.TCP(be4, snat, synAck, []byte("world!"))
	if v := runProg(t, prog, answer); v == actShot {
		t.Fatalf("the answer dropped")
	}
	rst := pkt.TCP(ext4b, np4, pkt.TCPOpts{RST: true, Seq: 1006}, nil)
	runProg(t, prog, rst)
	got = evs.drain(t)
	if len(got) != 1 || got[0].Trace != "flow-end" || got[0].Cube != "ct" || got[0].Src != ext4b || got[0].Dst != np4 || got[0].Counts == nil {
		t.Fatalf("events %v, want the flow's end", got)
	}
	syn4 := pkt.TCP(ext4b, np4, syn, nil)
	want := events.FlowCounts{Packets: 3, Bytes: uint64(len(syn4) + len(ack) + len(rst)), ReplyPackets: 1, ReplyBytes: uint64(len(answer))}
	if c := *got[0].Counts; c != want {
		t.Errorf("counts %+v, want %+v", c, want)
	}

	// Trace off: neither a flow's start nor its end is reported (nor
	// counted).
	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagDrops); err != nil {
		t.Fatal(err)
	}
	other := netip.AddrPortFrom(ext4b.Addr(), ext4b.Port()+1)
	runProg(t, prog, pkt.TCP(other, np4, syn, nil))
	runProg(t, prog, pkt.TCP(other, np4, pkt.TCPOpts{RST: true, Seq: 1001}, nil))
	if got := evs.drain(t); len(got) != 0 {
		t.Errorf("trace off: reported %v", got)
	}
	if n := countEntries(t, dp, ct.MapAcct); n != 0 {
		t.Errorf("trace off: %d flows counted", n)
	}
}

func apply(t *testing.T, tables *lb.Tables, fb model.FrontendBackends) {
	t.Helper()
	if err := tables.Apply(fb); err != nil {
		t.Fatal(err)
	}
}

func setNodeAddrs(t *testing.T, dp *datapath.Datapath) {
	t.Helper()
	if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
		t.Fatal(err)
	}
}

// overlayTo makes this node a VXLAN node whose overlay reaches the pod
// CIDR of addr's node.
func overlayTo(t *testing.T, dp *datapath.Datapath, addr netip.Addr) {
	t.Helper()
	conf := datapath.RouterConf{Mode: datapath.RouterVXLAN, VxlanIfindex: 1, Vni: router.VNI, VxlanMac: vxMAC}
	if err := cube.Put(dp.Maps(), router.MapConfig, uint32(0), conf); err != nil {
		t.Fatal(err)
	}
	pfx := netip.PrefixFrom(addr, 24).Masked()
	if err := cube.Put(dp.Maps(), router.MapNodes, datapath.PrefixFrom(pfx), datapath.RouterNode{Underlay: datapath.AddrFrom(node4)}); err != nil {
		t.Fatal(err)
	}
}

func runProg(t *testing.T, prog interface {
	Run(*ebpf.RunOptions) (uint32, error)
}, in []byte) uint32 {
	t.Helper()
	v, err := prog.Run(runOpts(in, make([]byte, 1600)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func equalCounts(a, b map[datapath.MonDrop]uint64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// arpFrame is an Ethernet frame of another protocol than IP.
func arpFrame() []byte {
	f := make([]byte, 60)
	f[12], f[13] = 0x08, 0x06
	return f
}

// extClient is the i-th client outside the cluster, all on one port of
// the SNAT range.
func extClient(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{172, 30, 1, byte(i)}), 61234)
}

// loadSized is load with a conntrack table of ct entries.
func loadSized(t *testing.T, ct uint32) (*datapath.Datapath, *lb.Tables) {
	t.Helper()
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{
		"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, "ct_flows": ct,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp, lb.New(dp.Maps())
}

// TestTraceRouteEvents: while tracing, the router reports how it sent each
// flow's first packet on (a TCP SYN, or a packet conntrack started a flow
// with), as the packet left: into a pod (after the load balancer: to the
// backend), into the overlay, and the overlay's tunnel to the node holding
// the destination; a later packet, and a UDP datagram no flow was started
// for, are not reported; with trace off, the same first packet is not.
func TestTraceRouteEvents(t *testing.T) {
	dp, tables := load(t)
	apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Backends: backends(be4b)})
	endpoint(t, dp, be4b.Addr(), 7)
	evs := readEvents(t, dp)
	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagTrace); err != nil {
		t.Fatal(err)
	}
	routes := func() []events.Event {
		var out []events.Event
		for _, e := range evs.drain(t) {
			if e.Trace == "route" {
				out = append(out, e)
			}
		}
		return out
	}
	client := netip.AddrPortFrom(client4.Addr(), 40100)
	runProg(t, dp.Programs().FromPod, pkt.TCP(client, vip4, syn, nil))
	got := routes()
	if len(got) != 1 || got[0].Route != "to-pod" || got[0].OutIfindex != 7 || got[0].Src != client || got[0].Dst != be4b ||
		got[0].Cube != "router" || got[0].Point != "from-pod" {
		t.Fatalf("pod -> Service: %v, want one route to the backend's pod (if 7)", got)
	}
	runProg(t, dp.Programs().FromPod, pkt.TCP(client, vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, nil))
	runProg(t, dp.Programs().FromPod, pkt.UDP(client4, be4b, []byte("q")))
	if got := routes(); len(got) != 0 {
		t.Errorf("a later packet, a datagram of no flow: reported %v", got)
	}

	overlayTo(t, dp, pod4.Addr())
	toRemote := pkt.TCP(client4, pod4, syn, nil)
	runProg(t, dp.Programs().FromPod, toRemote)
	runProg(t, dp.Program("to_overlay"), toRemote)
	got = routes()
	if len(got) != 2 || got[0].Route != "to-overlay" || got[0].OutIfindex != 1 || got[1].Route != "tunnel" ||
		got[1].To.Addr() != node4 || got[1].Point != "to-overlay" || got[1].Dst != pod4 {
		t.Errorf("pod -> another node's pod: %v, want into the overlay, then the tunnel to %s", got, node4)
	}

	// Trace off: the first packet that was reported above is not.
	if err := monitor.SetFlags(dp.Maps(), 0); err != nil {
		t.Fatal(err)
	}
	runProg(t, dp.Programs().FromPod, pkt.TCP(netip.AddrPortFrom(client4.Addr(), 40101), vip4, syn, nil))
	if got := evs.drain(t); len(got) != 0 {
		t.Errorf("trace off: reported %v", got)
	}
}
