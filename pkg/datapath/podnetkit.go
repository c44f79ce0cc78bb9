package datapath

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
)

// A netkit pod's programs are the device pair's own (bpf_mprog, attached
// through its primary, the node's side): from_pod_netkit runs as the pod
// transmits (the peer hook), before its packet leaves the pod's namespace
// and with no backlog pass first, as a veth's has; to_pod_netkit as the
// node transmits to the pod (the primary hook). Like the veths' tc filters
// and unlike links, they stay with the device without a pin, go with it,
// and an agent's restart swaps in its own programs atomically (replace by
// program ID).
var netkitHooks = []struct {
	dir    string // as PodFilters names a veth's: from the node's side
	attach ebpf.AttachType
}{{"ingress", ebpf.AttachNetkitPeer}, {"egress", ebpf.AttachNetkitPrimary}}

// netkitProgSuffix ends the names of netcube's netkit programs
// (from_pod_netkit, to_pod_netkit).
const netkitProgSuffix = "_pod_netkit"

// isNetkit tells whether ifindex, in the current network namespace, is a
// netkit device.
func isNetkit(ifindex int) (bool, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return false, err
	}
	return l.Type() == "netkit", nil
}

// attachPodNetkit puts from (peer hook) and to (primary hook) on the netkit
// pair whose primary is ifindex, replacing an earlier agent's. The two
// attaches run at once: each waits for an RCU grace period in the kernel
// (the device's program list is swapped), which run side by side.
func attachPodNetkit(ifname string, ifindex int, from, to *ebpf.Program) error {
	errs := make(chan error, len(netkitHooks))
	for i, h := range netkitHooks {
		prog := []*ebpf.Program{from, to}[i]
		go func() { errs <- attachNetkit(ifindex, h.attach, prog) }()
	}
	var all []error
	for range netkitHooks {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	if err := errors.Join(all...); err != nil {
		return fmt.Errorf("attach to netkit %s: %w", ifname, err)
	}
	return nil
}

// attachNetkit attaches prog to one hook of the pair, in place of
// netcube's program already there (the program of the same name), if any.
func attachNetkit(ifindex int, attach ebpf.AttachType, prog *ebpf.Program) error {
	info, err := prog.Info()
	if err != nil {
		return err
	}
	old, err := netkitProgram(ifindex, attach, info.Name)
	if err != nil {
		return err
	}
	opts := link.RawAttachProgramOptions{Target: ifindex, Program: prog, Attach: attach}
	if old != 0 {
		opts.Anchor = link.ReplaceProgramByID(old)
	}
	if err := link.RawAttachProgram(opts); err != nil {
		return fmt.Errorf("%s (%s): %w", info.Name, attach, err)
	}
	return nil
}

// netkitProgram is the ID of the program named name on one hook of the
// pair (0: none).
func netkitProgram(ifindex int, attach ebpf.AttachType, name string) (ebpf.ProgramID, error) {
	names, err := netkitPrograms(ifindex, attach)
	if err != nil {
		return 0, err
	}
	for id, n := range names {
		if n == name {
			return id, nil
		}
	}
	return 0, nil
}

// netkitPrograms names the programs on one hook of the pair whose primary
// is ifindex, by ID.
func netkitPrograms(ifindex int, attach ebpf.AttachType) (map[ebpf.ProgramID]string, error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: attach})
	if err != nil {
		return nil, fmt.Errorf("query %s programs: %w", attach, err)
	}
	out := map[ebpf.ProgramID]string{}
	for _, p := range res.Programs {
		prog, err := ebpf.NewProgramFromID(p.ID)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil {
			out[p.ID] = info.Name
		}
	}
	return out, nil
}

// podNetkitPrograms is PodFilters for a netkit pair in the current network
// namespace: "ingress" (what the pod sends) and "egress" to netcube's
// program on each hook.
func podNetkitPrograms(ifindex int) map[string]string {
	out := map[string]string{}
	for _, h := range netkitHooks {
		names, err := netkitPrograms(ifindex, h.attach)
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(n, netkitProgSuffix) {
				out[h.dir] = n
			}
		}
	}
	return out
}

// detachPodNetkit takes netcube's programs off the netkit pair whose
// primary is ifindex.
func detachPodNetkit(ifindex int) error {
	var errs []error
	for _, h := range netkitHooks {
		names, err := netkitPrograms(ifindex, h.attach)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for id, n := range names {
			if !strings.HasSuffix(n, netkitProgSuffix) {
				continue
			}
			prog, err := ebpf.NewProgramFromID(id)
			if err != nil {
				continue // gone meanwhile
			}
			err = link.RawDetachProgram(link.RawDetachProgramOptions{Target: ifindex, Program: prog, Attach: h.attach})
			prog.Close()
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("detach %s (%s): %w", n, h.attach, err))
			}
		}
	}
	return errors.Join(errs...)
}
