package qos

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/netcube/netcube/pkg/model"
)

// What a pod with a kubernetes.io/ingress-bandwidth receives is shaped by
// a tbf qdisc on its veth (the node's side, whose transmit is the pod's
// receive), as the CNI bandwidth plugin does: a queue of the rate, which
// TCP settles into. The datapath sends such a pod's packets through the
// veth (HOOK_MARK_VIA_VETH) instead of straight into the pod. A policer
// in the datapath, without a queue, dropped whole 64 KB GSO packets and
// left TCP at about half the rate.

// Ingress shaper parameters: up to ingressLatency of the rate may wait in
// the queue (the bandwidth plugin's 25 ms), and ingressBurst of it may go
// at once (10 ms, but at least 64 KiB: one GSO packet whole).
const (
	ingressLatencyMs = 25
	ingressBurstMs   = 10
	ingressMinBurst  = 64 << 10
)

// podShaping keeps a tbf on the veth of each pod that has an ingress rate.
type podShaping struct {
	prefix string // pod veths' names start with it
	had    map[model.PodID]shapedVeth
}

// shapedVeth is a pod's veth (by index) and the rate its tbf has.
type shapedVeth struct {
	ifindex int
	rate    uint64
}

// set installs want's shapers and removes those of pods no longer in it
// (a retry converges: each step is idempotent).
func (s *podShaping) set(want map[model.PodID]IngressShape) error {
	if s.had == nil {
		s.had = map[model.PodID]shapedVeth{}
	}
	var errs []error
	for id, w := range want {
		ifindex, err := s.vethOf(w.Addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", id, err))
			continue
		}
		v := shapedVeth{ifindex: ifindex, rate: w.Rate}
		if s.had[id] == v {
			continue
		}
		if old, ok := s.had[id]; ok && old.ifindex != v.ifindex {
			_ = removeShaper(old.ifindex) // the pod got a new veth
		}
		if err := ensureShaper(v); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", id, err))
			continue
		}
		slog.Info("network slices: pod ingress shaped", "pod", id, "ifindex", v.ifindex, "rate_bits", v.rate)
		s.had[id] = v
	}
	for id, v := range s.had {
		if _, ok := want[id]; ok {
			continue
		}
		if err := removeShaper(v.ifindex); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", id, err))
			continue
		}
		delete(s.had, id)
	}
	return errors.Join(errs...)
}

// vethOf is the pod veth the node routes addr to. Any other device (the
// pod not wired yet: its CIDR's route, or the default one) is an error,
// retried: its qdisc is not netcube's to replace.
func (s *podShaping) vethOf(addr netip.Addr) (int, error) {
	routes, err := netlink.RouteGet(addr.AsSlice())
	if err != nil || len(routes) == 0 {
		return 0, fmt.Errorf("no route to %s: %v", addr, err)
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return 0, fmt.Errorf("the device routed to for %s: %w", addr, err)
	}
	if name := link.Attrs().Name; !strings.HasPrefix(name, s.prefix) {
		return 0, fmt.Errorf("%s is routed to %s, not a pod veth (%s*): the pod is not wired yet", addr, name, s.prefix)
	}
	return link.Attrs().Index, nil
}

// ensureShaper makes v's tbf netcube's root qdisc on the veth.
func ensureShaper(v shapedVeth) error {
	bytes := v.rate / 8
	burst := max(bytes*ingressBurstMs/1000, ingressMinBurst)
	tbf := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: v.ifindex, Parent: netlink.HANDLE_ROOT, Handle: prioHandle},
		Rate:       bytes,
		Limit:      uint32(min(bytes*ingressLatencyMs/1000+burst, 1<<31)),
		Buffer:     netlink.Xmittime(bytes, uint32(burst)),
	}
	if err := netlink.QdiscReplace(tbf); err != nil {
		return fmt.Errorf("veth %d: tbf qdisc: %w", v.ifindex, err)
	}
	return nil
}

// removeShaper deletes netcube's root qdisc from the veth, if both are
// still there (a deleted pod's veth is gone, and its qdisc with it).
func removeShaper(ifindex int) error {
	link, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil
	}
	qs, err := netlink.QdiscList(link)
	if err != nil {
		return fmt.Errorf("veth %d: list qdiscs: %w", ifindex, err)
	}
	for _, qd := range qs {
		if a := qd.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Handle == prioHandle {
			if err := netlink.QdiscDel(qd); err != nil {
				return fmt.Errorf("veth %d: delete netcube's tbf: %w", ifindex, err)
			}
		}
	}
	return nil
}
