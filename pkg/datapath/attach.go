package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Links are pinned under <PinDir>/links with these name prefixes.
const (
	podLinkPrefix    = "pod-"
	nodeLinkPrefix   = "node-"
	cgroupLinkPrefix = "cgroup-"
	ifLinkPrefix     = "if-"
)

// AttachInterface attaches programs of the object, by name, to a device a
// cube made (the router's overlay): ingress and egress ("": none). Pinned
// links of an earlier agent are updated in place.
func (d *Datapath) AttachInterface(ifname string, ifindex int, ingress, egress string) error {
	for _, h := range []struct {
		dir, prog string
		attach    ebpf.AttachType
	}{{"ingress", ingress, ebpf.AttachTCXIngress}, {"egress", egress, ebpf.AttachTCXEgress}} {
		if h.prog == "" {
			continue
		}
		prog := d.Program(h.prog)
		if prog == nil {
			return fmt.Errorf("attach to %s: no program %s in the object", ifname, h.prog)
		}
		pin := d.linkPin(ifLinkPrefix + ifname + "-" + h.dir)
		err := d.attachOrUpdate(pin, prog, func() (link.Link, error) {
			return link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: h.attach})
		}, func(l link.Link) bool { return tcxIfindex(l) == ifindex })
		if err != nil {
			return fmt.Errorf("attach %s to %s (%s): %w", h.prog, ifname, h.dir, err)
		}
	}
	return nil
}

// AttachNode attaches from_net (tcx ingress) and to_net (tcx egress) to an
// uplink of the node, where traffic from outside the cluster arrives:
// NodePort, ExternalIPs and LoadBalancer IPs are served there, and the
// node's own replies as a backend leave there. Pinned links of an earlier
// agent are updated in place, as for pods.
func (d *Datapath) AttachNode(ifname string, ifindex int) error {
	return d.attachTCX(nodeLinkPrefix+ifname, ifname, ifindex, d.objs.FromNet, d.objs.ToNet)
}

// AttachPod attaches the pod programs to a pod's host-side device. A veth
// gets from_pod (ingress) and to_pod (egress) as tc filters (podFilters);
// a netkit device, from_pod_netkit and to_pod_netkit as its own programs
// (podnetkit.go). A pod an earlier agent attached with tcx links keeps
// them, their programs replaced in place. Either way an agent's restart
// replaces the programs atomically: packets never see the device without
// one.
func (d *Datapath) AttachPod(ifname string, ifindex int) error {
	if d.podHasTCX(ifname) {
		return d.attachTCX(podLinkPrefix+ifname, ifname, ifindex, d.objs.FromPod, d.objs.ToPod)
	}
	netkit, err := isNetkit(ifindex)
	if err != nil {
		return fmt.Errorf("pod device %s: %w", ifname, err)
	}
	if netkit {
		if err := d.LoadNetkitPrograms(); err != nil {
			return err
		}
		return attachPodNetkit(ifname, ifindex, d.objs.FromPodNetkit, d.objs.ToPodNetkit)
	}
	return attachPodFilters(ifname, ifindex, d.objs.FromPod, d.objs.ToPod)
}

// podHasTCX tells whether an earlier agent pinned tcx links for the pod.
func (d *Datapath) podHasTCX(ifname string) bool {
	if d.pinDir == "" {
		return false
	}
	_, err := os.Stat(d.linkPin(podLinkPrefix + ifname + "-ingress"))
	return err == nil
}

// attachTCX attaches ingress and egress to an interface, their links pinned
// as <pin>-ingress and <pin>-egress (updated in place when pinned already).
func (d *Datapath) attachTCX(pin, ifname string, ifindex int, ingress, egress *ebpf.Program) error {
	hooks := []struct {
		dir    string
		prog   *ebpf.Program
		attach ebpf.AttachType
	}{
		{"ingress", ingress, ebpf.AttachTCXIngress},
		{"egress", egress, ebpf.AttachTCXEgress},
	}
	for _, h := range hooks {
		err := d.attachOrUpdate(d.linkPin(pin+"-"+h.dir), h.prog, func() (link.Link, error) {
			return link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: h.prog, Attach: h.attach})
		}, func(l link.Link) bool { return tcxIfindex(l) == ifindex })
		if err != nil {
			return fmt.Errorf("attach %s to %s (%s): %w", h.prog.String(), ifname, h.dir, err)
		}
	}
	return nil
}

