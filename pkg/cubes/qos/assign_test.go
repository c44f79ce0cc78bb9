package qos

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

func pod(ns, name, node, ip string, l map[string]string) *model.Pod {
	return &model.Pod{ID: model.PodID{Namespace: ns, Name: name}, Node: node, Labels: l, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
}

func sel(s string) labels.Selector {
	out, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return out
}

// TestAssign: which slice each pod of the node is in, and its rate.
func TestAssign(t *testing.T) {
	urllc := &model.Slice{Name: "urllc", Class: model.Latency, DSCP: 46, Pods: sel("app=ran")}
	embb := &model.Slice{Name: "embb", Class: model.Throughput, DSCP: 10, Rate: 80_000_000, Namespaces: sel("tier=bulk")}
	empty := &model.Slice{Name: "empty", Class: model.Latency, DSCP: 46, Pods: sel("app=none")}
	ran := pod("edge", "ran", "n1", "10.244.1.5", map[string]string{"app": "ran"})
	bulk := pod("video", "enc", "n1", "10.244.1.6", nil)
	both := pod("video", "ran2", "n1", "10.244.1.7", map[string]string{"app": "ran"})
	capped := pod("edge", "capped", "n1", "10.244.1.8", nil)
	capped.EgressBandwidth = 10_000_000
	remote := pod("edge", "far", "n2", "10.244.2.5", map[string]string{"app": "ran"})
	st := State{
		Slices:     map[string]*model.Slice{"urllc": urllc, "embb": embb, "empty": empty},
		Namespaces: map[string]map[string]string{"video": {"tier": "bulk"}},
		Pods:       map[model.PodID]*model.Pod{ran.ID: ran, bulk.ID: bulk, both.ID: both, capped.ID: capped, remote.ID: remote},
	}
	a := NewAssigner("n1")
	d, conflicts, errs := a.Assign(st)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	idOf := func(name string) uint32 { return a.sliceIDs[name] }
	// The HTB class: the slice class's, or its rate bucket's.
	want := map[string]datapath.QosPod{
		"10.244.1.5": {Slice: idOf("urllc"), Classid: 0x4e430010},
		"10.244.1.6": {Slice: idOf("embb"), Bucket: idOf("embb"), Classid: 0x4e431000 + idOf("embb")},
		"10.244.1.8": {Bucket: firstPodBucket, Classid: 0x4e431000 + firstPodBucket},
	}
	// ran2 is selected by urllc (its label) and embb (its namespace),
	// of the same precedence: urllc sorts after embb, so embb.
	want["10.244.1.7"] = want["10.244.1.6"]
	if len(d.Pods) != len(want) {
		t.Errorf("pods %v, want %v (the other node's pod left out)", d.Pods, want)
	}
	for ip, w := range want {
		if got := d.Pods[netip.MustParseAddr(ip)]; got != w {
			t.Errorf("pod %s: %+v, want %+v", ip, got, w)
		}
	}
	if len(conflicts) != 1 || conflicts[0].Pod != both.ID || conflicts[0].Chosen != "embb" || conflicts[0].Other != "urllc" ||
		!strings.Contains(conflicts[0].String(), "spec.precedence") {
		t.Errorf("conflicts %v, want ran2 in embb, urllc told", conflicts)
	}
	if s := d.Slices[idOf("urllc")]; s.Dscp != 46 || s.Priority != 6 || s.Class != datapath.QosLatency {
		t.Errorf("urllc %+v, want DSCP 46, priority 6, latency", s)
	}
	if _, ok := d.Slices[idOf("empty")]; !ok || idOf("empty") == 0 {
		t.Error("a slice selecting no pod is not kept (it is accepted, and empty)")
	}
	if b := d.Buckets[idOf("embb")]; b.Rate != 10_000_000 || b.BurstNs != DefaultBurstNs {
		t.Errorf("embb's bucket %+v, want 10 MB/s", b)
	}
	placed := a.Placement()
	if placed.Slices["urllc"].Pods != 1 || placed.Slices["embb"].Pods != 2 || placed.Slices["empty"] != (SlicePods{Class: model.Latency}) || placed.OwnRate != 1 {
		t.Errorf("placement %+v, want urllc 1, embb 2, empty listed with 0, one pod at its own rate", placed)
	}
	if b := d.Buckets[firstPodBucket]; b.Rate != 1_250_000 {
		t.Errorf("the capped pod's bucket %+v, want 1.25 MB/s (10 Mbit/s)", b)
	}
	if c := d.Classes[idOf("embb")]; c.Rate != 80_000_000 || c.Class != model.Throughput {
		t.Errorf("embb's HTB class %+v, want 80 Mbit/s at throughput's priority", c)
	}

	// Precedence decides; then the slice removed: its pods are best
	// effort at once, the other slices keep their ids.
	urllc.Precedence = 10
	d, conflicts, _ = a.Assign(st)
	if got := d.Pods[netip.MustParseAddr("10.244.1.7")]; got != (datapath.QosPod{Slice: idOf("urllc"), Classid: 0x4e430010}) || len(conflicts) != 0 {
		t.Errorf("with urllc first: ran2 %+v, conflicts %v", got, conflicts)
	}
	embbID := idOf("embb")
	delete(st.Slices, "urllc")
	d, _, _ = a.Assign(st)
	if _, ok := d.Pods[netip.MustParseAddr("10.244.1.5")]; ok {
		t.Error("urllc deleted: its pod is still placed")
	}
	if idOf("embb") != embbID {
		t.Errorf("embb's id moved from %d to %d", embbID, idOf("embb"))
	}
}

// TestAssignIngress: a pod's ingress-bandwidth has it received through
// its veth's shaper (a flag in its entry, and its rate and address for the
// shaper), and needs no uplink queueing; an egress rate does.
func TestAssignIngress(t *testing.T) {
	in := pod("edge", "in", "n1", "10.244.1.9", nil)
	in.IngressBandwidth = 40_000_000
	st := State{Pods: map[model.PodID]*model.Pod{in.ID: in}}
	a := NewAssigner("n1")
	d, _, errs := a.Assign(st)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got := d.Pods[netip.MustParseAddr("10.244.1.9")]
	if got.Ingress != 1 || got.Bucket != 0 || got.Slice != 0 {
		t.Errorf("pod %+v, want received through its veth only", got)
	}
	if sh := d.Shaped[in.ID]; sh.Rate != 40_000_000 || sh.Addr != netip.MustParseAddr("10.244.1.9") {
		t.Errorf("its shaper %+v, want 40 Mbit/s, found by its address", sh)
	}
	if d.Queue {
		t.Error("an ingress rate alone queues the uplinks")
	}
	if a.Placement().OwnIngress != 1 {
		t.Errorf("placement %+v, want one pod shaped", a.Placement())
	}

	in.EgressBandwidth = 10_000_000
	d, _, _ = a.Assign(st)
	got = d.Pods[netip.MustParseAddr("10.244.1.9")]
	if got.Ingress != 1 || got.Bucket == 0 || !d.Queue {
		t.Errorf("with an egress rate too: %+v (queue %v), want a bucket of its own and the uplinks queued", got, d.Queue)
	}
	in.IngressBandwidth = 0
	d, _, _ = a.Assign(st)
	if got = d.Pods[netip.MustParseAddr("10.244.1.9")]; got.Ingress != 0 || len(d.Shaped) != 0 {
		t.Errorf("the ingress annotation removed: %+v, shaped %v; want neither", got, d.Shaped)
	}
}
