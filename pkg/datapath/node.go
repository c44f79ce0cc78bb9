package datapath

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// SetNodeAddrs writes this node's address of each family (the source of
// SNATed external flows); an invalid address clears that family's, which
// stops its external Services with externalTrafficPolicy Cluster.
func (m *Maps) SetNodeAddrs(v4, v6 netip.Addr) error {
	for i, a := range []netip.Addr{v4, v6} {
		var v Addr
		if a.IsValid() {
			v = AddrFrom(a)
		}
		if err := Put(m, MapNodeAddrs, uint32(i), v); err != nil {
			return fmt.Errorf("node address %d: %w", i, err)
		}
	}
	return nil
}

// SetNodePortRange protects ports lo..hi from bind() by the node's own
// processes (those in this process's network namespace, under the
// socket-LB cgroup); pods are not affected.
func (m *Maps) SetNodePortRange(lo, hi uint16) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return fmt.Errorf("this network namespace's cookie: %w", err)
	}
	c := bpfNodeConfig{NetnsCookie: cookie, NodeportMin: lo, NodeportMax: hi}
	return Put(m, MapNodeConfig, uint32(0), c)
}
