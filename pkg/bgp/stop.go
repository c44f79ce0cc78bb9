package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	api "github.com/osrg/gobgp/v3/api"
	"golang.org/x/sys/unix"
)

// Stop ends every session and leaves the speaker as before its first Apply
// (a later Apply starts it again).
//
// graceful == false withdraws every route, then stops GoBGP (StopBgp), which
// sends each peer a NOTIFICATION (Cease, "peer de-configured"; "hard reset"
// where the peer negotiated RFC 8538): the routers drop our routes at once.
//
// graceful == true is for an agent restart or upgrade: the routers should
// keep forwarding to this node until the next agent announces the same
// routes again. RFC 4724 keeps routes as stale only when a session ends
// without a NOTIFICATION, and GoBGP (v3.37.0) has no way to stop without
// one: StopBgp deletes every neighbor with a Cease (see above), and so do
// DeletePeer, DisablePeer and ShutdownPeer. So Stop first shuts down
// (shutdown(2), SHUT_RDWR) the TCP sockets of the sessions, found among this
// process's descriptors by their remote address and port: the kernel sends
// the routers a FIN, as it would when the agent exits, and GoBGP's write of
// the Cease that StopBgp then queues fails on the shut socket, so no
// NOTIFICATION reaches the wire. A router with graceful restart negotiated
// then marks our routes stale and keeps them for the restart time we
// announced, and the next speaker's End-of-RIB ends that; a router without
// it drops them, as it would on any session loss. Peers without graceful
// restart configured are stopped the same way (they drop the routes
// anyway).
func (s *Speaker) Stop(ctx context.Context, graceful bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.state.started {
		return nil
	}
	var firstErr error
	if graceful {
		var remotes []netip.AddrPort
		for _, p := range s.state.peers {
			remotes = append(remotes, netip.AddrPortFrom(p.Address, p.Port))
		}
		n, err := shutdownSessions(remotes)
		if err != nil {
			firstErr = fmt.Errorf("bgp: closing sessions without notification: %w", err)
		}
		s.log.WithField("sessions", n).Info("BGP sessions closed without notification, for the routers' graceful restart")
	} else {
		for _, r := range s.state.routes {
			if err := s.withdraw(ctx, r); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if err := s.server.StopBgp(ctx, &api.StopBgpRequest{}); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("bgp: stopping: %w", err)
	}
	s.state = newApplied()
	return firstErr
}

// shutdownSessions shuts down both directions of every TCP socket of this
// process connected to one of remotes, and returns how many it shut. The
// descriptors stay open (GoBGP owns and closes them).
func shutdownSessions(remotes []netip.AddrPort) (int, error) {
	want := map[netip.AddrPort]bool{}
	for _, r := range remotes {
		want[r] = true
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		if proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || proto != unix.IPPROTO_TCP {
			continue
		}
		sa, err := unix.Getpeername(fd)
		if err != nil {
			continue // not connected
		}
		var ap netip.AddrPort
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			ap = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
		case *unix.SockaddrInet6:
			ap = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
		default:
			continue
		}
		if !want[ap] {
			continue
		}
		if err := unix.Shutdown(fd, unix.SHUT_RDWR); err != nil && err != unix.ENOTCONN {
			return n, fmt.Errorf("shutdown of the socket to %s: %w", ap, err)
		}
		n++
	}
	return n, nil
}
