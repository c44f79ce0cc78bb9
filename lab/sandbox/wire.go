package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// xdpWire makes the underlay's ends of the nodes' and the external
// client's veths behave as a NIC and a wire do for XDP:
//   - a pass-through XDP program: a veth takes frames its peer sends with
//     XDP_TX or XDP_REDIRECT (a node's --nodeport-acceleration=xdp, the
//     benchmark's XDP packet generator) only when its receive side runs
//     NAPI, and its peer kicks that NAPI only when it holds an XDP
//     program (veth_xdp_flush); GRO turns NAPI on but frames then wait
//     for the next packet. The program is attached the legacy way (no
//     link): it stays after the lab's process exits and goes with the
//     veth;
//   - transmit checksumming off, so that what enters a node carries
//     complete checksums, as off a wire. A veth otherwise hands on a
//     sender's partial checksum (CHECKSUM_PARTIAL, for the receiver's
//     stack to finish), which a frame XDP rewrites and sends on as raw
//     bytes would carry into the next host, to be dropped there.
//
// Both cost every packet across the underlay (no GSO into the nodes, a
// software checksum at the bridge), so they are only set where XDP runs
// (Config.XDPUnderlay).
func xdpWire(t Topology) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "underlay_pass",
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("pass-through XDP program: %w", err)
	}
	defer prog.Close() // the devices keep it
	ports := []string{"ext"}
	for i := range t.Nodes {
		ports = append(ports, fmt.Sprintf("n%d", i+1))
	}
	return inNetns(t.Underlay, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, name := range ports {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return fmt.Errorf("underlay port %s: %w", name, err)
			}
			if err := netlink.LinkSetXdpFdWithFlags(l, prog.FD(), nl.XDP_FLAGS_DRV_MODE); err != nil {
				return fmt.Errorf("underlay port %s: XDP: %w", name, err)
			}
			if err := ethtoolSet(fd, name, unix.ETHTOOL_STXCSUM, 0); err != nil {
				return fmt.Errorf("underlay port %s: tx checksumming off: %w", name, err)
			}
		}
		return nil
	})
}

// ethtoolSet is `ethtool -K` for one legacy setting (struct ethtool_value
// through SIOCETHTOOL): no ethtool binary needed.
func ethtoolSet(fd int, dev string, cmd, value uint32) error {
	v := struct{ cmd, data uint32 }{cmd, value}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte // the rest of struct ifreq's union
	}
	copy(ifr.name[:], dev)
	ifr.data = unsafe.Pointer(&v)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return errno
	}
	runtime.KeepAlive(&v)
	return nil
}

// inNetns runs fn on a thread moved into the named network namespace.
func inNetns(name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	ns, err := netns.GetFromName(name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread stays locked, and ends with its goroutine.
		return fmt.Errorf("back from %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}
