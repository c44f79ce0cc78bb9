// Package xdpgen is bench nodeport's packet generator and counter, as XDP
// programs written with cilium/ebpf's asm (a few instructions each: no C,
// no generated bindings).
//
// The generator sends one UDP frame again and again with
// BPF_PROG_TEST_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES): the
// kernel runs the program on a copy of the frame in a page pool and, as
// it returns XDP_TX, transmits it out of the context's ingress device
// (that device's ndo_xdp_xmit; for a veth, into its peer's XDP ring, so
// the peer needs NAPI: an XDP program or GRO on it). Each run writes the
// next source port (Frame.Ports of them in turn, so that many flows) and
// the UDP checksum for it, from constants: the kernel may or may not
// reset a recycled page to the frame given, so nothing is read back from
// the packet.
//
// A veth takes XDP_TX'd frames only when its peer runs NAPI: the
// sandbox's XDPUnderlay puts a pass-through program on the underlay's
// ends for that.
//
// The counter counts and drops UDP to one destination port (IPv4 with a
// 20-byte header, IPv6 with UDP as the first next header); everything
// else passes.
package xdpgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// XDP verdicts.
const (
	xdpDrop = 1
	xdpPass = 2
	xdpTX   = 3
)

// PayloadLen is the UDP payload of a generated frame: a 60-byte IPv4
// frame (the Ethernet minimum without its FCS), an 80-byte IPv6 one.
const PayloadLen = 18

// Frame describes the generated packets.
type Frame struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.Addr // one family
	SrcPort        uint16     // the first of Ports source ports
	Ports          int        // source ports cycled over (default 1024)
	DstPort        uint16
}

func (f Frame) ports() int {
	if f.Ports <= 0 {
		return 1024
	}
	return f.Ports
}

// offsets of the UDP source port and checksum in the frame.
func (f Frame) offsets() (sport, csum int) {
	l3 := 20
	if f.Dst.Is6() {
		l3 = 40
	}
	return 14 + l3, 14 + l3 + 6
}

// Bytes renders the frame with source port SrcPort and a correct UDP
// checksum (and IPv4 header checksum).
func (f Frame) Bytes() ([]byte, error) {
	if len(f.SrcMAC) != 6 || len(f.DstMAC) != 6 {
		return nil, errors.New("xdpgen: MAC addresses must be 6 bytes")
	}
	if !f.Src.IsValid() || !f.Dst.IsValid() || f.Src.Is4() != f.Dst.Is4() {
		return nil, fmt.Errorf("xdpgen: addresses %s, %s: want two of one family", f.Src, f.Dst)
	}
	if f.SrcPort == 0 || int(f.SrcPort)+f.ports()-1 > 0xffff {
		return nil, fmt.Errorf("xdpgen: source ports %d + %d do not fit", f.SrcPort, f.ports())
	}
	udpLen := 8 + PayloadLen
	b := append([]byte(nil), f.DstMAC...)
	b = append(b, f.SrcMAC...)
	if f.Dst.Is4() {
		b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IP)
		ip := make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		s, d := f.Src.As4(), f.Dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip)))
		b = append(b, ip...)
	} else {
		b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6], ip[7] = unix.IPPROTO_UDP, 64
		s, d := f.Src.As16(), f.Dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		b = append(b, ip...)
	}
	b = binary.BigEndian.AppendUint16(b, f.SrcPort)
	b = binary.BigEndian.AppendUint16(b, f.DstPort)
	b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
	b = append(b, 0, 0) // checksum
	for i := range PayloadLen {
		b = append(b, byte('a'+i))
	}
	_, c := f.offsets()
	binary.BigEndian.PutUint16(b[c:], UDPChecksum(b))
	return b, nil
}

// UDPChecksum computes a frame's UDP checksum from scratch (its checksum
// field read as 0): the pseudo-header, the UDP header and payload; 0xffff
// for a sum of 0 (0 means "none").
func UDPChecksum(frame []byte) uint16 {
	var pseudo []byte
	var udp []byte
	switch binary.BigEndian.Uint16(frame[12:]) {
	case unix.ETH_P_IP:
		ihl := int(frame[14]&0x0f) * 4
		udp = frame[14+ihl:]
		pseudo = append(append([]byte(nil), frame[26:34]...), 0, unix.IPPROTO_UDP)
	default:
		udp = frame[54:]
		pseudo = append([]byte(nil), frame[22:54]...)
		pseudo = append(pseudo, 0, 0, 0, 0, 0, 0, 0, unix.IPPROTO_UDP)
	}
	udp = udp[:binary.BigEndian.Uint16(udp[4:])]
	pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(len(udp)))
	s := sum(0, pseudo)
	s = sum(s, udp[:6])
	s = sum(s, udp[8:])
	c := ^fold(s)
	if c == 0 {
		c = 0xffff
	}
	return c
}

