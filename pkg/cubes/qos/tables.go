package qos

import (
	"fmt"
	"net/netip"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// The cube's maps (bpf/cubes/qos/qos_maps.h).
const (
	MapPods    = "qos_pods"    // a pod's address -> its slice and rate bucket
	MapSlices  = "qos_slices"  // slice id -> priority, DSCP, class
	MapBuckets = "qos_buckets" // bucket id -> rate, burst, horizon (and the datapath's last departure)
)

// Skb priorities (TC_PRIO_*, linux/pkt_sched.h) by class: the default
// priomap of a prio qdisc sends 6 (interactive) to band 0, 0 (best
// effort) to band 1 and 2 (bulk) to band 2, served in that order.
var priority = map[model.SliceClass]uint32{
	model.Latency:    6,
	model.BestEffort: 0,
	model.Throughput: 2,
}

// Horizon is how far ahead of now a packet may be scheduled before it
// is dropped (as the Bandwidth Manager's 2 s drop horizon).
const Horizon = 2_000_000_000 // ns

// DefaultBurstNs: without a burst, a bucket idle for a while lets 10 ms
// of its rate go at once.
const DefaultBurstNs = 10_000_000

// Desired is what the maps should hold: slices by id, rate buckets by id,
// and the pods of this node by address; and, for the HTB queueing, a
// class per bucket a pod uses.
type Desired struct {
	Slices  map[uint32]datapath.QosSlice
	Buckets map[uint32]Bucket
	Pods    map[netip.Addr]datapath.QosPod
	Classes map[uint32]BucketClass // by bucket
	// Queue: some pod sends in a slice or at a rate (the uplinks are
	// queued); without, pods only receive at a rate.
	Queue bool
	// Shaped: the pods that receive at a rate of their own, through
	// their veth's qdisc (not a map: written by podShaping).
	Shaped map[model.PodID]IngressShape
}

// IngressShape is a pod's ingress-bandwidth: an address of the pod (the
// node routes it to the pod's veth) and the rate, in bits per second.
type IngressShape struct {
	Addr netip.Addr
	Rate uint64
}

// BucketClass is a rate's HTB class: its rate (bits per second) and the
// class of the slice whose pods use it (their priority).
type BucketClass struct {
	Rate  uint64
	Class model.SliceClass
}

// Bucket is a rate: bytes per second, and its burst in ns of that rate.
type Bucket struct{ Rate, BurstNs uint64 }

// Tables writes Desired into the maps, changing only what differs from
// what it wrote last; a failed write is retried by the next Apply.
type Tables struct {
	maps    *cube.Maps
	applied Desired
}

// NewTables returns Tables over maps, whose entries it takes for
// unknown: the first Apply writes everything and deletes what it does
// not want.
func NewTables(maps *cube.Maps) *Tables { return &Tables{maps: maps} }

// Apply makes the maps hold d. Pods are written after the slices and
// buckets they name, and deleted before those are.
func (t *Tables) Apply(d Desired) error {
	first := t.applied.Pods == nil
	if first {
		if err := t.sweep(d); err != nil {
			return err
		}
	}
	for id, s := range d.Slices {
		if old, ok := t.applied.Slices[id]; !ok || old != s || first {
			if err := cube.Put(t.maps, MapSlices, id, s); err != nil {
				return fmt.Errorf("slice %d: %w", id, err)
			}
		}
	}
	for id, b := range d.Buckets {
		if old, ok := t.applied.Buckets[id]; !ok || old != b || first {
			v := datapath.QosBucket{Rate: b.Rate, BurstNs: b.BurstNs, HorizonNs: Horizon}
			if err := cube.Put(t.maps, MapBuckets, id, v); err != nil {
				return fmt.Errorf("rate bucket %d: %w", id, err)
			}
		}
	}
	for a, p := range d.Pods {
		if old, ok := t.applied.Pods[a]; !ok || old != p || first {
			if err := cube.Put(t.maps, MapPods, datapath.AddrFrom(a), p); err != nil {
				return fmt.Errorf("pod %s: %w", a, err)
			}
		}
	}
	for a := range t.applied.Pods {
		if _, ok := d.Pods[a]; !ok {
			if err := cube.Remove(t.maps, MapPods, datapath.AddrFrom(a)); err != nil {
				return err
			}
		}
	}
	// Arrays: an id no longer used is reset to its zero value (no rate,
	// best effort), so that a reused id starts clean.
	for id := range t.applied.Slices {
		if _, ok := d.Slices[id]; !ok {
			if err := cube.Put(t.maps, MapSlices, id, datapath.QosSlice{}); err != nil {
				return err
			}
		}
	}
	for id := range t.applied.Buckets {
		if _, ok := d.Buckets[id]; !ok {
			if err := cube.Put(t.maps, MapBuckets, id, datapath.QosBucket{}); err != nil {
				return err
			}
		}
	}
	t.applied = d
	return nil
}

// sweep deletes the pods an earlier agent left that d does not want.
func (t *Tables) sweep(d Desired) error {
	var stale []datapath.Addr
	var k datapath.Addr
	var v datapath.QosPod
	it := t.maps.Map(MapPods).Iterate()
	for it.Next(&k, &v) {
		if _, ok := d.Pods[k.IP()]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read %s: %w", MapPods, err)
	}
	for _, k := range stale {
		if err := cube.Remove(t.maps, MapPods, k); err != nil {
			return err
		}
	}
	return nil
}
