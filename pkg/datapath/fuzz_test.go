package datapath_test

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// fuzzSeeds are the packet-flow fixtures the fuzzer mutates: TCP and UDP
// to a frontend and to a pod, replies, fragments, ICMP errors quoting a
// translated packet, ICMP echoes and the errors of masqueraded flows
// (whole and cut-short quotes, of UDP and of an echo), IPv4 and IPv6;
// DSR frontends, protocols without ports, IPv4-mapped sources.
func fuzzSeeds() [][]byte {
	udp4 := pkt.UDP(client4, vip4, []byte("query"))
	big := pkt.UDP(client6, vip6, bytes.Repeat([]byte("x"), 1800))
	seeds := [][]byte{
		pkt.TCP(client4, vip4, syn, nil),
		pkt.TCP(client6, vip6, syn, nil),
		pkt.TCP(be4, client4, synAck, nil),
		pkt.TCP(client4, pod4, syn, []byte("data")),
		udp4,
		pkt.UDP(be6, client6, []byte("answer")),
		pkt.PortUnreachable(pkt.Rewrite(udp4, client4, be4)),
		pkt.RST(pkt.TCP(client4, vip4, syn, nil)),
		pkt.SCTPInit(client4, vip4),
	}
	for _, c := range []struct{ client, server, node netip.Addr }{
		{client4.Addr(), netip.MustParseAddr("192.0.2.1"), node4},
		{client6.Addr(), netip.MustParseAddr("2001:db8::1"), node6},
	} {
		out := pkt.UDP(netip.AddrPortFrom(c.node, 61001), netip.AddrPortFrom(c.server, 53), []byte("query"))
		echo := pkt.Echo(c.node, c.server, 61002, 1, false, []byte("ping"))
		seeds = append(seeds,
			pkt.Echo(c.client, c.server, 7, 1, false, []byte("ping")),
			pkt.Echo(c.server, c.node, 61002, 1, true, []byte("ping")),
			pkt.Error(c.server, c.node, pkt.FragNeeded, 1280, out, 0),
			pkt.Error(c.server, c.node, pkt.TimeExceeded, 0, out, 20+8),
			pkt.Error(c.server, c.node, pkt.PortUnreach, 0, out, 20+3),
			pkt.Error(c.server, c.node, pkt.TimeExceeded, 0, echo, 0),
			pkt.Error(c.server, c.client, pkt.PortUnreach, 0, pkt.Rewrite(udp4, client4, be4), 0))
	}
	// Issue 68's paths: a DSR frontend from outside, protocols without
	// ports (GRE), an IPv6 packet with an IPv4-mapped source, a UDP
	// header cut short, an ICMPv6 error quoting a TCP flow.
	seeds = append(seeds,
		pkt.WithDSR(pkt.TCP(client4, be4, syn, nil), vip4),
		pkt.WithDSR(pkt.UDP(client6, be6, []byte("q")), vip6),
		pkt.WithProto(pkt.UDP(client4, pod4, nil), 47),
		pkt.WithProto(pkt.UDP(client6, be6, nil), 50),
		pkt.UDP(netip.MustParseAddrPort("[::ffff:10.244.1.11]:40000"), be6, []byte("q")),
		udp4[:14+20+4],
		pkt.Error(be6.Addr(), client6.Addr(), pkt.PortUnreach, 0, pkt.TCP(client6, be6, syn, nil), 0))
	seeds = append(seeds, pkt.Fragments(pkt.UDP(client4, vip4, bytes.Repeat([]byte("y"), 1800)), 600, 7)...)
	return append(seeds, pkt.Fragments(big, 800, 9)...)
}

