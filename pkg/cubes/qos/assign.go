package qos

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// State is what the cube decides from: every NetworkSlice, the
// namespaces' labels, and the pods (only this node's are placed).
type State struct {
	Slices     map[string]*model.Slice
	Namespaces map[string]map[string]string
	Pods       map[model.PodID]*model.Pod
}

// Conflict: a pod two slices of the same precedence select. It is in
// Chosen (the name that sorts first), never in both; Other is told.
type Conflict struct {
	Pod           model.PodID
	Chosen, Other string
}

func (c Conflict) String() string {
	return fmt.Sprintf("pod %s is selected by NetworkSlice %s too, of the same precedence: it is in %s (the name that sorts first); give one a higher spec.precedence",
		c.Pod, c.Chosen, c.Chosen)
}

// Refused: an object the maps have no room for (a slice beyond the
// node's most, a pod's rate beyond its buckets); retried at each change.
type Refused struct {
	Object report.Object
	Err    error
}

// Assigner turns State into the maps' Desired state. It keeps each
// slice's id, and each rated pod's bucket, for as long as they exist, so
// that a change rewrites only what changed (and a pod's pacing is not
// reset by another's).
type Assigner struct {
	node       string
	sliceIDs   map[string]uint32
	podBuckets map[model.PodID]uint32
	placed     Placement // the last Assign's
}

// Placement is what the last Assign placed (for metrics).
func (a *Assigner) Placement() Placement { return a.placed }

// NewAssigner places the pods of node.
func NewAssigner(node string) *Assigner {
	return &Assigner{node: node, sliceIDs: map[string]uint32{}, podBuckets: map[model.PodID]uint32{}}
}

// Slice ids are 1..QOS_SLICES_MAX-1, and a slice's rate bucket has its
// id; pods' own buckets come after.
const (
	maxSlices      = 255
	firstPodBucket = 256
	maxBuckets     = 16384
)

// Assign decides where each pod of the node goes: the slice of highest
// precedence among those selecting it (none: best effort); its rate, its
// egress-bandwidth annotation's own bucket if it has one, else its
// slice's shared one. Slices beyond the maps' room are refused (errs).
func (a *Assigner) Assign(st State) (Desired, []Conflict, []Refused) {
	d := Desired{Slices: map[uint32]datapath.QosSlice{}, Buckets: map[uint32]Bucket{}, Pods: map[netip.Addr]datapath.QosPod{},
		Classes: map[uint32]BucketClass{}, Shaped: map[model.PodID]IngressShape{}}
	var errs []Refused
	names := make([]string, 0, len(st.Slices))
	for n := range st.Slices {
		names = append(names, n)
	}
	slices.Sort(names)
	for n := range a.sliceIDs { // ids of deleted slices are free again
		if _, ok := st.Slices[n]; !ok {
			delete(a.sliceIDs, n)
		}
	}
	a.placed = Placement{Slices: map[string]SlicePods{}}
	for _, n := range names {
		a.placed.Slices[n] = SlicePods{Class: st.Slices[n].Class}
		id, err := a.sliceID(n)
		if err != nil {
			errs = append(errs, Refused{report.Object{Kind: "NetworkSlice", Name: n}, err})
			continue
		}
		s := st.Slices[n]
		d.Slices[id] = datapath.QosSlice{Priority: priority[s.Class], Dscp: s.DSCP, Class: classOf(s.Class)}
		if s.Rate > 0 {
			d.Buckets[id] = bucketOf(s.Rate, s.Burst)
		}
	}

	var conflicts []Conflict
	pods := make([]model.PodID, 0, len(st.Pods))
	for id, p := range st.Pods {
		if p.Node == a.node && !p.HostNetwork {
			pods = append(pods, id)
		}
	}
	slices.SortFunc(pods, func(x, y model.PodID) int { return cmp.Compare(x.String(), y.String()) })
	for id := range a.podBuckets {
		if p := st.Pods[id]; p == nil || p.EgressBandwidth == 0 {
			delete(a.podBuckets, id)
		}
	}
	for _, id := range pods {
		p := st.Pods[id]
		var in *model.Slice
		var tied []string // others of in's precedence
		for _, n := range names {
			s := st.Slices[n]
			if _, ok := a.sliceIDs[n]; !ok || !selects(s, p, st.Namespaces[id.Namespace]) {
				continue
			}
			switch {
			case in == nil || s.Precedence > in.Precedence:
				in, tied = s, nil
			case s.Precedence == in.Precedence:
				tied = append(tied, s.Name)
			}
		}
		for _, o := range tied {
			conflicts = append(conflicts, Conflict{Pod: id, Chosen: in.Name, Other: o})
		}
		var qp datapath.QosPod
		class := model.BestEffort
		if in != nil {
			sp := a.placed.Slices[in.Name]
			sp.Pods++
			a.placed.Slices[in.Name] = sp
			class = in.Class
			qp.Slice = a.sliceIDs[in.Name]
			if in.Rate > 0 {
				qp.Bucket = qp.Slice
			}
		}
		if p.EgressBandwidth > 0 {
			b, err := a.podBucket(id)
			if err != nil {
				errs = append(errs, Refused{report.Object{Kind: "Pod", Namespace: id.Namespace, Name: id.Name}, err})
			} else {
				d.Buckets[b] = bucketOf(p.EgressBandwidth, 0)
				qp.Bucket = b
				a.placed.OwnRate++
			}
		}
		if p.IngressBandwidth > 0 && len(p.IPs) > 0 {
			// Received through its veth, whose qdisc shapes it.
			qp.Ingress = 1
			d.Shaped[id] = IngressShape{Addr: p.IPs[0], Rate: p.IngressBandwidth}
			a.placed.OwnIngress++
		}
		if qp == (datapath.QosPod{}) {
			continue // best effort, no rate: nothing to do per packet
		}
		// Only what a pod sends is queued at the uplinks.
		d.Queue = d.Queue || qp.Slice != 0 || qp.Bucket != 0
		qp.Classid = classOfHTB(class)
		if qp.Bucket != 0 {
			qp.Classid = bucketClass(qp.Bucket)
			// Served at its slice's priority (a slice's bucket is its
			// pods' alone, a pod's bucket its own).
			d.Classes[qp.Bucket] = BucketClass{Rate: d.Buckets[qp.Bucket].Rate * 8, Class: class}
		}
		for _, ip := range p.IPs {
			d.Pods[ip] = qp
		}
	}
	return d, conflicts, errs
}

