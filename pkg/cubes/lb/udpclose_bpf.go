package lb

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// sockDestroyer runs bpf/entry/sock_destroy.c's iterator.
type sockDestroyer struct {
	maps *cube.Maps
	prog *ebpf.Program // destroy_udp
}

// destroyUDPSockets closes, in the network namespace at netnsPath (a pod's),
// every UDP socket that socket-LB connected to backend through the frontend
// whose revNAT id is revNATID. Its application sees the socket fail and
// connects again, to a backend the Service still has.
func (d sockDestroyer) destroyUDPSockets(netnsPath string, backend netip.AddrPort, revNATID uint32) error {
	target := datapath.SockDestroyTarget{Addr: datapath.AddrFrom(backend.Addr()), Port: datapath.Port(backend.Port()), RevNatId: revNATID}
	if err := cube.Put(d.maps, MapSockDestroyTarget, uint32(0), target); err != nil {
		return fmt.Errorf("socket destroy target: %w", err)
	}
	errc := make(chan error, 1)
	go func() {
		// The iterator walks the sockets of the namespace it is created
		// in. This thread enters the pod's and is never unlocked, so Go
		// discards it instead of reusing it elsewhere.
		runtime.LockOSThread()
		errc <- d.iterateUDP(netnsPath)
	}()
	return <-errc
}

func (d sockDestroyer) iterateUDP(netnsPath string) error {
	ns, err := os.Open(netnsPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter %s: %w", netnsPath, err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: d.prog})
	if err != nil {
		return fmt.Errorf("UDP socket iterator: %w", err)
	}
	defer it.Close()
	r, err := it.Open()
	if err != nil {
		return fmt.Errorf("UDP socket iterator: %w", err)
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}
