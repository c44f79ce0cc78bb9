package datapath

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A pod's programs are tc filters (clsact, cls_bpf in direct-action mode),
// not tcx links as on the node's uplinks. Attaching a tcx link waits for
// an RCU grace period in the kernel (the device's hook is swapped, and the
// old one must have no reader left), two per pod, which was most of a CNI
// ADD; adding a filter to a new clsact waits for none (BenchmarkAttachPod).
// Replacing a filter, as an agent's restart does, is as atomic as a link's
// update. The filters are known by name.
const (
	podFilterPrefix = "netcube-"
	podFilterPrio   = 1
	podFilterHandle = 1
)

// attachPodFilters puts from_pod (ingress) and to_pod (egress) on the
// device as its clsact filters, replacing those of an earlier agent.
func attachPodFilters(ifname string, ifindex int, ingress, egress *ebpf.Program) error {
	clsact := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}, QdiscType: "clsact"}
	if err := netlink.QdiscAdd(clsact); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("clsact qdisc on %s: %w", ifname, err)
	}
	for _, h := range []struct {
		name   string
		parent uint32
		prog   *ebpf.Program
	}{{"from_pod", netlink.HANDLE_MIN_INGRESS, ingress}, {"to_pod", netlink.HANDLE_MIN_EGRESS, egress}} {
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: h.parent, Handle: podFilterHandle, Protocol: unix.ETH_P_ALL, Priority: podFilterPrio},
			Fd:          h.prog.FD(), Name: podFilterPrefix + h.name, DirectAction: true,
		}
		if err := netlink.FilterReplace(f); err != nil {
			return fmt.Errorf("attach %s to %s: %w", h.name, ifname, err)
		}
	}
	return nil
}

// PodFilters lists netcube's programs on a pod's host-side device in the
// current network namespace: "ingress" (what the pod sends) and "egress"
// to the name of the program each runs (a veth's tc filters, a netkit
// pair's own programs); none: empty.
func PodFilters(ifname string) (map[string]string, error) {
	h := &netlink.Handle{}
	link, err := h.LinkByName(ifname)
	if err != nil {
		return nil, err
	}
	if link.Type() == "netkit" {
		return podNetkitPrograms(link.Attrs().Index), nil
	}
	out := map[string]string{}
	for dir, f := range podFiltersOn(h, link) {
		out[dir] = strings.TrimPrefix(f.Name, podFilterPrefix)
	}
	return out, nil
}

// podFiltersOn is netcube's filters on link, by direction.
func podFiltersOn(h *netlink.Handle, link netlink.Link) map[string]*netlink.BpfFilter {
	out := map[string]*netlink.BpfFilter{}
	for dir, parent := range map[string]uint32{"ingress": netlink.HANDLE_MIN_INGRESS, "egress": netlink.HANDLE_MIN_EGRESS} {
		fs, err := h.FilterList(link, parent)
		if err != nil {
			continue // no clsact
		}
		for _, f := range fs {
			if b, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(b.Name, podFilterPrefix) {
				out[dir] = b
			}
		}
	}
	return out
}

// PodAttachments names the devices of the current network namespace that
// carry netcube's pod programs (`netcube status`).
func PodAttachments() ([]string, error) {
	h := &netlink.Handle{}
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		if len(podFiltersOn(h, l)) > 0 || l.Type() == "netkit" && len(podNetkitPrograms(l.Attrs().Index)) > 0 {
			out = append(out, l.Attrs().Name)
		}
	}
	return out, nil
}

// DetachPods removes netcube's programs from every device whose name
// starts with prefix (the pods' host devices) in the current network
// namespace: `netcube-agent --cleanup`, with Unpin. Unpin alone leaves
// them: they are not links. A netkit pod is then cut off (its pair drops
// what the pod sends without a program: fail closed) until an agent
// attaches again.
func DetachPods(prefix string) error {
	h := &netlink.Handle{}
	links, err := h.LinkList()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		if !strings.HasPrefix(l.Attrs().Name, prefix) {
			continue
		}
		if l.Type() == "netkit" {
			if err := detachPodNetkit(l.Attrs().Index); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", l.Attrs().Name, err))
			}
			continue
		}
		for _, f := range podFiltersOn(h, l) {
			if err := h.FilterDel(f); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("%s: delete filter %s: %w", l.Attrs().Name, f.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
