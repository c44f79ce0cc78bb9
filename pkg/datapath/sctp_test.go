package datapath_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// SCTP Services, proven with packets: this machine's kernel has no SCTP
// (no socket can serve or dial it), so every row runs the real programs
// with BPF_PROG_RUN and compares the packet they leave byte for byte with
// one gopacket encodes afresh, its CRC32c computed over the whole SCTP
// packet (TestSCTPReferenceCRC checks that encoder against RFC 3720's
// vector). A row whose port changes proves the datapath's CRC update
// (bpf/cubes/nat/sctp.h); one whose port stays, that an address change
// leaves the CRC alone.

// SCTP chunks (RFC 9260, 3.3), as the reference packets carry them.
func sctpData(payload []byte) []byte {
	c := make([]byte, 16, 16+len(payload)+3)
	c[0], c[1] = 0, 0x03 // DATA, unfragmented
	binary.BigEndian.PutUint16(c[2:], uint16(16+len(payload)))
	binary.BigEndian.PutUint32(c[4:], 1) // TSN
	c = append(c, payload...)
	for len(c)%4 != 0 {
		c = append(c, 0)
	}
	return c
}

func sctpInitAck() []byte {
	c := make([]byte, 20)
	c[0] = 2 // INIT ACK
	binary.BigEndian.PutUint16(c[2:], 20)
	binary.BigEndian.PutUint32(c[4:], 0x9abcdef0) // initiate tag
	binary.BigEndian.PutUint32(c[8:], 65535)
	binary.BigEndian.PutUint16(c[12:], 10)
	binary.BigEndian.PutUint16(c[14:], 10)
	binary.BigEndian.PutUint32(c[16:], 1)
	return c
}

func sctpChunk(typ byte) []byte { return []byte{typ, 0, 0, 4} } // ABORT (6), SHUTDOWN COMPLETE (14)

// sctpPacket encodes Ethernet/IP/SCTP from src to dst carrying chunks,
// its CRC32c computed by gopacket.
func sctpPacket(src, dst netip.AddrPort, chunks []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: pkt.PodMAC, DstMAC: pkt.HostMAC}
	var ip gopacket.SerializableLayer
	if src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip = &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: 0x1234, Flags: layers.IPv4DontFragment,
			Protocol: layers.IPProtocolSCTP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip = &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolSCTP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	}
	sctp := &layers.SCTP{SrcPort: layers.SCTPPort(src.Port()), DstPort: layers.SCTPPort(dst.Port()), VerificationTag: 0x12345678}
	return sctpSerialize(eth, ip, sctp, chunks)
}

// sctpRewrite is packet with its addresses and ports replaced, as the
// datapath's translation must leave it, encoded afresh by gopacket (IPv4
// header checksum and SCTP CRC32c recomputed from scratch).
func sctpRewrite(packet []byte, src, dst netip.AddrPort) []byte {
	p := gopacket.NewPacket(packet, layers.LayerTypeEthernet, gopacket.Default)
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	sctp := p.Layer(layers.LayerTypeSCTP).(*layers.SCTP)
	var ip gopacket.SerializableLayer
	if v4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		v4.SrcIP, v4.DstIP = src.Addr().AsSlice(), dst.Addr().AsSlice()
		ip = v4
	} else {
		v6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		v6.SrcIP, v6.DstIP = src.Addr().AsSlice(), dst.Addr().AsSlice()
		ip = v6
	}
	sctp.SrcPort, sctp.DstPort = layers.SCTPPort(src.Port()), layers.SCTPPort(dst.Port())
	return sctpSerialize(eth, ip, sctp, sctp.Payload)
}