func (a *Assigner) sliceID(name string) (uint32, error) {
	if id, ok := a.sliceIDs[name]; ok {
		return id, nil
	}
	used := map[uint32]bool{}
	for _, id := range a.sliceIDs {
		used[id] = true
	}
	for id := uint32(1); id <= maxSlices; id++ {
		if !used[id] {
			a.sliceIDs[name] = id
			return id, nil
		}
	}
	return 0, fmt.Errorf("not applied: this node already has %d slices, its most", maxSlices)
}

func (a *Assigner) podBucket(id model.PodID) (uint32, error) {
	if b, ok := a.podBuckets[id]; ok {
		return b, nil
	}
	used := map[uint32]bool{}
	for _, b := range a.podBuckets {
		used[b] = true
	}
	for b := uint32(firstPodBucket); b < maxBuckets; b++ {
		if !used[b] {
			a.podBuckets[id] = b
			return b, nil
		}
	}
	return 0, fmt.Errorf("its egress bandwidth is not applied: this node paces %d pods already, its most", maxBuckets-firstPodBucket)
}

// selects says whether s selects p, in a namespace with nsLabels.
func selects(s *model.Slice, p *model.Pod, nsLabels map[string]string) bool {
	return matches(s.Namespaces, nsLabels) && matches(s.Pods, p.Labels)
}

func matches(sel labels.Selector, l map[string]string) bool {
	return sel == nil || sel.Matches(labels.Set(l))
}

func classOf(c model.SliceClass) datapath.QosClass {
	switch c {
	case model.Latency:
		return datapath.QosLatency
	case model.Throughput:
		return datapath.QosThroughput
	}
	return datapath.QosBestEffort
}

// bucketOf is a rate in bits per second and a burst in bytes (0: the
// default) as a bucket: bytes per second, and the burst in ns of it.
func bucketOf(bitsPerSec, burst uint64) Bucket {
	b := Bucket{Rate: bitsPerSec / 8, BurstNs: DefaultBurstNs}
	if burst > 0 && b.Rate > 0 {
		b.BurstNs = burst * 1_000_000_000 / b.Rate
	}
	return b
}

// HTB classes (QOS_MODE_HTB): one per slice class, served in this order
// (HTB's prio 0, 1, 2), and one per rate bucket a pod uses, under the
// root class of the uplink's rate.
const (
	htbMajor     = prioHandle >> 16
	htbRoot      = 0x1
	htbLatency   = 0x10
	htbBest      = 0x20 // the default: pods in no slice
	htbBulk      = 0x30
	htbFirstRate = 0x1000 // + bucket
)

func classOfHTB(c model.SliceClass) uint32 {
	switch c {
	case model.Latency:
		return htbMajor<<16 | htbLatency
	case model.Throughput:
		return htbMajor<<16 | htbBulk
	}
	return htbMajor<<16 | htbBest
}

func bucketClass(b uint32) uint32 { return htbMajor<<16 | (htbFirstRate + b) }

// htbPrio is a slice class's HTB priority (0 served first).
func htbPrio(c model.SliceClass) uint32 {
	switch c {
	case model.Latency:
		return 0
	case model.Throughput:
		return 2
	}
	return 1
}