func sum(s uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// checksumBase is the constant the program adds the port to: the
// frame's checksum with its source port taken out (RFC 1624, eqn. 3:
// C' = ~(~C + ~m + m')).
func checksumBase(csum0, port0 uint16) int64 {
	return int64(^csum0) + int64(^port0)
}

// PortChecksum is the checksum the generator writes for source port p,
// computed as its instructions do: from the frame's checksum csum0 at
// source port port0.
func PortChecksum(csum0, port0, p uint16) uint16 {
	s := uint64(checksumBase(csum0, port0)) + uint64(p)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	c := uint16(^s)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// Generator is the sending program with its frame.
type Generator struct {
	// BatchSize is how many frames the kernel sends at a time (0: its
	// default, 64; at most 256).
	BatchSize uint32
	frame     []byte
	prog      *ebpf.Program
	count     *ebpf.Map // [0]: frames generated
}

// NewGenerator loads the generator for f.
func NewGenerator(f Frame) (*Generator, error) {
	frame, err := f.Bytes()
	if err != nil {
		return nil, err
	}
	sport, csum := f.offsets()
	count, err := counterMap("xdpgen_sent")
	if err != nil {
		return nil, err
	}
	k := checksumBase(binary.BigEndian.Uint16(frame[csum:]), f.SrcPort)
	insns := asm.Instructions{
		asm.LoadMem(asm.R8, asm.R1, 0, asm.Word), // data
		asm.LoadMem(asm.R9, asm.R1, 4, asm.Word), // data_end
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Add.Imm(asm.R2, int32(len(frame))),
		asm.JGT.Reg(asm.R2, asm.R9, "drop"),
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, count.FD()),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		// One sender per program: a plain increment.
		asm.LoadMem(asm.R7, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R7, 1),
		asm.StoreMem(asm.R0, 0, asm.R7, asm.DWord),
		asm.Mod.Imm(asm.R7, int32(f.ports())),
		asm.Add.Imm(asm.R7, int32(f.SrcPort)), // the port
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.StoreMem(asm.R8, int16(sport), asm.R1, asm.Half),
		// The checksum: ~fold(K + port), 0 sent as 0xffff.
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, int32(k)),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 16),
		asm.And.Imm(asm.R1, 0xffff),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 16),
		asm.And.Imm(asm.R1, 0xffff),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.Xor.Imm(asm.R1, 0xffff),
		asm.JNE.Imm(asm.R1, 0, "store"),
		asm.Mov.Imm(asm.R1, 0xffff),
		asm.HostTo(asm.BE, asm.R1, asm.Half).WithSymbol("store"),
		asm.StoreMem(asm.R8, int16(csum), asm.R1, asm.Half),
		asm.Mov.Imm(asm.R0, xdpTX),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("drop"),
		asm.Return(),
	}
	prog, err := loadXDP("xdpgen_send", insns)
	if err != nil {
		count.Close()
		return nil, err
	}
	return &Generator{frame: frame, prog: prog, count: count}, nil
}

// xdpMD is struct xdp_md, the test run's context.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// Send runs the generator n times in live-frames mode, each frame sent
// out of device ifindex. The calling goroutine must be locked to a thread
// in ifindex's network namespace (InNetns).
func (g *Generator) Send(ifindex int, n uint32) error {
	_, err := g.prog.Run(&ebpf.RunOptions{
		Data: g.frame, Repeat: n, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, BatchSize: g.BatchSize,
		Context: xdpMD{DataEnd: uint32(len(g.frame)), IngressIfindex: uint32(ifindex)},
	})
	return err
}

// Run runs the generator once on the frame, not live, and returns the
// frame it produced (tests).
func (g *Generator) Run() ([]byte, uint32, error) {
	out := make([]byte, len(g.frame))
	ret, err := g.prog.Run(&ebpf.RunOptions{Data: g.frame, DataOut: out})
	return out, ret, err
}

// Sent is how many frames the program has produced so far.
func (g *Generator) Sent() (uint64, error) { return read(g.count) }

// Close unloads the generator.
func (g *Generator) Close() {
	g.prog.Close()
	g.count.Close()
}