// FuzzPrograms: every tc program, given any frame, returns one of the
// verdicts a tc program may (never aborts), and leaves alone what belongs
// to no frontend and no flow: with one Service (the fixtures' frontends,
// TCP and UDP, IPv4 and IPv6) and conntrack emptied before each frame, a
// frame not addressed to a frontend address leaves every program with its
// network and transport headers and payload as they were (the router may
// set Ethernet addresses). Each frame runs again with conntrack full of
// flows never answered (the early drop's path). `make test` runs the seeds and a short
// fuzzing; `go test ./pkg/datapath -run '^$' -fuzz FuzzPrograms` a long one.
// New inputs it finds go to testdata/fuzz/FuzzPrograms (commit them).
func FuzzPrograms(f *testing.F) {
	testenv.RequireRoot(f)
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	dp, cube := load(f)
	// full: the same, its conntrack (4 entries) filled before each frame
	// with two flows never answered, so that every frame that starts a
	// flow takes the early drop's path (bpf/cubes/ct/evict.h).
	full, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{
		"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, "ct_flows": 4,
	}})
	if err != nil {
		f.Fatal(err)
	}
	defer full.Close()
	for _, tables := range []*lb.Tables{cube, lb.New(full.Maps())} {
		for _, fe := range []model.Frontend{frontend(vip4, model.TCP), frontend(vip4, model.UDP), frontend(vip6, model.TCP), frontend(vip6, model.UDP)} {
			bs := backends(be4)
			if fe.Addr.Is6() {
				bs = backends(be6)
			}
			if err := tables.Upsert(fe, bs); err != nil {
				f.Fatal(err)
			}
		}
	}
	progs := dp.Programs()
	type namedProg struct {
		name string
		prog runner
	}
	// from_net on its uplink: a frame to another host's MAC it leaves
	// alone (TestFramesForAnotherHost), which would be most of them.
	programsOf := func(p datapath.Programs) []namedProg {
		return []namedProg{{"from_pod", p.FromPod}, {"to_pod", p.ToPod}, {"from_net", onUplink{p.FromNet}}, {"to_net", p.ToNet}}
	}
	named, namedFull := programsOf(progs), programsOf(full.Programs())
	fill := func(t testing.TB) {
		for _, m := range []string{"ct_flows", "frag_datagrams"} {
			emptyMap(t, full, m)
		}
		for port := range uint16(2) {
			syn := pkt.TCP(netip.AddrPortFrom(client4.Addr(), 50000+port), vip4, syn, nil)
			if _, err := full.Programs().FromPod.Run(&ebpf.RunOptions{Data: syn, DataOut: make([]byte, len(syn)+512)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	frontends := []netip.Addr{vip4.Addr(), vip6.Addr()}
	// Positive control: the comparison below sees a translation.
	synToVIP := pkt.TCP(client4, vip4, syn, nil)
	out := make([]byte, len(synToVIP)+512)
	opts := &ebpf.RunOptions{Data: synToVIP, DataOut: out}
	if _, err := progs.FromPod.Run(opts); err != nil || bytes.Equal(opts.DataOut[12:], synToVIP[12:]) {
		f.Fatalf("a SYN to the frontend was not translated (err %v): the check would see nothing", err)
	}
	// Positive control of full: a new flow there is served by evicting.
	fill(f)
	evictedBefore := ctStat(f, full, datapath.CTStatEarlyDrop)
	if v, err := full.Programs().FromPod.Run(&ebpf.RunOptions{Data: synToVIP, DataOut: make([]byte, len(synToVIP)+512)}); err != nil || v == actShot ||
		ctStat(f, full, datapath.CTStatEarlyDrop) != evictedBefore+1 {
		f.Fatalf("a SYN to the frontend with conntrack full: verdict %d, %v; not served by one early drop", v, err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 2048 || runt(frame) {
			return // what BPF_PROG_RUN refuses to run (tc sees frames up to the MTU)
		}
		for i, p := range append(named, namedFull...) {
			if i < len(named) {
				for _, m := range []string{"ct_flows", "frag_datagrams"} {
					emptyMap(t, dp, m)
				}
			} else {
				fill(t)
				p.name += " (conntrack full)"
			}
			out := make([]byte, len(frame)+512)
			opts := &ebpf.RunOptions{Data: frame, DataOut: out}
			verdict, err := p.prog.Run(opts)
			if err != nil {
				t.Fatalf("%s: run: %v (frame %s)", p.name, err, hex.EncodeToString(frame))
			}
			if !slices.Contains([]uint32{actOK, actShot, actRedirect}, verdict) {
				t.Fatalf("%s: verdict %d (frame %s)", p.name, verdict, hex.EncodeToString(frame))
			}
			if verdict == actShot || slices.Contains(frontends, frameDst(frame)) {
				continue
			}
			if len(opts.DataOut) != len(frame) || !bytes.Equal(opts.DataOut[12:], frame[12:]) {
				t.Fatalf("%s rewrote a frame addressed to no frontend (verdict %d)\n in: %s\nout: %s", p.name, verdict,
					hex.EncodeToString(frame), hex.EncodeToString(opts.DataOut))
			}
		}
	})
}

// runt says whether frame claims IPv4 or IPv6 but is shorter than that
// header: BPF_PROG_RUN refuses to run it (EINVAL).
func runt(frame []byte) bool {
	ipv4 := frame[12] == 0x08 && frame[13] == 0x00
	ipv6 := frame[12] == 0x86 && frame[13] == 0xdd
	return ipv4 && len(frame) < 34 || ipv6 && len(frame) < 54
}

// frameDst is an Ethernet frame's IPv4 or IPv6 destination (invalid for
// anything else, or too short).
func frameDst(frame []byte) netip.Addr {
	switch {
	case len(frame) >= 34 && frame[12] == 0x08 && frame[13] == 0x00:
		return netip.AddrFrom4([4]byte(frame[30:34]))
	case len(frame) >= 54 && frame[12] == 0x86 && frame[13] == 0xdd:
		return netip.AddrFrom16([16]byte(frame[38:54]))
	}
	return netip.Addr{}
}

// emptyMap deletes every entry of a hash map of dp.
func emptyMap(t testing.TB, dp *datapath.Datapath, name string) {
	t.Helper()
	m := dp.Maps().Map(name)
	var keys [][]byte
	var k, v []byte
	for it := m.Iterate(); it.Next(&k, &v); {
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
}
