package traffic

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// tcpState says where a TCP connection stands (the kernel's TCP_INFO):
// whether the request was acknowledged, whether anything came back, how
// often the kernel retransmitted. A request that timed out is told apart
// by it: the request or the answer lost in the network (retransmits, the
// request unacknowledged), or an answer never sent (the request
// acknowledged, nothing received).
func tcpState(conn net.Conn) string {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return ""
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return ""
	}
	var info *unix.TCPInfo
	if cerr := raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil || err != nil {
		return ""
	}
	return fmt.Sprintf("state %s, %d bytes acked, %d received, %d unacked, %d retransmits (%d in all), rto %dms, rtt %dus",
		tcpStateName(info.State), info.Bytes_acked, info.Bytes_received, info.Unacked, info.Retransmits,
		info.Total_retrans, info.Rto/1000, info.Rtt)
}

func tcpStateName(s uint8) string {
	names := []string{1: "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING"}
	if int(s) < len(names) && names[s] != "" {
		return names[s]
	}
	return fmt.Sprint(s)
}
