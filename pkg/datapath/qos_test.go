package datapath_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/qos"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
)

// skbCtx is struct __sk_buff (192 bytes), as BPF_PROG_RUN takes and
// gives back the fields a test may set: priority and tstamp here.
type skbCtx struct {
	_        [8]byte
	Mark     uint32
	_        [20]byte
	Priority uint32
	_        [116]byte
	Tstamp   uint64
	_        [32]byte
}

// runCtx runs prog on in and returns its verdict, the packet out and the
// skb's fields out.
func runCtx(t *testing.T, prog *ebpf.Program, in []byte) (uint32, []byte, skbCtx) {
	t.Helper()
	return runCtxIn(t, prog, in, skbCtx{})
}

// runCtxIn is runCtx with the skb's fields in.
func runCtxIn(t *testing.T, prog *ebpf.Program, in []byte, ctxIn skbCtx) (uint32, []byte, skbCtx) {
	t.Helper()
	var ctxOut skbCtx
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out, Context: ctxIn, ContextOut: &ctxOut}
	v, err := prog.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v, out[:len(opts.DataOut)], ctxOut
}

// TestSlicePacketFlows: what a pod in a slice sends leaves with its
// slice's DSCP (the ECN bits and a valid IPv4 header checksum kept; IPv6's
// traffic class) and skb priority; a rate paces its packets by departure
// time, a packet's length apart at the rate; a packet that would wait
// beyond the horizon is dropped with its reason; a pod in no slice is
// untouched (the positive control of each), and so is every pod while
// the agent says no pod has a slice. With HTB queueing, the priority is
// the pod's HTB class and nothing is paced.
func TestSlicePacketFlows(t *testing.T) {
	dp, _ := load(t)
	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagDrops); err != nil {
		t.Fatal(err)
	}
	evs := readEvents(t, dp)
	slow := netip.MustParseAddr("10.244.1.13")
	tables := qos.NewTables(dp.Maps())
	if err := tables.Apply(qos.Desired{
		Slices: map[uint32]datapath.QosSlice{
			1: {Priority: 6, Dscp: 46, Class: datapath.QosLatency},
			2: {Priority: 2, Dscp: 10, Class: datapath.QosThroughput},
		},
		Buckets: map[uint32]qos.Bucket{2: {Rate: 1_000_000}, 3: {Rate: 100}},
		Pods: map[netip.Addr]datapath.QosPod{
			client4.Addr(): {Slice: 1}, client6.Addr(): {Slice: 1},
			be4b.Addr(): {Slice: 2, Bucket: 2}, slow: {Bucket: 3},
		},
	}); err != nil {
		t.Fatal(err)
	}
	prog := dp.Programs().FromPod
	// Classification off (no pod has a slice, as the agent says): the
	// packet of a pod in a slice goes untouched.
	if v, out, c := runCtx(t, prog, pkt.UDP(client4, be4, []byte("hello"))); v == actShot || out[15] != 0 || c.Priority != 0 {
		t.Fatalf("classification off: verdict %d, TOS %#x, priority %d", v, out[15], c.Priority)
	}
	setQoSConfig(t, dp, datapath.QosConf{Mode: datapath.QosModeEDT, Active: 1})
	other := netip.MustParseAddrPort("10.244.1.99:5000") // in no slice

	// Positive control: a pod in no slice, untouched.
	in := pkt.UDP(other, be4, []byte("hello"))
	if v, out, c := runCtx(t, prog, in); v == actShot || string(out) != string(in) || c.Priority != 0 || c.Tstamp != 0 {
		t.Fatalf("a pod in no slice: verdict %d, priority %d, tstamp %d, changed %v", v, c.Priority, c.Tstamp, string(out) != string(in))
	}

	// Latency: EF (46) and priority 6, IPv4 with ECN 1, and IPv6.
	in = pkt.UDP(client4, be4, []byte("hello"))
	in[15] = 0x01 // TOS: DSCP 0, ECN 1
	fixIPv4Checksum(in)
	v, out, c := runCtx(t, prog, in)
	if v == actShot || out[15] != 46<<2|1 || c.Priority != 6 {
		t.Errorf("latency IPv4: verdict %d, TOS %#x (want %#x), priority %d (want 6)", v, out[15], 46<<2|1, c.Priority)
	}
	if !ipv4ChecksumOK(out) {
		t.Error("latency IPv4: the header checksum is wrong after the DSCP")
	}
	in6 := pkt.UDP(client6, be6, []byte("hello"))
	v, out, c = runCtx(t, prog, in6)
	if tc := out[14]<<4 | out[15]>>4; v == actShot || tc != 46<<2 || c.Priority != 6 || out[15]&0x0f != in6[15]&0x0f {
		t.Errorf("latency IPv6: verdict %d, traffic class %#x (want %#x), priority %d", v, tc, 46<<2, c.Priority)
	}

	// Throughput at 1 MB/s: each packet a length's time after the last.
	in = pkt.UDP(be4b, be4, make([]byte, 958)) // 1000 bytes with headers
	var last uint64
	for i := range 3 {
		v, out, c = runCtx(t, prog, in)
		if v == actShot || out[15]>>2 != 10 || c.Priority != 2 || c.Tstamp == 0 {
			t.Fatalf("throughput packet %d: verdict %d, DSCP %d, priority %d, tstamp %d", i, v, out[15]>>2, c.Priority, c.Tstamp)
		}
		if i > 0 && c.Tstamp-last != 1_000_000 {
			t.Errorf("packet %d departs %d ns after the last, want 1,000,000 (1000 bytes at 1 MB/s)", i, c.Tstamp-last)
		}
		last = c.Tstamp
	}
	if got := evs.drain(t); len(got) != 0 {
		t.Fatalf("events for packets that went on: %v", got)
	}

	// 100 bytes/s: a 100-byte packet waits 1 s (the positive control,
	// within the horizon); a 300-byte one would wait 3 s more, beyond it.
	if v, _, c := runCtx(t, prog, pkt.UDP(netip.AddrPortFrom(slow, 4000), be4, make([]byte, 58))); v == actShot || c.Tstamp == 0 {
		t.Fatalf("a packet 1 s ahead at 100 bytes/s: verdict %d, tstamp %d; want it scheduled", v, c.Tstamp)
	}
	v, _, c = runCtx(t, prog, pkt.UDP(netip.AddrPortFrom(slow, 4000), be4, make([]byte, 258)))
	if v != actShot {
		t.Errorf("a packet 3 s beyond its rate: verdict %d (tstamp %d), want dropped", v, c.Tstamp)
	}
	got := evs.drain(t)
	if len(got) != 1 || got[0].Drop != events.DropReason(datapath.MonDropRate).Name || got[0].Cube != "qos" {
		t.Errorf("events %v, want one egress-rate-exceeded by qos", got)
	}

	// HTB queueing: the priority is the pod's class, nothing is paced.
	setQoSConfig(t, dp, datapath.QosConf{Mode: datapath.QosModeHTB, Active: 1})
	if err := tables.Apply(qos.Desired{
		Slices:  map[uint32]datapath.QosSlice{1: {Priority: 6, Dscp: 46, Class: datapath.QosLatency}},
		Pods:    map[netip.Addr]datapath.QosPod{client4.Addr(): {Slice: 1, Classid: 0x4e430010}, be4b.Addr(): {Bucket: 2, Classid: 0x4e431002}},
		Buckets: map[uint32]qos.Bucket{2: {Rate: 1_000_000}},
	}); err != nil {
		t.Fatal(err)
	}
	if v, out, c := runCtx(t, prog, pkt.UDP(client4, be4, []byte("hello"))); v == actShot || out[15]>>2 != 46 || c.Priority != 0x4e430010 || c.Tstamp != 0 {
		t.Errorf("HTB, latency: verdict %d, DSCP %d, priority %#x (want 4e43:10), tstamp %d", v, out[15]>>2, c.Priority, c.Tstamp)
	}
	if v, _, c := runCtx(t, prog, in); v == actShot || c.Priority != 0x4e431002 || c.Tstamp != 0 {
		t.Errorf("HTB, a rate: verdict %d, priority %#x (want 4e43:1002), tstamp %d (want none)", v, c.Priority, c.Tstamp)
	}
}

