package qos

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
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
//     On an uplink with two transmit queues or more, and no XPS map
//     choosing them by CPU, the root is mq instead: the HTB under the
//     first queue, and the latency class in a queue of its own, the last,
//     a lockless pfifo_fast nothing else enters and nothing shapes (a
//     latency packet is never behind bulk, nor is its CPU made to dequeue
//     bulk from the HTB for its sender: on a busy uplink, whichever CPU
//     enqueues into a qdisc dequeues for everyone, and a request/response
//     sender enqueues most often). The datapath picks each packet's queue
//     (qos_set_queue).
//
// With no slice and no rate left, the root qdisc is deleted: the kernel's
// default comes back. With EDT, a multi-queue uplink loses its per-queue root (mq)
// meanwhile: strict priority needs one queue.
const prioHandle = 0x4e430000 // "NC":0, recognisable in `tc qdisc show`

// mqHandle is the root's handle when the HTB sits under an mq root, and
// latencyHandle the latency class's queue's qdisc then.
const (
	mqHandle      = 0x4e420000 // "NB":0
	latencyHandle = 0x4e4c0000 // "NL":0
)

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
	// latencyQueue is, in HTB mode with every uplink multi-queue, the
	// transmit queue of the latency class (its last); 0: none.
	latencyQueue uint32
	queued       *bool // last applied; nil: unknown (the first call applies)
	classes      map[uint32]BucketClass
}

// set tells the datapath whether any pod has a slice or a rate (active),
// and installs (queue: some pod sends in a slice or at a rate) or removes
// the queueing on every uplink, keeping the HTB rate classes those of
// classes.
func (q *queueing) set(active, queue bool, classes map[uint32]BucketClass) error {
	if !queue {
		// The datapath stops classifying before the queueing goes (a pod
		// with only an ingress rate needs no queueing).
		if err := q.writeConfig(active, false); err != nil {
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
			errs = append(errs, ensureHTB(dev, q.rate, q.latencyQueue, q.classes, classes))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The queueing is in place before the datapath classifies for it.
	if err := q.writeConfig(true, true); err != nil {
		return err
	}
	q.queued, q.classes = &queue, classes
	return nil
}

// writeConfig tells the datapath the mode, whether it classifies, and,
// while the uplinks are queued, the latency class's queue.
func (q *queueing) writeConfig(active, queued bool) error {
	c := datapath.QosConf{HtbMajor: prioHandle >> 16}
	if queued && q.latencyQueue > 0 {
		c.LatencyQueue, c.LatencyClassid = q.latencyQueue+1, classOfHTB(model.Latency)
	}
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
	if mode == datapath.QosModeHTB {
		q.latencyQueue = latencyQueue(q.uplinks)
	}
	q.mode = &mode
	return nil
}

// latencyQueue is the transmit queue the latency class gets on every
// uplink: the last of the fewest any uplink has, when each has two or
// more and none has an XPS map (which would pick the queue by CPU before
// the datapath's choice is read); 0: none, the latency class shares the
// HTB.
func latencyQueue(uplinks []string) uint32 {
	fewest := 0
	for _, dev := range uplinks {
		link, err := netlink.LinkByName(dev)
		if err != nil {
			return 0
		}
		n := link.Attrs().NumTxQueues
		if n >= 2 && hasXPS(link) {
			slog.Info("network slices: the uplink picks its transmit queues by CPU (XPS): the latency class shares the HTB", "uplink", dev)
			return 0
		}
		if fewest == 0 || n < fewest {
			fewest = n
		}
	}
	if fewest < 2 {
		return 0
	}
	return uint32(fewest - 1)
}

// hasXPS tells whether some transmit queue of link has an XPS map. Only
// sysfs says, and only for the network namespace it was mounted in: a
// device there of another address (an agent entered into a namespace
// without its own /sys, as the lab's) is not link, and link is taken to
// have none, as a veth has.
func hasXPS(link netlink.Link) bool {
	dir := "/sys/class/net/" + link.Attrs().Name
	if b, err := os.ReadFile(dir + "/address"); err != nil || strings.TrimSpace(string(b)) != link.Attrs().HardwareAddr.String() {
		return false
	}
	txqs, _ := filepath.Glob(dir + "/queues/tx-*/xps_cpus")
	for _, f := range txqs {
		if b, err := os.ReadFile(f); err == nil && strings.Trim(strings.TrimSpace(string(b)), "0,") != "" {
			return true
		}
	}
	return false
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
// makes its rate classes want (had: what the last call made). With a
// latency queue (latencyTxq > 0), under an mq root.
func ensureHTB(dev string, rate uint64, latencyTxq uint32, had, want map[uint32]BucketClass) error {
	link, qs, err := uplinkQdiscs(dev)
	if err != nil {
		return err
	}
	idx := link.Attrs().Index
	if rate == 0 {
		rate = uplinkRate(dev)
	}
	htbParent := uint32(netlink.HANDLE_ROOT)
	if latencyTxq > 0 {
		htbParent = mqHandle | 1 // the first queue
	}
	present, mq := false, false
	for _, qd := range qs {
		a := qd.Attrs()
		present = present || a.Parent == htbParent && a.Handle == prioHandle && qd.Type() == "htb"
		mq = mq || a.Parent == netlink.HANDLE_ROOT && a.Handle == mqHandle && qd.Type() == "mq"
	}
	if latencyTxq > 0 && !mq {
		root := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: mqHandle}, QdiscType: "mq"}
		if err := netlink.QdiscReplace(root); err != nil {
			return fmt.Errorf("uplink %s: mq qdisc: %w", dev, err)
		}
		lat := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: mqHandle | (latencyTxq + 1), Handle: latencyHandle}, QdiscType: "pfifo_fast"}
		if err := netlink.QdiscReplace(lat); err != nil {
			return fmt.Errorf("uplink %s: the latency class's queue %d: %w", dev, latencyTxq, err)
		}
		present = false
		slog.Info("network slices: the latency class has a transmit queue of its own", "uplink", dev, "queue", latencyTxq)
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
		htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: htbParent, Handle: prioHandle})
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
		if a := qd.Attrs(); a.Parent == netlink.HANDLE_ROOT && (a.Handle == prioHandle || a.Handle == mqHandle) {
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
