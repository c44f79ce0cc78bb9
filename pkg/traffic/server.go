package traffic

import (
	"bufio"
	"fmt"
	"net"
)

// Serve answers, on TCP and UDP port port (all addresses, both families),
// every line or datagram with "<name>\n", until an error.
func Serve(name string, port int) error {
	addr := fmt.Sprintf(":%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", addr)
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
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				errc <- err
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadSlice('\n'); err != nil {
						return
					}
					if _, err := c.Write(reply); err != nil {
						return
					}
				}
			}()
		}
	}()
	return <-errc
}