func setQoSConfig(t *testing.T, dp *datapath.Datapath, c datapath.QosConf) {
	t.Helper()
	if err := cube.Put(dp.Maps(), qos.MapConfig, uint32(0), c); err != nil {
		t.Fatal(err)
	}
}

func fixIPv4Checksum(frame []byte) {
	h := frame[14:34]
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ^checksum16(h))
}

func ipv4ChecksumOK(frame []byte) bool { return checksum16(frame[14:34]) == 0xffff }

func checksum16(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TestIngressThroughVeth: what a pod with an ingress rate receives is
// marked, as it is about to enter the pod, to go through the pod veth's
// qdisc (its shaper); a pod without one, and every pod while the agent
// says no pod has a slice or rate, are not marked (the positive
// controls). A marked packet at the veth's to_pod was admitted already:
// it goes on, unmarked, without a second verdict.
func TestIngressThroughVeth(t *testing.T) {
	dp, _ := load(t)
	tables := qos.NewTables(dp.Maps())
	if err := tables.Apply(qos.Desired{Pods: map[netip.Addr]datapath.QosPod{be4.Addr(): {Ingress: 1}}}); err != nil {
		t.Fatal(err)
	}
	prog := dp.Programs().ToPod
	in := pkt.UDP(client4, be4, []byte("hello"))
	if v, _, c := runCtx(t, prog, in); v == actShot || c.Mark != 0 {
		t.Fatalf("classification off (no pod has a rate, as the agent says): verdict %d, mark %#x", v, c.Mark)
	}
	setQoSConfig(t, dp, datapath.QosConf{Mode: datapath.QosModeHTB, Active: 1})
	if v, _, c := runCtx(t, prog, pkt.UDP(client4, be4b, []byte("hello"))); v == actShot || c.Mark != 0 {
		t.Fatalf("a pod without an ingress rate: verdict %d, mark %#x", v, c.Mark)
	}
	v, _, c := runCtx(t, prog, in)
	if v == actShot || c.Mark == 0 {
		t.Fatalf("a pod with an ingress rate: verdict %d, mark %#x, want marked (through its veth's qdisc)", v, c.Mark)
	}
	var marked skbCtx
	marked.Mark = c.Mark // HOOK_MARK_VIA_VETH
	if v, _, c := runCtxIn(t, prog, pkt.UDP(client4, be4, []byte("hello")), marked); v != actOK || c.Mark != 0 {
		t.Errorf("a packet sent through the veth by the router: verdict %d, mark %#x; want it on at once, unmarked", v, c.Mark)
	}
}

// TestSliceClassAtUplink: a pod's packet leaving by an uplink gets its
// class again (the kernel's forwarding resets skb->priority): its HTB
// class, or its slice's band with EDT; a packet of a pod in no slice
// keeps what it has (the positive control), and so does one still in the
// netcube class from_pod gave it.
func TestSliceClassAtUplink(t *testing.T) {
	dp, _ := load(t)
	tables := qos.NewTables(dp.Maps())
	if err := tables.Apply(qos.Desired{
		Slices: map[uint32]datapath.QosSlice{1: {Priority: 6, Dscp: 46, Class: datapath.QosLatency}},
		Pods:   map[netip.Addr]datapath.QosPod{client4.Addr(): {Slice: 1, Classid: 0x4e430010}},
	}); err != nil {
		t.Fatal(err)
	}
	prog := dp.Programs().ToNet
	var forwarded skbCtx
	forwarded.Priority = 3 // what ip_forward made of its TOS
	if v, _, c := runCtxIn(t, prog, pkt.UDP(client4, be4, []byte("hello")), forwarded); v == actShot || c.Priority != 3 {
		t.Fatalf("classification off (no pod has a slice, as the agent says): verdict %d, priority %#x, want 3 kept", v, c.Priority)
	}
	setQoSConfig(t, dp, datapath.QosConf{Mode: datapath.QosModeHTB, Active: 1, HtbMajor: 0x4e43})
	if v, _, c := runCtxIn(t, prog, pkt.UDP(be4b, be4, []byte("hello")), forwarded); v == actShot || c.Priority != 3 {
		t.Fatalf("a pod in no slice: verdict %d, priority %#x, want 3 kept", v, c.Priority)
	}
	if v, _, c := runCtxIn(t, prog, pkt.UDP(client4, be4, []byte("hello")), forwarded); v == actShot || c.Priority != 0x4e430010 {
		t.Errorf("HTB, a pod in the latency slice: verdict %d, priority %#x, want its class 4e43:10", v, c.Priority)
	}
	var classed skbCtx
	classed.Priority = 0x4e431005 // given by from_pod, not reset on the way
	if v, _, c := runCtxIn(t, prog, pkt.UDP(client4, be4, []byte("hello")), classed); v == actShot || c.Priority != 0x4e431005 {
		t.Errorf("HTB, a packet already in a netcube class: verdict %d, priority %#x, want it kept", v, c.Priority)
	}
	setQoSConfig(t, dp, datapath.QosConf{Mode: datapath.QosModeEDT, Active: 1})
	if v, _, c := runCtxIn(t, prog, pkt.UDP(client4, be4, []byte("hello")), forwarded); v == actShot || c.Priority != 6 {
		t.Errorf("EDT, a pod in the latency slice: verdict %d, priority %#x, want its band's 6", v, c.Priority)
	}
}
