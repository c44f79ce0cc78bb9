package xdpgen

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
)

func testFrame(dst string) Frame {
	src := "172.30.0.200"
	if netip.MustParseAddr(dst).Is6() {
		src = "fd00:172:30::200"
	}
	return Frame{
		SrcMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SrcPort: 20000, DstPort: 30999,
	}
}

var families = []string{"172.30.0.11", "fd00:172:30::11"}

// The frames are well formed: lengths, IPv4 header checksum, the UDP
// checksum against one computed independently of UDPChecksum's layout.
func TestFrameBytes(t *testing.T) {
	for _, dst := range families {
		f := testFrame(dst)
		b, err := f.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		sport, csum := f.offsets()
		want := 60
		if f.Dst.Is6() {
			want = 80
		}
		if len(b) != want {
			t.Errorf("%s: frame of %d bytes, want %d", dst, len(b), want)
		}
		if got := binary.BigEndian.Uint16(b[sport:]); got != f.SrcPort {
			t.Errorf("%s: source port %d, want %d", dst, got, f.SrcPort)
		}
		if f.Dst.Is4() && fold(sum(0, b[14:34])) != 0xffff {
			t.Errorf("IPv4 header checksum wrong: % x", b[14:34])
		}
		// A receiver's check: the sum over pseudo-header and the whole
		// datagram, checksum included, is 0xffff.
		var pseudo []byte
		udp := b[sport:]
		if f.Dst.Is4() {
			pseudo = append(append([]byte(nil), b[26:34]...), 0, 17, 0, byte(len(udp)))
		} else {
			pseudo = append(append([]byte(nil), b[22:54]...), 0, 0, 0, byte(len(udp)), 0, 0, 0, 17)
		}
		if s := fold(sum(sum(0, pseudo), udp)); s != 0xffff || binary.BigEndian.Uint16(b[csum:]) == 0 {
			t.Errorf("%s: UDP checksum %#04x does not verify (sum %#04x)", dst, binary.BigEndian.Uint16(b[csum:]), s)
		}
	}
}

// The checksum the program writes for each source port (its arithmetic,
// PortChecksum) is the one computed from scratch for a frame with that
// port.
func TestPortChecksum(t *testing.T) {
	for _, dst := range families {
		f := testFrame(dst)
		b, err := f.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		sport, csum := f.offsets()
		c0 := binary.BigEndian.Uint16(b[csum:])
		for p := int(f.SrcPort); p < int(f.SrcPort)+f.ports(); p++ {
			binary.BigEndian.PutUint16(b[sport:], uint16(p))
			if got, want := PortChecksum(c0, f.SrcPort, uint16(p)), UDPChecksum(b); got != want {
				t.Fatalf("%s port %d: program's checksum %#04x, from scratch %#04x", dst, p, got, want)
			}
		}
	}
	// A sum that folds to 0xffff is sent as 0xffff, never 0.
	if c := PortChecksum(0xffff, 0xffff, 0xffff); c != 0xffff {
		t.Errorf("PortChecksum wrote %#04x for a zero checksum", c)
	}
}

func TestFrameErrors(t *testing.T) {
	f := testFrame(families[0])
	f.Dst = netip.MustParseAddr(families[1])
	if _, err := f.Bytes(); err == nil {
		t.Error("mixed families accepted")
	}
	f = testFrame(families[0])
	f.SrcPort = 65000
	if _, err := f.Bytes(); err == nil {
		t.Error("source ports past 65535 accepted")
	}
}

// The loaded programs (root: BPF_PROG_TEST_RUN, not live): the generator
// writes the ports in turn with their checksums; the counter drops and
// counts UDP to its port and passes the rest.
func TestPrograms(t *testing.T) {
	testenv.RequireRoot(t)
	for _, dst := range families {
		f := testFrame(dst)
		f.Ports = 5
		g, err := NewGenerator(f)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		c, err := NewCounter(f.DstPort)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sport, csum := f.offsets()
		for i := 1; i <= 12; i++ {
			out, ret, err := g.Run()
			if err != nil {
				t.Fatal(err)
			}
			if ret != xdpTX {
				t.Fatalf("generator returned %d, want XDP_TX", ret)
			}
			wantPort := f.SrcPort + uint16(i%f.Ports)
			if got := binary.BigEndian.Uint16(out[sport:]); got != wantPort {
				t.Fatalf("%s run %d: source port %d, want %d", dst, i, got, wantPort)
			}
			if got, want := binary.BigEndian.Uint16(out[csum:]), UDPChecksum(out); got != want {
				t.Fatalf("%s port %d: checksum %#04x, from scratch %#04x", dst, wantPort, got, want)
			}
			if ret, err := c.prog.Run(&ebpf.RunOptions{Data: out}); err != nil || ret != xdpDrop {
				t.Fatalf("counter: %d, %v; want XDP_DROP", ret, err)
			}
		}
		if n, _ := g.Sent(); n != 12 {
			t.Errorf("generator counted %d frames, want 12", n)
		}
		if n, _ := c.Count(); n != 12 {
			t.Errorf("counter counted %d, want 12", n)
		}
		other := testFrame(dst)
		other.DstPort = 53
		b, _ := other.Bytes()
		if ret, err := c.prog.Run(&ebpf.RunOptions{Data: b}); err != nil || ret != xdpPass {
			t.Fatalf("counter on another port: %d, %v; want XDP_PASS", ret, err)
		}
	}
}

// The counter finds the UDP port behind netcube's DSR option (IPv4) or
// destination options header (IPv6) too, as node1 sends it with
// --nodeport-mode dsr; a datagram to another port passes (the control).
func TestCounterBehindDSR(t *testing.T) {
	testenv.RequireRoot(t)
	c, err := NewCounter(9999)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, fam := range []struct{ client, np, pod string }{
		{"172.30.0.200:20000", "172.30.0.11:30999", "10.244.2.1:9999"},
		{"[fd00:172:30::200]:20000", "[fd00:172:30::11]:30999", "[fd00:10:244:2::1]:9999"},
	} {
		client, np, pod := netip.MustParseAddrPort(fam.client), netip.MustParseAddrPort(fam.np), netip.MustParseAddrPort(fam.pod)
		other := netip.AddrPortFrom(pod.Addr(), 9998)
		for _, f := range []struct {
			name  string
			frame []byte
			want  uint32
		}{
			{"plain, to the port", pkt.UDP(client, pod, []byte("x")), xdpDrop},
			{"DSR, to the port", pkt.WithDSR(pkt.UDP(client, pod, []byte("x")), np), xdpDrop},
			{"DSR, another port", pkt.WithDSR(pkt.UDP(client, other, []byte("x")), np), xdpPass},
		} {
			if ret, err := c.prog.Run(&ebpf.RunOptions{Data: f.frame}); err != nil || ret != f.want {
				t.Errorf("%s %s: %d, %v; want %d", fam.pod, f.name, ret, err, f.want)
			}
		}
	}
}
