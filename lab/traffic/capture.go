package traffic

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Caught is what a capture saw: how many frames on the device carried
// the marker, and the first few of them (hex), for a test's message.
type Caught struct {
	Frames int      `json:"frames"`
	First  []string `json:"first,omitempty"`
}

// Capture reads every frame arriving on or leaving dev (a packet socket,
// as tcpdump reads) for d and counts those whose bytes hold marker: the
// proof that a packet reached (or never reached) a namespace, which a
// counter in the datapath cannot give. ready is called once the socket is
// bound, so a sender started after it is seen.
func Capture(dev string, marker []byte, d time.Duration, ready func()) (Caught, error) {
	var out Caught
	if len(marker) == 0 {
		return out, fmt.Errorf("capture: an empty marker matches every frame")
	}
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return out, err
	}
	proto := uint16(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto<<8|proto>>8))
	if err != nil {
		return out, fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto<<8 | proto>>8, Ifindex: ifc.Index}); err != nil {
		return out, fmt.Errorf("bind to %s: %w", dev, err)
	}
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if ready != nil {
		ready()
	}
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || !bytes.Contains(buf[:n], marker) {
			continue
		}
		out.Frames++
		if len(out.First) < 4 {
			out.First = append(out.First, hex.EncodeToString(buf[:n]))
		}
	}
	return out, nil
}
