package flows

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/netcube/netcube/pkg/hubble/flowpb"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// pod is a flow endpoint of a pod with the app label (none: "").
func pod(ns, name, app string) *flowpb.Endpoint {
	ep := &flowpb.Endpoint{Namespace: ns, PodName: name, Labels: []string{"k8s:io.kubernetes.pod.namespace=" + ns}}
	if app != "" {
		ep.Labels = append(ep.Labels, "k8s:app="+app)
	}
	return ep
}

type flowOpt func(*flowpb.Flow)

func toService(ns, name string) flowOpt {
	return func(f *flowpb.Flow) { f.DestinationService = &flowpb.Service{Namespace: ns, Name: name} }
}
func dropped(r flowpb.DropReason, denied ...*flowpb.Policy) flowOpt {
	return func(f *flowpb.Flow) {
		f.Verdict, f.DropReasonDesc, f.IngressDeniedBy = flowpb.Verdict_DROPPED, r, denied
	}
}
func verdict(v flowpb.Verdict) flowOpt { return func(f *flowpb.Flow) { f.Verdict = v } }
func reply() flowOpt                   { return func(f *flowpb.Flow) { f.IsReply = wrapperspb.Bool(true) } }
func tcp(port uint32) flowOpt {
	return func(f *flowpb.Flow) {
		f.L4 = &flowpb.Layer4{Protocol: &flowpb.Layer4_TCP{TCP: &flowpb.TCP{DestinationPort: port}}}
	}
}

func flow(src, dst *flowpb.Endpoint, srcIP, dstIP string, opts ...flowOpt) *observerpb.GetFlowsResponse {
	f := &flowpb.Flow{Source: src, Destination: dst, Verdict: flowpb.Verdict_FORWARDED, IP: &flowpb.IP{Source: srcIP, Destination: dstIP}}
	for _, o := range opts {
		o(f)
	}
	return &observerpb.GetFlowsResponse{ResponseTypes: &observerpb.GetFlowsResponse_Flow{Flow: f}}
}

func lost(n uint64) *observerpb.GetFlowsResponse {
	return &observerpb.GetFlowsResponse{ResponseTypes: &observerpb.GetFlowsResponse_LostEvents{LostEvents: &flowpb.LostEvent{NumEventsLost: n}}}
}

