package qos

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// The uplinks' queueing, while any pod of the node has a slice or a rate,
// in one of two modes (enum qos_mode), the first the kernel has:
//   - EDT: a prio qdisc at the root, whose three bands are served in
//     strict order by skb->priority (its default priomap: 6, the latency
//     class, to band 0; 0, best effort and pods in no slice, to band 1; 2,
//     bulk, to band 2), with fq under each band, which holds a packet
//     until its departure time;
//   - HTB (a kernel without sch_prio or sch_fq, as this project's test
//     machine): an htb qdisc whose root class has the uplink's rate; under
//     it a class per slice class (the latency class at HTB's first
//     priority and guaranteed the whole rate, the others 1% each and
//     borrowing the rest in priority order) and a class per rate (its
//     rate as guarantee and ceiling); skb->priority names the class.
//
// With no slice and no rate left, the root qdisc is deleted: the kernel's
// default comes back. A multi-queue uplink loses its per-queue root (mq)
// meanwhile: strict priority needs one queue.
const prioHandle = 0x4e430000 // "NC":0, recognisable in `tc qdisc show`

// MapConfig is the datapath's queueing mode (qos_config).
const MapConfig = "qos_config"

// DefaultUplinkRate is an uplink's rate when the kernel does not know its
// speed (a veth): 10 Gbit/s.
const DefaultUplinkRate = 10_000_000_000

// queueing makes the uplinks' queueing follow the pods' slices and rates.
type queueing struct {
	maps    *cube.Maps
	uplinks []string
	rate    uint64            // the HTB root's rate (0: each uplink's speed)
	mode    *datapath.QosMode // nil: not chosen yet
	queued  *bool             // last applied; nil: unknown (the first call applies)
	classes map[uint32]BucketClass
}

// set tells the datapath whether any pod has a slice or a rate (active),
// and installs (queue: some pod sends in a slice or at a rate) or removes
// the queueing on every uplink, keeping the HTB rate classes those of
// classes.
func (q *queueing) set(active, queue bool, classes map[uint32]BucketClass) error {
	if !queue {
		// The datapath stops classifying before the queueing goes (a pod
		// with only an ingress rate needs no queueing).
		if err := q.writeConfig(active); err != nil {
			return err
		}
		if q.queued != nil && !*q.queued {
			return nil
		}
		var errs []error
		for _, dev := range q.uplinks {
			errs = append(errs, removeQueueing(dev))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		q.queued, q.classes = &queue, nil
		return nil
	}
	if q.mode == nil {
		if err := q.chooseMode(); err != nil {
			return err
		}
	}
	var errs []error
	for _, dev := range q.uplinks {
		if *q.mode == datapath.QosModeEDT {
			errs = append(errs, ensurePrioFq(dev))
		} else {
			errs = append(errs, ensureHTB(dev, q.rate, q.classes, classes))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The queueing is in place before the datapath classifies for it.
	if err := q.writeConfig(true); err != nil {
		return err
	}
	q.queued, q.classes = &queue, classes
	return nil
}

// writeConfig tells the datapath the mode, and whether it classifies.
func (q *queueing) writeConfig(active bool) error {
	c := datapath.QosConf{HtbMajor: prioHandle >> 16}
	if q.mode != nil {
		c.Mode = *q.mode
	}
	if active {
		c.Active = 1
	}
	return cube.Put(q.maps, MapConfig, uint32(0), c)
}

// chooseMode tries EDT's qdiscs on the first uplink and falls back to
// HTB when the kernel lacks them; the datapath is told.
func (q *queueing) chooseMode() error {
	mode := datapath.QosModeEDT
	if len(q.uplinks) > 0 {
		err := ensurePrioFq(q.uplinks[0])
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EOPNOTSUPP):
			mode = datapath.QosModeHTB
			_ = removeQueueing(q.uplinks[0]) // a prio without its fq bands
			slog.Info("network slices: the kernel has no sch_prio or sch_fq: HTB classes queue the uplinks (no departure-time pacing)")
		case err != nil:
			return err
		}
	}
	q.mode = &mode
	return nil
}

// ensurePrioFq installs prio with fq under each band on dev (idempotent).
func ensurePrioFq(dev string) error {
	link, qs, err := uplinkQdiscs(dev)
	if err != nil {
		return err
	}
	root, bands := false, 0
	for _, qd := range qs {
		a := qd.Attrs()
		switch {
		case a.Parent == netlink.HANDLE_ROOT && a.Handle == prioHandle && qd.Type() == "prio":
			root = true
		case a.Parent>>16 == prioHandle>>16 && qd.Type() == "fq":
			bands++
		}
	}
	if root && bands == 3 {
		return nil
	}
	prio := netlink.NewPrio(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: prioHandle})
	if err := netlink.QdiscReplace(prio); err != nil {
		return fmt.Errorf("uplink %s: prio qdisc: %w", dev, err)
	}
	for band := uint32(1); band <= 3; band++ {
		fq := netlink.NewFq(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: prioHandle | band, Handle: prioHandle + band<<16})
		if err := netlink.QdiscReplace(fq); err != nil {
			return fmt.Errorf("uplink %s: fq qdisc under band %d: %w", dev, band, err)
		}
	}
	slog.Info("network slices: uplink queueing", "uplink", dev, "root", "prio (3 bands, strict)", "bands", "fq")
	return nil
}

