// Package trace explains what the node's datapath does with a packet
// without sending one: it crafts the packet and its reply and runs them
// (BPF_PROG_RUN) through the node's real programs over a copy of its maps
// (datapath.Clone: the node's state is read, never changed), hook by hook,
// with every cube's events on: which backend the load balancer picks,
// the translations, each policy verdict and its rule, each drop and its
// reason, and where the router sends the packet.
package trace

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
)

// tc verdicts.
const (
	actOK       = 0
	actShot     = 2
	actRedirect = 7
)

// Hop is one program's run.
type Hop struct {
	Program string         `json:"program"` // from_pod, to_pod, from_net
	In      Packet         `json:"in"`
	Out     *Packet        `json:"out,omitempty"` // as it left (nil: dropped)
	Verdict string         `json:"verdict"`
	Events  []events.Event `json:"events,omitempty"`
}

// Leg is the packet's way through the node, or its reply's.
type Leg struct {
	Hops    []Hop  `json:"hops"`
	Outcome string `json:"outcome"`
	// Delivered is where the packet ends up when the node hands it to a
	// pod or the network (invalid: dropped or refused).
	Delivered netip.AddrPort `json:"delivered,omitzero"`
	Dropped   string         `json:"dropped,omitempty"` // the drop reason
	Refused   bool           `json:"refused,omitempty"` // answered at once (RST, ICMP unreachable)
}

// Result is a trace: the packet, and its reply when it got through.
type Result struct {
	Packet Packet `json:"packet"`
	Way    Leg    `json:"way"`
	Reply  *Leg   `json:"reply,omitempty"`
}

// Tracer runs packets through a copy of the node's datapath.
type Tracer struct {
	dp *datapath.Datapath
	rd *ringbuf.Reader
}

// New copies the datapath pinned under pinDir (datapath.Clone), with
// every event on.
func New(pinDir string) (*Tracer, error) {
	dp, err := datapath.Clone(pinDir, datapath.Config{})
	if err != nil {
		return nil, err
	}
	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagDrops|datapath.MonFlagPolicy|datapath.MonFlagTrace); err != nil {
		dp.Close()
		return nil, err
	}
	km := dp.Maps().Map(monitor.MapEvents).(interface{ Unwrap() *ebpf.Map })
	rd, err := ringbuf.NewReader(km.Unwrap())
	if err != nil {
		dp.Close()
		return nil, err
	}
	return &Tracer{dp: dp, rd: rd}, nil
}

// Close releases the copy.
func (t *Tracer) Close() {
	t.rd.Close()
	t.dp.Close()
}

// IsLocalPod says whether a is a pod of this node (router_endpoints).
func (t *Tracer) IsLocalPod(a netip.Addr) bool {
	_, ok := t.endpoint(a)
	return ok
}

func (t *Tracer) endpoint(a netip.Addr) (datapath.RouterEndpoint, bool) {
	var ep datapath.RouterEndpoint
	err := t.dp.Maps().Map(router.MapEndpoints).Lookup(datapath.AddrFrom(a), &ep)
	return ep, err == nil
}

// sourceDevice is the host-side device a pod of this node sends a from (0:
// none).
func (t *Tracer) sourceDevice(a netip.Addr) uint32 {
	var s datapath.RouterSource
	if t.dp.Maps().Map(router.MapSources).Lookup(datapath.AddrFrom(a), &s) != nil {
		return 0
	}
	return s.Ifindex
}

// skbOnDevice is the start of struct __sk_buff, up to ifindex: what
// BPF_PROG_RUN takes to run a packet as received on that device (every
// field before it zero, as the kernel requires).
type skbOnDevice struct {
	_       [10]uint32 // len .. ingress_ifindex
	Ifindex uint32
}

// Trace runs p (a pod's packet when its source is a pod of this node,
// else one arriving on the uplink) and, if it gets through, its reply.
func (t *Tracer) Trace(p Packet) (Result, error) {
	r := Result{Packet: p}
	var err error
	if r.Way, err = t.leg(p); err != nil {
		return r, err
	}
	if !r.Way.Delivered.IsValid() {
		return r, nil
	}
	last := r.Way.Hops[len(r.Way.Hops)-1].Out
	reply := Packet{Proto: last.Proto, Src: last.Dst, Dst: last.Src, SYN: last.SYN, ACK: true}
	if p.Proto == "UDP" {
		reply.ACK = false
	}
	leg, err := t.leg(reply)
	if err != nil {
		return r, err
	}
	r.Reply = &leg
	return r, nil
}