// PrunePods removes the pinned links of pod interfaces not in keep (their
// veth is gone, and the kernel has already detached them): those of pods
// an earlier agent attached with tcx links.
func (d *Datapath) PrunePods(keep map[string]bool) error {
	entries, err := os.ReadDir(filepath.Join(d.pinDir, "links"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), podLinkPrefix)
		if !ok {
			continue
		}
		name = strings.TrimSuffix(strings.TrimSuffix(name, "-ingress"), "-egress")
		if !keep[name] {
			if err := os.Remove(filepath.Join(d.pinDir, "links", e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// sockHooks are the socket-LB programs and where they attach.
func (d *Datapath) sockHooks() map[string]struct {
	prog   *ebpf.Program
	attach ebpf.AttachType
} {
	p := d.objs.bpfPrograms
	type hook = struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
	}
	return map[string]hook{
		"connect4":     {p.SockConnect4, ebpf.AttachCGroupInet4Connect},
		"connect6":     {p.SockConnect6, ebpf.AttachCGroupInet6Connect},
		"sendmsg4":     {p.SockSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		"sendmsg6":     {p.SockSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		"recvmsg4":     {p.SockRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		"recvmsg6":     {p.SockRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		"getpeername4": {p.SockGetpeername4, ebpf.AttachCgroupInet4GetPeername},
		"getpeername6": {p.SockGetpeername6, ebpf.AttachCgroupInet6GetPeername},
		"bind4":        {p.SockBind4, ebpf.AttachCGroupInet4Bind},
		"bind6":        {p.SockBind6, ebpf.AttachCGroupInet6Bind},
		"sock_release": {p.SockRelease, ebpf.AttachCgroupInetSockRelease},
	}
}

// AttachCgroup attaches the socket-LB programs to the cgroup at path (the
// parent of the pods' cgroups; children inherit the programs).
func (d *Datapath) AttachCgroup(path string) error {
	for name, h := range d.sockHooks() {
		pin := d.linkPin(cgroupLinkPrefix + name)
		err := d.attachOrUpdate(pin, h.prog, func() (link.Link, error) {
			return link.AttachCgroup(link.CgroupOptions{Path: path, Attach: h.attach, Program: h.prog})
		}, func(link.Link) bool { return true })
		if err != nil {
			return fmt.Errorf("attach socket-LB %s to cgroup %s: %w", name, path, err)
		}
	}
	return nil
}

// DetachCgroup removes the socket-LB programs (socket-LB turned off).
func (d *Datapath) DetachCgroup() error {
	for name := range d.sockHooks() {
		if err := detachPinned(d.linkPin(cgroupLinkPrefix + name)); err != nil {
			return err
		}
	}
	return nil
}

// detachPinned detaches the link pinned at pin now and removes the pin.
// Removing the pin alone detaches too, but only once the kernel frees the
// pin's inode after an RCU grace period and a deferred work item: until
// then the programs keep acting on traffic. A missing pin is not an error.
func detachPinned(pin string) error {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open pinned link %s: %w", pin, err)
	}
	defer l.Close()
	if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("detach %s: %w", pin, err)
	}
	return l.Unpin()
}

func (d *Datapath) linkPin(name string) string {
	if d.pinDir == "" {
		return ""
	}
	return filepath.Join(d.pinDir, "links", name)
}

// attachOrUpdate reuses the link pinned at pin (if any, and still valid) by
// swapping in prog; otherwise it attaches a new link and pins it.
func (d *Datapath) attachOrUpdate(pin string, prog *ebpf.Program, attach func() (link.Link, error), valid func(link.Link) bool) error {
	if pin != "" {
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			defer l.Close()
			if valid(l) && l.Update(prog) == nil {
				return nil
			}
			// Stale: the interface or cgroup it pointed at is gone.
			if err := l.Unpin(); err != nil {
				return err
			}
		}
	}
	l, err := attach()
	if err != nil {
		return err
	}
	defer l.Close()
	if pin == "" {
		return errors.New("attaching needs a pin directory")
	}
	return l.Pin(pin)
}

func tcxIfindex(l link.Link) int {
	info, err := l.Info()
	if err != nil {
		return -1
	}
	tcx := info.TCX()
	if tcx == nil {
		return -1
	}
	return int(tcx.Ifindex)
}
