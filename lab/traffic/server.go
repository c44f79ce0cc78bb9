package traffic

import (
	"fmt"
	"net"
	"net/netip"
)

// Serve answers, on TCP and UDP port port (all addresses, both families),
// every line or datagram with "<name> <the client's address as seen
// here>\n" (which tells whether a Service kept the client's address), until
// an error.
func Serve(name string, port int) error {
	pc, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				errc <- err
				return
			}
			var peer netip.Addr
			if u, ok := from.(*net.UDPAddr); ok {
				peer = u.AddrPort().Addr().Unmap()
			}
			_, _ = pc.WriteTo(answer(name, peer), from)
		}
	}()
	go func() { errc <- serveTCP(port, name) }()
	return <-errc
}

func answer(name string, peer netip.Addr) []byte {
	return []byte(name + " " + peer.String() + "\n")
}