// ensureHTB installs the HTB classes on dev, at rate (0: its speed), and
// makes its rate classes want (had: what the last call made).
func ensureHTB(dev string, rate uint64, had, want map[uint32]BucketClass) error {
	link, qs, err := uplinkQdiscs(dev)
	if err != nil {
		return err
	}
	idx := link.Attrs().Index
	if rate == 0 {
		rate = uplinkRate(dev)
	}
	present := false
	for _, qd := range qs {
		if a := qd.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Handle == prioHandle && qd.Type() == "htb" {
			present = true
		}
	}
	class := func(minor, parent uint32, rate, ceil uint64, prio uint32) error {
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: parent, Handle: prioHandle | minor},
			netlink.HtbClassAttrs{Rate: rate, Ceil: ceil, Prio: prio})
		if err := netlink.ClassReplace(c); err != nil {
			return fmt.Errorf("uplink %s: HTB class %x:%x: %w", dev, prioHandle>>16, minor, err)
		}
		return nil
	}
	if !present {
		htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: prioHandle})
		htb.Defcls = htbBest
		if err := netlink.QdiscReplace(htb); err != nil {
			return fmt.Errorf("uplink %s: htb qdisc: %w", dev, err)
		}
		had = nil
		slog.Info("network slices: uplink queueing", "uplink", dev, "root", "htb", "rate_bits", rate)
	}
	// The classes of the slice classes are written every time: an
	// earlier agent may have left them at another rate.
	root := uint32(prioHandle | htbRoot)
	for _, c := range []struct {
		minor uint32
		rate  uint64
		prio  uint32
	}{{htbRoot, rate, 0}, {htbLatency, rate, 0}, {htbBest, rate / 100, 1}, {htbBulk, rate / 100, 2}} {
		parent := root
		if c.minor == htbRoot {
			parent = netlink.HANDLE_ROOT
		}
		if err := class(c.minor, parent, c.rate, rate, c.prio); err != nil {
			return err
		}
	}
	for b, c := range want {
		if old, ok := had[b]; ok && old == c {
			continue
		}
		if err := class(htbFirstRate+b, prioHandle|htbRoot, c.Rate, c.Rate, htbPrio(c.Class)); err != nil {
			return err
		}
	}
	for b := range had {
		if _, ok := want[b]; !ok {
			c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: prioHandle | htbRoot, Handle: prioHandle | (htbFirstRate + b)}, netlink.HtbClassAttrs{})
			if err := netlink.ClassDel(c); err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("uplink %s: delete HTB class of bucket %d: %w", dev, b, err)
			}
		}
	}
	return nil
}

// uplinkRate is dev's speed in bits per second, as the kernel reports it,
// or DefaultUplinkRate.
func uplinkRate(dev string) uint64 {
	b, err := os.ReadFile("/sys/class/net/" + dev + "/speed")
	if err != nil {
		return DefaultUplinkRate
	}
	mbps, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || mbps <= 0 {
		return DefaultUplinkRate
	}
	return uint64(mbps) * 1_000_000
}

// removeQueueing deletes netcube's root qdisc from dev, if it is there.
func removeQueueing(dev string) error {
	_, qs, err := uplinkQdiscs(dev)
	if err != nil {
		return err
	}
	for _, qd := range qs {
		if a := qd.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Handle == prioHandle {
			if err := netlink.QdiscDel(qd); err != nil {
				return fmt.Errorf("uplink %s: delete netcube's root qdisc: %w", dev, err)
			}
			slog.Info("network slices: uplink queueing removed", "uplink", dev)
		}
	}
	return nil
}

// uplinkQdiscs is dev and its qdiscs.
func uplinkQdiscs(dev string) (netlink.Link, []netlink.Qdisc, error) {
	link, err := netlink.LinkByName(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("uplink %s: %w", dev, err)
	}
	qs, err := netlink.QdiscList(link)
	if err != nil {
		return nil, nil, fmt.Errorf("uplink %s: list qdiscs: %w", dev, err)
	}
	return link, qs, nil
}
