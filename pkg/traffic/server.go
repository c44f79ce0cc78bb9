package traffic

import (
	"fmt"
	"net"
)

// Serve answers, on TCP and UDP port port (all addresses, both families),
// every line or datagram with "<name>\n", until an error.
func Serve(name string, port int) error {
	pc, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	reply := []byte(name + "\n")
	errc := make(chan error, 2)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				errc <- err
				return
			}
			_, _ = pc.WriteTo(reply, from)
		}
	}()
	go func() { errc <- serveTCP(port, reply) }()
	return <-errc
}