// Counter counts and drops UDP to a port, also behind netcube's DSR
// option (IPv4, 8 bytes) or destination options header (IPv6, 24 bytes).
type Counter struct {
	prog  *ebpf.Program
	count *ebpf.Map
	link  link.Link
}

// NewCounter loads a counter of UDP to port.
func NewCounter(port uint16) (*Counter, error) {
	count, err := counterMap("xdpgen_recv")
	if err != nil {
		return nil, err
	}
	be := int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, port)))
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
		asm.JEq.Imm(asm.R5, int32(binary.NativeEndian.Uint16([]byte{0x08, 0x00})), "v4"),
		asm.JEq.Imm(asm.R5, int32(binary.NativeEndian.Uint16([]byte{0x86, 0xdd})), "v6"),
		asm.Ja.Label("pass"),
		// IPv4
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("v4"),
		asm.Add.Imm(asm.R4, 14+20+8),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+9, asm.Byte),
		asm.JNE.Imm(asm.R5, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14, asm.Byte),
		asm.JEq.Imm(asm.R5, 0x47, "v4dsr"),
		asm.JNE.Imm(asm.R5, 0x45, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+20+2, asm.Half),
		asm.JNE.Imm(asm.R5, be, "pass"),
		asm.Ja.Label("hit"),
		// IPv4 with netcube's DSR option (8 bytes) before UDP
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("v4dsr"),
		asm.Add.Imm(asm.R4, 14+28+8),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+28+2, asm.Half),
		asm.JNE.Imm(asm.R5, be, "pass"),
		asm.Ja.Label("hit"),
		// IPv6
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("v6"),
		asm.Add.Imm(asm.R4, 14+40+8),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+6, asm.Byte),
		asm.JEq.Imm(asm.R5, unix.IPPROTO_DSTOPTS, "v6dsr"),
		asm.JNE.Imm(asm.R5, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+40+2, asm.Half),
		asm.JNE.Imm(asm.R5, be, "pass"),
		asm.Ja.Label("hit"),
		// IPv6 with netcube's DSR destination options header (24 bytes)
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("v6dsr"),
		asm.Add.Imm(asm.R4, 14+64+8),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+40, asm.Byte),
		asm.JNE.Imm(asm.R5, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14+64+2, asm.Half),
		asm.JNE.Imm(asm.R5, be, "pass"),
		// Count (any CPU may run it: atomically) and drop.
		asm.StoreImm(asm.R10, -4, 0, asm.Word).WithSymbol("hit"),
		asm.LoadMapPtr(asm.R1, count.FD()),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("drop"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
	prog, err := loadXDP("xdpgen_count", insns)
	if err != nil {
		count.Close()
		return nil, err
	}
	return &Counter{prog: prog, count: count}, nil
}

// Attach attaches the counter to device ifname of network namespace ns,
// in mode: link.XDPGenericMode (skb) sees packets however they reach the
// device, bpf_redirect_peer's included, which skip a veth's native XDP
// (link.XDPDriverMode).
func (c *Counter) Attach(ns, ifname string, mode link.XDPAttachFlags) error {
	return InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		c.link, err = link.AttachXDP(link.XDPOptions{Program: c.prog, Interface: ifi.Index, Flags: mode})
		return err
	})
}

// Count is how many packets it has counted (and dropped) so far.
func (c *Counter) Count() (uint64, error) { return read(c.count) }

// Close detaches and unloads the counter.
func (c *Counter) Close() {
	if c.link != nil {
		c.link.Close()
	}
	c.prog.Close()
	c.count.Close()
}

func counterMap(name string) (*ebpf.Map, error) {
	return ebpf.NewMap(&ebpf.MapSpec{Name: name, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
}

func loadXDP(name string, insns asm.Instructions) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.XDP, License: "Dual BSD/GPL", Instructions: insns})
	if err != nil {
		return nil, fmt.Errorf("xdpgen: load %s: %w", name, err)
	}
	return prog, nil
}

func read(m *ebpf.Map) (uint64, error) {
	var v uint64
	err := m.Lookup(uint32(0), &v)
	return v, err
}

// InNetns runs fn on a thread of its own in network namespace name
// (/run/netns), and waits for it. The thread goes back to the runtime
// only if it could be moved back; otherwise it ends with its goroutine.
func InNetns(name string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- err
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromName(name)
		if err != nil {
			done <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			done <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(ferr, err) // the thread stays locked: it ends with this goroutine
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}
