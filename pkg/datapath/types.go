package datapath

import (
	"encoding/binary"
	"net/netip"
)

// Map layouts, generated from bpf/lib/*.h. Ports are in network byte order,
// as the datapath sees them; use Port and HostPort to convert.
type (
	Addr         = bpfNcAddr
	ServiceKey   = bpfLbSvcKey
	ServiceValue = bpfLbSvcVal
	Backend      = bpfLbBackend
	Frontend     = bpfLbFrontend
	CTKey        = bpfCtKey
	CTEntry      = bpfCtEntry
	SockKey      = bpfSockKey

	AffinityKey      = bpfLbAffinityKey
	AffinityValue    = bpfLbAffinityVal
	AffinityMatchKey = bpfLbAffinityMatchKey
	SourceRangeKey   = bpfLbSourceRangeKey
)

// IP protocol numbers as stored in the maps.
const (
	ProtoTCP uint8 = 6
	ProtoUDP uint8 = 17
)

// Conntrack directions (enum ct_dir in bpf/lib/ct.h).
const (
	CTService uint8 = 1
	CTReply   uint8 = 2
)

// AddrFrom converts an address into the datapath's 16-byte form (IPv4 as
// IPv4-mapped IPv6).
func AddrFrom(ip netip.Addr) Addr {
	b := ip.As16()
	var a Addr
	for i := range a.W {
		a.W[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return a
}

// IP converts back, unmapping IPv4.
func (a bpfNcAddr) IP() netip.Addr {
	var b [16]byte
	for i, w := range a.W {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	return netip.AddrFrom16(b).Unmap()
}

// Port converts a host-order port into the network-order form of the maps.
func Port(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

// HostPort converts a map port back into host order.
func HostPort(p uint16) uint16 { return Port(p) }