// leg runs p from where it enters this node until the node hands it on.
func (t *Tracer) leg(p Packet) (Leg, error) {
	var leg Leg
	prog, name := t.dp.Programs().FromNet, "from_net"
	if t.IsLocalPod(p.Src.Addr()) {
		prog, name = t.dp.Programs().FromPod, "from_pod"
	}
	hop, err := t.run(prog, name, p)
	if err != nil {
		return leg, err
	}
	leg.Hops = append(leg.Hops, hop)
	for {
		switch {
		case hop.Out == nil:
			leg.Dropped = dropReason(hop.Events)
			leg.Outcome = "dropped: " + leg.Dropped
			return leg, nil
		case dropReason(hop.Events) == "no-endpoints":
			leg.Refused, leg.Dropped = true, "no-endpoints"
			leg.Outcome = "refused (no endpoints): the client gets " + hop.Out.String()
			return leg, nil
		case hop.Verdict == "into the pod":
			leg.Delivered = hop.Out.Dst
			leg.Outcome = "delivered into the pod " + hop.Out.Dst.Addr().String() + " as " + hop.Out.String()
			return leg, nil
		case hop.Verdict == "to the kernel" && name != "to_pod" && t.IsLocalPod(hop.Out.Dst.Addr()):
			// The kernel routes it to the pod's veth, whose egress
			// program runs before the pod gets it.
			name = "to_pod"
			if hop, err = t.run(t.dp.Programs().ToPod, name, *hop.Out); err != nil {
				return leg, err
			}
			leg.Hops = append(leg.Hops, hop)
			if hop.Verdict == "to the kernel" {
				hop.Verdict = "into the pod"
				leg.Hops[len(leg.Hops)-1] = hop
			}
		default:
			leg.Delivered = hop.Out.Dst
			leg.Outcome = hop.Verdict + ": " + hop.Out.String()
			return leg, nil
		}
	}
}

// run runs one program on p and reads what the cubes reported.
func (t *Tracer) run(prog *ebpf.Program, name string, p Packet) (Hop, error) {
	hop := Hop{Program: name, In: p}
	in, err := p.bytes()
	if err != nil {
		return hop, err
	}
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out}
	if name == "from_net" {
		// BPF_PROG_RUN makes the skb on loopback (no device named), and
		// a frame to any MAC but loopback's (all zero) comes in as
		// another host's (PACKET_OTHERHOST), which from_net leaves to the
		// kernel untouched: it is addressed to loopback, the uplink here.
		clear(in[:6])
	}
	if name == "from_pod" {
		// The pod's packet arrives on the pod's own device, where
		// from_pod's source check expects it (router_sources).
		if dev := t.sourceDevice(p.Src.Addr()); dev > 1 {
			opts.Context = skbOnDevice{Ifindex: dev}
		}
	}
	v, err := prog.Run(opts)
	if err != nil {
		return hop, fmt.Errorf("run %s: %w", name, err)
	}
	hop.Events = t.drain()
	if v == actShot {
		hop.Verdict = "dropped"
		return hop, nil
	}
	o, mac, err := parse(opts.DataOut)
	if err != nil {
		return hop, fmt.Errorf("%s put out a packet it cannot read: %w", name, err)
	}
	hop.Out = &o
	switch {
	case v == actRedirect && t.isPodMAC(o.Dst.Addr(), mac):
		hop.Verdict = "into the pod"
	case v != actRedirect && v != actOK:
		hop.Verdict = fmt.Sprintf("tc verdict %d", v)
	case t.nodeOf(o.Dst.Addr()).IsValid():
		// A trace's packet has no interface it came in on, so the FIB
		// may not answer here as it does for the real one: either way it
		// goes to that node.
		hop.Verdict = "on to the node at " + t.nodeOf(o.Dst.Addr()).String() + " (whose pod CIDR holds it)"
	case v == actRedirect:
		hop.Verdict = "redirected to the next hop (FIB or overlay)"
	default:
		hop.Verdict = "to the kernel"
	}
	return hop, nil
}

// nodeOf returns the underlay address of the node whose pod CIDR holds a
// (router_nodes; invalid: none).
func (t *Tracer) nodeOf(a netip.Addr) netip.Addr {
	var n datapath.RouterNode
	if err := t.dp.Maps().Map(router.MapNodes).Lookup(datapath.PrefixFrom(netip.PrefixFrom(a, a.BitLen())), &n); err != nil {
		return netip.Addr{}
	}
	return n.Underlay.IP()
}

// isPodMAC says whether the router addressed the frame to the pod with
// address a (router_to_endpoint writes its MAC before bpf_redirect_peer).
func (t *Tracer) isPodMAC(a netip.Addr, mac []byte) bool {
	ep, ok := t.endpoint(a)
	return ok && bytes.Equal(ep.PodMac[:], mac)
}

func (t *Tracer) drain() []events.Event {
	var out []events.Event
	for {
		t.rd.SetDeadline(time.Now().Add(5 * time.Millisecond))
		rec, err := t.rd.Read()
		if err != nil { // the deadline: everything written was read
			return out
		}
		if e, err := events.Decode(rec.RawSample, time.Time{}); err == nil {
			out = append(out, e)
		}
	}
}

func dropReason(evs []events.Event) string {
	for _, e := range evs {
		if e.Type == "drop" {
			return e.Drop
		}
	}
	return ""
}

// Maps are the copy's maps (for naming what the trace meets).
func (t *Tracer) Maps() *cube.Maps { return t.dp.Maps() }
