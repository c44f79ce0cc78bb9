package traffic

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
)

// The flood's SYNs are what the packet builder makes for the same source:
// rewriting the source and sequence number in place keeps the checksum
// right (a SYN with a bad checksum would be dropped by the backend's
// kernel, and the flood would measure nothing).
func TestFloodSYNIsAValidSYN(t *testing.T) {
	to := netip.MustParseAddrPort("10.0.0.1:30190")
	p := pkt.TCP(netip.MustParseAddrPort("198.18.0.0:1024"), to, pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, nil)[14:]
	for _, src := range []netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:1024"), netip.MustParseAddrPort("198.19.255.254:61023")} {
		binary.BigEndian.PutUint32(p[12:16], binary.BigEndian.Uint32(src.Addr().AsSlice()))
		binary.BigEndian.PutUint16(p[20:22], src.Port())
		binary.BigEndian.PutUint32(p[24:28], 77)
		setTCPChecksum4(p)
		want := pkt.TCP(src, to, pkt.TCPOpts{SYN: true, Seq: 77, Window: 64240}, nil)[14:]
		if !bytes.Equal(p[20:], want[20:]) {
			t.Errorf("SYN from %s:\n got %x\nwant %x", src, p[20:], want[20:])
		}
	}
}