func TestBuild(t *testing.T) {
	client := pod("default", "client-7d4b9cf5d8-x2x9z", "client")
	client2 := pod("default", "client-7d4b9cf5d8-abcde", "client")
	echo := pod("default", "echo-0", "echo")
	web := pod("shop", "web-5f6d8c9b7a-qwert", "") // no app label: by its name's prefix
	outside := &flowpb.Endpoint{}
	denied := &flowpb.Policy{Namespace: "default", Name: "echo", Kind: "NetworkPolicy"}
	for _, tc := range []struct {
		name  string
		in    []*observerpb.GetFlowsResponse
		group Grouping
		nodes []string
		edges []Edge
		flows int
		lost  uint64
	}{{
		name: "forwarded to a Service, by two pods of one workload",
		in: []*observerpb.GetFlowsResponse{
			flow(client, echo, "10.244.1.2", "10.96.0.10", toService("default", "echo"), tcp(80), verdict(flowpb.Verdict_TRANSLATED)),
			flow(client2, echo, "10.244.1.3", "10.96.0.10", toService("default", "echo"), tcp(80)),
		},
		group: Grouping{Label: "app"},
		nodes: []string{"service:default/echo", "workload:default/client"},
		edges: []Edge{{From: "workload:default/client", To: "service:default/echo", Forwarded: 2, Ports: []string{"TCP/80"}}},
		flows: 2,
	}, {
		name: "to a pod without a Service; dropped by policy, reasons aggregated",
		in: []*observerpb.GetFlowsResponse{
			flow(client, echo, "10.244.1.2", "10.244.2.5", tcp(8080)),
			flow(client, echo, "10.244.1.2", "10.244.2.5", tcp(8080), dropped(flowpb.DropReason_POLICY_DENIED, denied)),
			flow(client, echo, "10.244.1.2", "10.244.2.5", tcp(8080), dropped(flowpb.DropReason_POLICY_DENIED, denied)),
			flow(client, echo, "10.244.1.2", "10.244.2.5", tcp(9090), dropped(flowpb.DropReason_CT_MAP_INSERTION_FAILED)),
		},
		group: Grouping{Label: "app"},
		nodes: []string{"workload:default/client", "workload:default/echo"},
		edges: []Edge{{From: "workload:default/client", To: "workload:default/echo", Forwarded: 1, Dropped: 3,
			DropReasons: map[string]int{"POLICY_DENIED": 2, "CT_MAP_INSERTION_FAILED": 1},
			DeniedBy:    []string{"default/echo (NetworkPolicy)"}, Ports: []string{"TCP/8080", "TCP/9090"}}},
		flows: 4,
	}, {
		name: "the world outside, to a Service and from a pod; a reply is not an edge",
		in: []*observerpb.GetFlowsResponse{
			flow(outside, web, "198.18.0.1", "10.96.0.44", toService("shop", "web"), dropped(flowpb.DropReason_SERVICE_BACKEND_NOT_FOUND)),
			flow(web, outside, "10.244.3.4", "1.1.1.1", tcp(443)),
			flow(outside, web, "1.1.1.1", "10.244.3.4", reply()),
			lost(7),
		},
		group: Grouping{Label: "app"},
		nodes: []string{"service:shop/web", "workload:shop/web", "world"},
		edges: []Edge{
			{From: "workload:shop/web", To: "world", Forwarded: 1, Ports: []string{"TCP/443"}},
			{From: "world", To: "service:shop/web", Dropped: 1, DropReasons: map[string]int{"SERVICE_BACKEND_NOT_FOUND": 1}},
		},
		flows: 2, lost: 7,
	}, {
		name: "each pod its own node",
		in: []*observerpb.GetFlowsResponse{
			flow(client, echo, "10.244.1.2", "10.244.2.5"),
			flow(client2, echo, "10.244.1.3", "10.244.2.5"),
		},
		group: Grouping{Label: "pod"},
		nodes: []string{"workload:default/client-7d4b9cf5d8-abcde", "workload:default/client-7d4b9cf5d8-x2x9z", "workload:default/echo-0"},
		edges: []Edge{
			{From: "workload:default/client-7d4b9cf5d8-abcde", To: "workload:default/echo-0", Forwarded: 1},
			{From: "workload:default/client-7d4b9cf5d8-x2x9z", To: "workload:default/echo-0", Forwarded: 1},
		},
		flows: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := Build(tc.in, tc.group)
			var ids []string
			for _, n := range g.Nodes {
				ids = append(ids, n.ID)
			}
			if !reflect.DeepEqual(ids, tc.nodes) {
				t.Errorf("nodes %v, want %v", ids, tc.nodes)
			}
			if !reflect.DeepEqual(g.Edges, tc.edges) {
				t.Errorf("edges\n %+v\nwant\n %+v", g.Edges, tc.edges)
			}
			if g.Flows != tc.flows || g.Lost != tc.lost {
				t.Errorf("flows %d lost %d, want %d and %d", g.Flows, g.Lost, tc.flows, tc.lost)
			}
		})
	}
}

func TestWorkloadNodeNamesItsPods(t *testing.T) {
	g := Build([]*observerpb.GetFlowsResponse{
		flow(pod("default", "client-7d4b9cf5d8-x2x9z", "client"), &flowpb.Endpoint{}, "10.244.1.2", "8.8.8.8"),
		flow(pod("default", "client-7d4b9cf5d8-abcde", "client"), &flowpb.Endpoint{}, "10.244.1.3", "9.9.9.9"),
	}, Grouping{Label: "app"})
	want := []Node{
		{ID: "workload:default/client", Kind: KindWorkload, Name: "default/client", Pods: []string{"default/client-7d4b9cf5d8-abcde", "default/client-7d4b9cf5d8-x2x9z"}},
		{ID: "world", Kind: KindWorld, Name: "world", IPs: []string{"8.8.8.8", "9.9.9.9"}},
	}
	if !reflect.DeepEqual(g.Nodes, want) {
		t.Errorf("nodes %+v, want %+v", g.Nodes, want)
	}
}

func TestPodNamePrefix(t *testing.T) {
	for pod, want := range map[string]string{
		"web-7d4b9cf5d8-x2x9z": "web",        // a Deployment's
		"node-agent-x2x9z":     "node-agent", // a DaemonSet's
		"db-0":                 "db-0",       // a StatefulSet's: its own
		"n1p1":                 "n1p1",
		"my-app-server":        "my-app-server",
	} {
		if got := podNamePrefix(pod); got != want {
			t.Errorf("podNamePrefix(%q) = %q, want %q", pod, got, want)
		}
	}
}
