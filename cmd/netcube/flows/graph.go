package flows

import (
	"fmt"
	"sort"
	"strings"

	"github.com/netcube/netcube/pkg/hubble/flowpb"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// Node kinds: a workload (the pods of one app), a Service, or what is
// not a pod: the world outside, or a reserved identity (host, ...).
const (
	KindWorkload = "workload"
	KindService  = "service"
	KindWorld    = "world"
)

// Node is a box on the map.
type Node struct {
	ID   string   `json:"id"`
	Kind string   `json:"kind"`
	Name string   `json:"name"`
	Pods []string `json:"pods,omitempty"` // a workload's pods seen (namespace/name)
	IPs  []string `json:"ips,omitempty"`  // the world's addresses seen
}

// Edge is who sent to whom: a workload (or the world) to the Service the
// flow names, else to the pod's workload; with what became of the flows.
type Edge struct {
	From        string         `json:"from"`
	To          string         `json:"to"`
	Forwarded   int            `json:"forwarded"`
	Dropped     int            `json:"dropped"`
	DropReasons map[string]int `json:"dropReasons,omitempty"` // Hubble's drop reason: flows
	DeniedBy    []string       `json:"deniedBy,omitempty"`    // the policies named on its policy drops
	Ports       []string       `json:"ports,omitempty"`       // destination protocol/port
}

// Graph is the map: its nodes and edges sorted, and what the flows did
// not show.
type Graph struct {
	Nodes   []Node `json:"nodes"`
	Edges   []Edge `json:"edges"`
	Flows   int    `json:"flows"`             // flows drawn
	Replies int    `json:"replies,omitempty"` // reply flows, drawn as their request's edge is
	Lost    uint64 `json:"lost,omitempty"`    // flows the server said it lost
}

// Grouping is how pods are gathered into workloads: by the value of a
// label (app), or, without it, by the pod's name without the suffixes
// its controller adds (web-7d4b9c-x2x9z: web).
type Grouping struct {
	Label string // "" or "pod": every pod its own node
}

// builder gathers flows into a graph.
type builder struct {
	group Grouping
	nodes map[string]*Node
	edges map[[2]string]*Edge
	ports map[[2]string]map[string]bool
	deny  map[[2]string]map[string]bool
	g     Graph
}

func newBuilder(group Grouping) *builder {
	return &builder{group: group, nodes: map[string]*Node{}, edges: map[[2]string]*Edge{},
		ports: map[[2]string]map[string]bool{}, deny: map[[2]string]map[string]bool{}}
}

// Build is the map of responses (flows and lost events) as GetFlows sends them.
func Build(responses []*observerpb.GetFlowsResponse, group Grouping) Graph {
	b := newBuilder(group)
	for _, r := range responses {
		b.add(r)
	}
	return b.graph()
}

func (b *builder) add(r *observerpb.GetFlowsResponse) {
	if l := r.GetLostEvents(); l != nil {
		b.g.Lost += l.GetNumEventsLost()
		return
	}
	f := r.GetFlow()
	if f == nil {
		return
	}
	// A reply is its connection's: the map draws a connection once, from
	// its client, so replies are only counted.
	if f.GetIsReply().GetValue() {
		b.g.Replies++
		return
	}
	from := b.endpoint(f.GetSource(), f.GetIP().GetSource())
	var to string
	if s := f.GetDestinationService(); s.GetName() != "" {
		to = b.service(s)
	} else {
		to = b.endpoint(f.GetDestination(), f.GetIP().GetDestination())
	}
	key := [2]string{from, to}
	e := b.edges[key]
	if e == nil {
		e = &Edge{From: from, To: to}
		b.edges[key] = e
		b.ports[key], b.deny[key] = map[string]bool{}, map[string]bool{}
	}
	b.g.Flows++
	switch f.GetVerdict() {
	case flowpb.Verdict_DROPPED:
		e.Dropped++
		if e.DropReasons == nil {
			e.DropReasons = map[string]int{}
		}
		e.DropReasons[dropReason(f)]++
		for _, p := range append(append([]*flowpb.Policy{}, f.GetIngressDeniedBy()...), f.GetEgressDeniedBy()...) {
			b.deny[key][policyName(p)] = true
		}
	case flowpb.Verdict_FORWARDED, flowpb.Verdict_TRANSLATED, flowpb.Verdict_REDIRECTED:
		e.Forwarded++
	}
	if p := destPort(f); p != "" {
		b.ports[key][p] = true
	}
}

// endpoint is the node of a flow's endpoint: its pod's workload, a
// reserved identity the server names (reserved:host), or the world.
func (b *builder) endpoint(ep *flowpb.Endpoint, ip string) string {
	if ep.GetPodName() != "" {
		ns := ep.GetNamespace()
		id := "workload:" + ns + "/" + b.workload(ep)
		n := b.node(id, KindWorkload, ns+"/"+b.workload(ep))
		n.Pods = appendNew(n.Pods, ns+"/"+ep.GetPodName())
		return id
	}
	for _, l := range ep.GetLabels() {
		if name, ok := strings.CutPrefix(l, "reserved:"); ok && name != "world" {
			return b.node("reserved:"+name, KindWorld, name).ID
		}
	}
	n := b.node("world", KindWorld, "world")
	if ip != "" {
		n.IPs = appendNew(n.IPs, ip)
	}
	return n.ID
}

func (b *builder) service(s *flowpb.Service) string {
	name := s.GetNamespace() + "/" + s.GetName()
	return b.node("service:"+name, KindService, name).ID
}

func (b *builder) node(id, kind, name string) *Node {
	n := b.nodes[id]
	if n == nil {
		n = &Node{ID: id, Kind: kind, Name: name}
		b.nodes[id] = n
	}
	return n
}

// workload is the name of a pod's workload.
func (b *builder) workload(ep *flowpb.Endpoint) string {
	if b.group.Label == "pod" {
		return ep.GetPodName()
	}
	if b.group.Label != "" {
		for _, l := range ep.GetLabels() {
			if v, ok := strings.CutPrefix(l, "k8s:"+b.group.Label+"="); ok && v != "" {
				return v
			}
		}
	}
	return podNamePrefix(ep.GetPodName())
}

// podNamePrefix drops what a controller adds to a pod's name: the random
// five of a ReplicaSet's or DaemonSet's pod, then the ReplicaSet's hash
// (web-7d4b9cf5d8-x2x9z: web). A StatefulSet's ordinal is kept: its pods
// are each their own (db-0).
func podNamePrefix(pod string) string {
	parts := strings.Split(pod, "-")
	if len(parts) > 1 && len(parts[len(parts)-1]) == 5 && isLowerAlnum(parts[len(parts)-1]) {
		parts = parts[:len(parts)-1]
		if last := parts[len(parts)-1]; len(parts) > 1 && len(last) >= 8 && len(last) <= 10 && isLowerAlnum(last) && strings.ContainsAny(last, "0123456789") {
			parts = parts[:len(parts)-1]
		}
	}
	return strings.Join(parts, "-")
}

func isLowerAlnum(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// dropReason is Hubble's name of a drop's reason (POLICY_DENIED).
func dropReason(f *flowpb.Flow) string {
	if d := f.GetDropReasonDesc(); d != flowpb.DropReason_DROP_REASON_UNKNOWN {
		return d.String()
	}
	return "unknown"
}

func policyName(p *flowpb.Policy) string {
	name := p.GetName()
	if p.GetNamespace() != "" {
		name = p.GetNamespace() + "/" + name
	}
	if p.GetKind() != "" {
		name += " (" + p.GetKind() + ")"
	}
	return name
}

// destPort is a flow's destination protocol and port (TCP/80), or its
// protocol alone (ICMPv4).
func destPort(f *flowpb.Flow) string {
	l4 := f.GetL4()
	switch {
	case l4.GetTCP() != nil:
		return fmt.Sprintf("TCP/%d", l4.GetTCP().GetDestinationPort())
	case l4.GetUDP() != nil:
		return fmt.Sprintf("UDP/%d", l4.GetUDP().GetDestinationPort())
	case l4.GetSCTP() != nil:
		return fmt.Sprintf("SCTP/%d", l4.GetSCTP().GetDestinationPort())
	case l4.GetICMPv4() != nil:
		return "ICMPv4"
	case l4.GetICMPv6() != nil:
		return "ICMPv6"
	}
	return ""
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// graph is what was gathered, sorted: the same flows, the same map.
func (b *builder) graph() Graph {
	g := b.g
	g.Nodes, g.Edges = []Node{}, []Edge{}
	for _, n := range b.nodes {
		sort.Strings(n.Pods)
		sort.Strings(n.IPs)
		g.Nodes = append(g.Nodes, *n)
	}
	sort.Slice(g.Nodes, func(i, j int) bool { return g.Nodes[i].ID < g.Nodes[j].ID })
	for key, e := range b.edges {
		e.Ports = sortedKeys(b.ports[key])
		e.DeniedBy = sortedKeys(b.deny[key])
		g.Edges = append(g.Edges, *e)
	}
	sort.Slice(g.Edges, func(i, j int) bool {
		if g.Edges[i].From != g.Edges[j].From {
			return g.Edges[i].From < g.Edges[j].From
		}
		return g.Edges[i].To < g.Edges[j].To
	})
	return g
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Reasons is an edge's drop reasons as a line: POLICY_DENIED ×3, ...
func (e Edge) Reasons() string {
	var parts []string
	for _, r := range sortedKeys(boolKeys(e.DropReasons)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", r, e.DropReasons[r]))
	}
	return strings.Join(parts, ", ")
}

func boolKeys(m map[string]int) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