func sctpSerialize(eth, ip gopacket.SerializableLayer, sctp *layers.SCTP, chunks []byte) []byte {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, sctp, gopacket.Payload(chunks)); err != nil {
		panic(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// sctpOff is where packet's SCTP header starts (no IP options or
// extension headers in these packets).
func sctpOff(packet []byte) int {
	if packet[12] == 0x08 {
		return 14 + 20
	}
	return 14 + 40
}

// withoutCRC is packet with its SCTP checksum 0, as a stack that leaves
// the CRC to the device (CHECKSUM_PARTIAL) hands it over.
func withoutCRC(packet []byte) []byte {
	out := append([]byte(nil), packet...)
	o := sctpOff(out)
	copy(out[o+8:o+12], []byte{0, 0, 0, 0})
	return out
}

// TestSCTPReferenceCRC: the reference encoder's CRC32c is RFC 3720's
// (B.4: 32 bytes of zeros give aa 36 91 8a on the wire, the byte order
// SCTP uses too, RFC 9260 appendix B): an SCTP header of zeros and 20
// zero bytes of chunk is such a message. Then a packet it encodes checks
// against hash/crc32's Castagnoli table directly.
func TestSCTPReferenceCRC(t *testing.T) {
	if got := crc32.Checksum(make([]byte, 32), crc32.MakeTable(crc32.Castagnoli)); got != 0x8a9136aa {
		t.Fatalf("hash/crc32 Castagnoli of 32 zero bytes: %#x, want 0x8a9136aa", got)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true},
		&layers.SCTP{}, gopacket.Payload(make([]byte, 20))); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[8:12]; !bytes.Equal(got, []byte{0xaa, 0x36, 0x91, 0x8a}) {
		t.Fatalf("gopacket's SCTP checksum of the RFC 3720 vector: % x, want aa 36 91 8a", got)
	}
	p := sctpPacket(client4, vip4, sctpData([]byte("hello")))
	o := sctpOff(p)
	s := append([]byte(nil), p[o:]...)
	want := binary.LittleEndian.Uint32(s[8:])
	copy(s[8:12], []byte{0, 0, 0, 0})
	if got := crc32.Checksum(s, crc32.MakeTable(crc32.Castagnoli)); got != want || want == 0 {
		t.Errorf("reference packet's CRC %#x, hash/crc32's %#x", want, got)
	}
}

// runBig is run for packets larger than run's output buffer.
func runBig(t *testing.T, dp *datapath.Datapath, s step) {
	t.Helper()
	out := make([]byte, len(s.in)+256)
	opts := runOpts(s.in, out)
	verdict, err := dp.Programs().FromPod.Run(opts)
	if err != nil {
		t.Fatalf("%s: run: %v", s.name, err)
	}
	if verdict != s.verdict || !bytes.Equal(opts.DataOut, s.out) {
		t.Errorf("%s: verdict %d (want %d), output packet differs: %v", s.name, verdict, s.verdict, !bytes.Equal(opts.DataOut, s.out))
	}
}

// TestSCTPClusterIP: a pod's association with a ClusterIP, v4 and v6:
// its packets DNATed (port 80 -> 8080: the CRC updated), the backend's
// reverse-NATed (8080 -> 80), DATA of many lengths (the CRC update's
// every table row but the jumbo frames' one, which pkg/cubes/nat's
// TestSCTPCRCTable checks); a backend on the frontend's port (only the
// address changes, the CRC must not); a checksum left to the device
// stays 0. ABORT ends the association in conntrack.
func TestSCTPClusterIP(t *testing.T) {
	dp, cube := load(t)
	sameport4 := netip.MustParseAddrPort("10.96.0.11:2905")
	bsame4 := netip.MustParseAddrPort("10.244.2.21:2905")
	for _, fb := range []model.FrontendBackends{
		{Frontend: frontend(vip4, model.SCTP), Backends: backends(be4)},
		{Frontend: frontend(vip6, model.SCTP), Backends: backends(be6)},
		{Frontend: frontend(sameport4, model.SCTP), Backends: backends(bsame4)},
	} {
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ client, vip, be netip.AddrPort }{{client4, vip4, be4}, {client6, vip6, be6}} {
		init := pkt.SCTPInit(c.client, c.vip)
		run(t, dp, step{name: "INIT to the ClusterIP", in: init, verdict: actOK, out: sctpRewrite(init, c.client, c.be)})
		ack := sctpPacket(c.be, c.client, sctpInitAck())
		run(t, dp, step{name: "INIT ACK from the backend", toPod: true, in: ack, verdict: actOK, out: sctpRewrite(ack, c.vip, c.client)})
		for _, n := range []int{1, 13, 100, 333, 1000, 1400} {
			data := sctpPacket(c.client, c.vip, sctpData(bytes.Repeat([]byte{byte(n)}, n)))
			run(t, dp, step{name: "DATA", in: data, verdict: actOK, out: sctpRewrite(data, c.client, c.be)})
		}
	}
	// Past run's buffer, up to what BPF_PROG_RUN takes (a page).
	for _, n := range []int{1500, 2100, 3300} {
		data := sctpPacket(client4, vip4, sctpData(bytes.Repeat([]byte{0x5a}, n)))
		runBig(t, dp, step{name: "large DATA", in: data, verdict: actOK, out: sctpRewrite(data, client4, be4)})
	}

	init := pkt.SCTPInit(client4, sameport4)
	run(t, dp, step{name: "same port: only the address changes, the CRC stays", in: init, verdict: actOK,
		out: sctpRewrite(init, client4, bsame4)})
	if o := sctpOff(init); !bytes.Equal(init[o+8:o+12], sctpRewrite(init, client4, bsame4)[o+8:o+12]) {
		t.Error("the reference changed the CRC for an address: SCTP's CRC has no pseudo-header")
	}
	data := sctpPacket(client4, vip4, sctpData([]byte("offloaded")))
	run(t, dp, step{name: "CRC left to the device: stays 0", in: withoutCRC(data), verdict: actOK,
		out: withoutCRC(sctpRewrite(data, client4, be4))})

	// Conntrack: the flows above hold 2 entries each (3 associations);
	// an ABORT, translated, ends its association.
	if n := countEntries(t, dp, "ct_flows"); n != 6 {
		t.Fatalf("%d conntrack entries, want 6 (3 associations)", n)
	}
	abort := sctpPacket(client4, vip4, sctpChunk(6))
	run(t, dp, step{name: "ABORT", in: abort, verdict: actOK, out: sctpRewrite(abort, client4, be4)})
	if n := countEntries(t, dp, "ct_flows"); n != 4 {
		t.Errorf("%d conntrack entries after the ABORT, want 4", n)
	}
	done := sctpPacket(be6, client6, sctpChunk(14))
	run(t, dp, step{name: "SHUTDOWN COMPLETE from the backend", toPod: true, in: done, verdict: actOK, out: sctpRewrite(done, vip6, client6)})
	if n := countEntries(t, dp, "ct_flows"); n != 2 {
		t.Errorf("%d conntrack entries after the SHUTDOWN COMPLETE, want 2", n)
	}
}

// TestSCTPRefused: an SCTP port of a Service without endpoints is
// answered with ICMP port unreachable (kube-proxy's REJECT); a first
// fragment whose port would change cannot have its CRC updated (it covers
// fragments not seen here): dropped with MON_DROP_NAT_REWRITE, the same
// INIT unfragmented translated (positive control).
func TestSCTPRefused(t *testing.T) {
	dp, cube := load(t)
	empty := netip.MustParseAddrPort("10.96.0.12:80")
	for _, fb := range []model.FrontendBackends{
		{Frontend: frontend(vip4, model.SCTP), Backends: backends(be4)},
		{Frontend: frontend(empty, model.SCTP)},
	} {
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	init := pkt.SCTPInit(client4, empty)
	run(t, dp, step{name: "no endpoints", in: init, verdict: actRedirect, out: pkt.PortUnreachable(init)})

	init = pkt.SCTPInit(client4, vip4)
	run(t, dp, step{name: "unfragmented", in: init, verdict: actOK, out: sctpRewrite(init, client4, be4)})
	frag := append([]byte(nil), pkt.SCTPInit(netip.AddrPortFrom(client4.Addr(), 40001), vip4)...)
	frag[14+6] = 0x20 // more fragments, offset 0
	frag = pkt.WithTTL(frag, 64)
	before := drops(t, dp)[datapath.MonDropNATRewrite]
	run(t, dp, step{name: "first fragment", in: frag, verdict: actShot, out: frag})
	if n := drops(t, dp)[datapath.MonDropNATRewrite] - before; n != 1 {
		t.Errorf("%d drops counted as NAT rewrite, want 1", n)
	}
}

// TestSCTPExternal: SCTP to a NodePort and to a LoadBalancer IP from the
// node's uplink (externalTrafficPolicy Cluster): DNATed to the backend
// (30080 -> 8080) and SNATed to the node, the client's port kept while
// free and another given to a second client with the same port (both
// ports rewritten, the CRC updated for each); the backend's replies, on
// the uplink, go back to each client from the frontend.
func TestSCTPExternal(t *testing.T) {
	dp, cube := load(t)
	if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
		t.Fatal(err)
	}
	for _, fb := range []model.FrontendBackends{
		{Frontend: frontend(np4, model.SCTP), Flags: model.External, Backends: backends(be4)},
		{Frontend: frontend(np6, model.SCTP), Flags: model.External, Backends: backends(be6)},
		{Frontend: frontend(extIP4, model.SCTP), Flags: model.External, Backends: backends(be4b)},
	} {
		if err := cube.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name           string
		client, fe, be netip.AddrPort
		node           netip.Addr
	}{{"NodePort v4", ext4, np4, be4, node4}, {"NodePort v6", ext6, np6, be6, node6}, {"LoadBalancer IP", ext4, extIP4, be4b, node4}} {
		init := pkt.SCTPInit(c.client, c.fe)
		run(t, dp, step{name: c.name + ": INIT", fromNet: true, in: init, verdict: actOK, out: sctpRewrite(init, snat(c.node, 61234), c.be)})
		ack := sctpPacket(c.be, snat(c.node, 61234), sctpInitAck())
		run(t, dp, step{name: c.name + ": INIT ACK", fromNet: true, in: ack, verdict: actOK, out: sctpRewrite(ack, c.fe, c.client)})
	}
	second := pkt.SCTPInit(ext4b, np4)
	run(t, dp, step{name: "a second client, same port: another SNAT port", fromNet: true, in: second, verdict: actOK,
		out: sctpRewrite(second, snat(node4, 61235), be4)})
	ack := sctpPacket(be4, snat(node4, 61235), sctpInitAck())
	run(t, dp, step{name: "whose reply reaches it", fromNet: true, in: ack, verdict: actOK, out: sctpRewrite(ack, np4, ext4b)})
}

// TestSCTPMasquerade: a pod's SCTP association to outside the cluster
// leaves with the node's address and a SNAT port (40000 is outside the
// SNAT range: the port changes, so does the CRC), one hop less; the
// answer comes back to the pod, translated. Inside the cluster nothing
// is translated (positive control of the rewrite).
func TestSCTPMasquerade(t *testing.T) {
	dp := masqSetup(t)
	inside := pkt.SCTPInit(client4, pod4)
	run(t, dp, step{name: "pod -> another node's pod: untouched", in: inside, verdict: actOK})

	for _, c := range []struct {
		client, server netip.AddrPort
		node           netip.Addr
	}{
		{client4, netip.MustParseAddrPort("192.0.2.1:3868"), node4},
		{client6, netip.MustParseAddrPort("[2001:db8::1]:3868"), node6},
	} {
		in := pkt.SCTPInit(c.client, c.server)
		out := make([]byte, 1600)
		opts := runOpts(in, out)
		if _, err := dp.Programs().FromPod.Run(opts); err != nil {
			t.Fatal(err)
		}
		o := sctpOff(opts.DataOut)
		port := binary.BigEndian.Uint16(opts.DataOut[o:])
		src := netip.AddrPortFrom(c.node, port)
		if port < 61000 {
			t.Fatalf("%s masqueraded to port %d, want 61000+", c.client, port)
		}
		if want := pkt.Hop(sctpRewrite(in, src, c.server)); !bytes.Equal(opts.DataOut, want) {
			t.Errorf("masqueraded INIT differs\n got: %s\nwant: %s", hex.EncodeToString(opts.DataOut), hex.EncodeToString(want))
		}
		data := sctpPacket(c.client, c.server, sctpData([]byte("diameter")))
		run(t, dp, step{name: "DATA keeps the port", in: data, verdict: actOK, out: pkt.Hop(sctpRewrite(data, src, c.server))})
		answer := sctpPacket(c.server, src, sctpInitAck())
		run(t, dp, step{name: "answer to the node's port", fromNet: true, in: answer, verdict: actRedirect,
			out: withMACs(sctpRewrite(answer, c.server, c.client), podMAC, hostMAC)})
	}
}
