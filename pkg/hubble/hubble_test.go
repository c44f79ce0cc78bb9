package hubble

import (
	"context"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
	"github.com/netcube/netcube/pkg/model"
)

// TestEveryDropReasonHasAHubbleReason: a reason netcube adds without one
// would reach Hubble clients as DROP_REASON_UNKNOWN.
func TestEveryDropReasonHasAHubbleReason(t *testing.T) {
	for _, d := range events.DropReasons() {
		if r := events.DropReason(d); dropReasons[r.Name] == flowpb.DropReason_DROP_REASON_UNKNOWN {
			t.Errorf("drop reason %s has no Hubble drop reason", r.Name)
		}
	}
}

type fakeNames struct{}

var (
	client = netip.MustParseAddrPort("10.244.1.11:40000")
	echo   = netip.MustParseAddrPort("10.244.2.21:8080")
	vip    = netip.MustParseAddrPort("10.96.0.10:80")
)

func (fakeNames) PodAt(a netip.Addr) (model.PodID, map[string]string, bool) {
	switch a {
	case client.Addr():
		return model.PodID{Namespace: "default", Name: "client-1"}, map[string]string{"app": "client"}, true
	case echo.Addr():
		return model.PodID{Namespace: "web", Name: "echo-7"}, map[string]string{"app": "echo"}, true
	}
	return model.PodID{}, nil, false
}

func (fakeNames) ServiceAt(fe model.Frontend) (model.ServiceID, bool) {
	if fe.Addr == vip.Addr() && fe.Port == vip.Port() {
		return model.ServiceID{Namespace: "web", Name: "echo"}, true
	}
	return model.ServiceID{}, false
}

func (fakeNames) ServiceByRevNAT(id uint32) (model.ServiceID, bool) {
	return model.ServiceID{Namespace: "web", Name: "echo"}, id == 1
}

func names() *cube.Names {
	n := &cube.Names{}
	n.Add(fakeNames{}, fakeNames{}, nil)
	return n
}

var (
	policyDrop = events.Event{Time: time.Unix(100, 0), Type: "drop", Cube: "policy", Point: "to-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: echo, TCPFlags: "SYN", Drop: "policy-denied-ingress",
		Policy: &events.PolicyVerdict{Direction: "ingress", Endpoint: 3, Peer: 257}}
	noEndpoints = events.Event{Time: time.Unix(101, 0), Type: "drop", Cube: "lb", Point: "from-pod", Family: 4, Proto: "UDP",
		Src: client, Dst: vip, Drop: "no-endpoints"}
	translated = events.Event{Time: time.Unix(102, 0), Type: "trace", Cube: "lb", Point: "from-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: vip, TCPFlags: "SYN", Trace: "service-backend", To: echo, ServiceID: 1}
)

// TestFlowsAsHubbleSeesThem: each kind of event becomes the flow Hubble
// would show: verdict, drop reason, event type, pods, Service, direction.
func TestFlowsAsHubbleSeesThem(t *testing.T) {
	f := toFlow(policyDrop, "node2", names())
	if f.Verdict != flowpb.Verdict_DROPPED || f.DropReasonDesc != flowpb.DropReason_POLICY_DENIED ||
		f.EventType.GetType() != eventDrop || f.EventType.GetSubType() != int32(flowpb.DropReason_POLICY_DENIED) ||
		f.TrafficDirection != flowpb.TrafficDirection_INGRESS || f.TraceObservationPoint != flowpb.TraceObservationPoint_TO_ENDPOINT {
		t.Errorf("policy drop: %v", f)
	}
	if f.Source.GetPodName() != "client-1" || f.Destination.GetNamespace() != "web" || f.Destination.GetID() != 3 || f.Source.GetIdentity() != 257 ||
		!strings.Contains(strings.Join(f.Destination.GetLabels(), " "), "k8s:app=echo") {
		t.Errorf("policy drop endpoints: %v / %v", f.Source, f.Destination)
	}
	if f.GetL4().GetTCP().GetFlags().GetSYN() != true || f.GetL4().GetTCP().GetDestinationPort() != 8080 || f.GetIsReply().GetValue() {
		t.Errorf("policy drop L4: %v", f.L4)
	}
	f = toFlow(noEndpoints, "node1", names())
	if f.DropReasonDesc != flowpb.DropReason_SERVICE_BACKEND_NOT_FOUND || f.DestinationService.GetName() != "echo" ||
		f.TrafficDirection != flowpb.TrafficDirection_EGRESS || f.GetL4().GetUDP() == nil {
		t.Errorf("no endpoints: %v", f)
	}
	// The policies behind a verdict, as --print-policy-names reads them.
	drop := policyDrop
	drop.Policy = &events.PolicyVerdict{Direction: "ingress", Endpoint: 3, Peer: 257, Policies: []string{"web/echo"}}
	allowed := drop
	allowed.Type, allowed.Drop, allowed.Trace = "trace", "", "policy-allowed"
	allowed.Policy = &events.PolicyVerdict{Direction: "egress", Endpoint: 4, Peer: 258, Rule: "peer-port", Policies: []string{"web/a", "web/b"}}
	policyNames := func(ps []*flowpb.Policy) (out []string) {
		for _, p := range ps {
			out = append(out, p.GetNamespace()+"/"+p.GetName()+" "+p.GetKind())
		}
		return out
	}
	if f := toFlow(drop, "node2", names()); !slices.Equal(policyNames(f.IngressDeniedBy), []string{"web/echo NetworkPolicy"}) ||
		f.IngressAllowedBy != nil || f.EgressDeniedBy != nil {
		t.Errorf("policy drop's policies: %v", f)
	}
	if f := toFlow(allowed, "node2", names()); !slices.Equal(policyNames(f.EgressAllowedBy), []string{"web/a NetworkPolicy", "web/b NetworkPolicy"}) ||
		f.Verdict != flowpb.Verdict_FORWARDED || f.EventType.GetType() != eventPolicyVerdict || f.IngressAllowedBy != nil {
		t.Errorf("policy verdict's policies: %v", f)
	}
	f = toFlow(translated, "node1", names())
	if f.Verdict != flowpb.Verdict_TRANSLATED || f.EventType.GetType() != eventTrace || f.DestinationService.GetNamespace() != "web" ||
		!strings.Contains(f.Summary, "10.244.2.21:8080") {
		t.Errorf("translation: %v", f)
	}
}

// TestFilters: Hubble's filters as its CLI sends them select the flows
// they name, and no others.
func TestFilters(t *testing.T) {
	flows := map[string]*flowpb.Flow{
		"policy": toFlow(policyDrop, "node2", names()),
		"noeps":  toFlow(noEndpoints, "node1", names()),
		"xlate":  toFlow(translated, "node1", names()),
	}
	cases := []struct {
		name   string
		filter *flowpb.FlowFilter
		want   []string
	}{
		{"no filter", &flowpb.FlowFilter{}, []string{"noeps", "policy", "xlate"}},
		{"--verdict DROPPED", &flowpb.FlowFilter{Verdict: []flowpb.Verdict{flowpb.Verdict_DROPPED}}, []string{"noeps", "policy"}},
		{"--pod web/echo (destination)", &flowpb.FlowFilter{DestinationPod: []string{"web/echo"}}, []string{"policy"}},
		{"--pod client (bare: default namespace)", &flowpb.FlowFilter{SourcePod: []string{"client"}}, []string{"noeps", "policy", "xlate"}},
		{"--namespace web (destination)", &flowpb.FlowFilter{DestinationPod: []string{"web/"}}, []string{"policy"}},
		{"--to-service web/echo", &flowpb.FlowFilter{DestinationService: []string{"web/echo"}}, []string{"noeps", "xlate"}},
		{"--protocol udp", &flowpb.FlowFilter{Protocol: []string{"udp"}}, []string{"noeps"}},
		{"--drop-reason-desc POLICY_DENIED", &flowpb.FlowFilter{DropReasonDesc: []flowpb.DropReason{flowpb.DropReason_POLICY_DENIED}}, []string{"policy"}},
		{"--to-ip 10.244.2.0/24", &flowpb.FlowFilter{DestinationIp: []string{"10.244.2.0/24"}}, []string{"policy"}},
		{"--to-port 80", &flowpb.FlowFilter{DestinationPort: []string{"80"}}, []string{"noeps", "xlate"}},
		{"--label app=echo (destination)", &flowpb.FlowFilter{DestinationLabel: []string{"k8s:app=echo"}}, []string{"policy"}},
		{"--tcp-flags SYN", &flowpb.FlowFilter{TcpFlags: []*flowpb.TCPFlags{{SYN: true}}}, []string{"policy", "xlate"}},
		{"--type drop", &flowpb.FlowFilter{EventType: []*flowpb.EventTypeFilter{{Type: eventDrop}}}, []string{"noeps", "policy"}},
		{"--traffic-direction ingress", &flowpb.FlowFilter{TrafficDirection: []flowpb.TrafficDirection{flowpb.TrafficDirection_INGRESS}}, []string{"policy"}},
		{"--node-name node2", &flowpb.FlowFilter{NodeName: []string{"node2"}}, []string{"policy"}},
	}
	for _, c := range cases {
		fs, err := compile([]*flowpb.FlowFilter{c.filter})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, k := range []string{"noeps", "policy", "xlate"} {
			if fs.any(flows[k]) {
				got = append(got, k)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: matched %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := compile([]*flowpb.FlowFilter{{Protocol: []string{"http"}}}); err == nil {
		t.Error("--protocol http compiled: netcube sees no HTTP")
	}
	if _, err := compile([]*flowpb.FlowFilter{{SourceIp: []string{"10.0.0.300"}}}); err == nil || !strings.Contains(err.Error(), "10.0.0.300") {
		t.Errorf("a bad IP filter: %v", err)
	}
}

// serve starts a server over a hub on a unix socket and returns a client.
func serve(t *testing.T, hub *events.Hub, lost func() uint64) observerpb.ObserverClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	socket := filepath.Join(t.TempDir(), "hubble.sock")
	if err := New(Config{Node: "node1", Hub: hub, Names: names(), DatapathLost: lost}).Serve(ctx, socket, TCP{}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return observerpb.NewObserverClient(conn)
}

func collect(t *testing.T, c observerpb.ObserverClient, req *observerpb.GetFlowsRequest) ([]*observerpb.GetFlowsResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.GetFlows(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*observerpb.GetFlowsResponse
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

// TestGetFlows: the last N flows its filters match, then (follow) new
// ones; a filter field the server does not know is refused, not ignored;
// ServerStatus counts what was seen.
func TestGetFlows(t *testing.T) {
	hub := events.NewHub()
	c := serve(t, hub, nil)
	for hub.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	for _, e := range []events.Event{policyDrop, noEndpoints, translated} {
		hub.Publish(e)
	}
	waitSeen(t, c, 3)
	got, err := collect(t, c, &observerpb.GetFlowsRequest{Number: 20, Whitelist: []*flowpb.FlowFilter{{Verdict: []flowpb.Verdict{flowpb.Verdict_DROPPED}}}})
	if err != nil || len(got) != 2 || got[0].GetFlow().GetDropReasonDesc() != flowpb.DropReason_POLICY_DENIED || got[0].NodeName != "node1" {
		t.Fatalf("last drops: %v, %v", got, err)
	}
	got, _ = collect(t, c, &observerpb.GetFlowsRequest{Number: 1})
	if len(got) != 1 || got[0].GetFlow().GetVerdict() != flowpb.Verdict_TRANSLATED {
		t.Errorf("--last 1: %v", got)
	}
	got, _ = collect(t, c, &observerpb.GetFlowsRequest{Number: 20, Blacklist: []*flowpb.FlowFilter{{Protocol: []string{"tcp"}}}})
	if len(got) != 1 || got[0].GetFlow().GetL4().GetUDP() == nil {
		t.Errorf("--not --protocol tcp: %v", got)
	}

	// A filter field unknown here (a newer client's): refused.
	ff := &flowpb.FlowFilter{}
	b, _ := proto.Marshal(ff)
	b = protowire.AppendTag(b, 18, protowire.BytesType) // dns_query
	b = protowire.AppendString(b, "example.com")
	if err := proto.Unmarshal(b, ff); err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, c, &observerpb.GetFlowsRequest{Number: 20, Whitelist: []*flowpb.FlowFilter{ff}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "field number 18") {
		t.Errorf("an unknown filter field: %v, want InvalidArgument naming field 18", err)
	}

	// Follow: new flows as they come.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.GetFlows(ctx, &observerpb.GetFlowsRequest{Follow: true, Whitelist: []*flowpb.FlowFilter{{DestinationPod: []string{"web/"}}}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the follower registered
	hub.Publish(noEndpoints)
	hub.Publish(policyDrop)
	r, err := st.Recv()
	if err != nil || r.GetFlow().GetDestination().GetPodName() != "echo-7" {
		t.Fatalf("follow: %v, %v", r, err)
	}
	s, err := c.ServerStatus(context.Background(), &observerpb.ServerStatusRequest{})
	if err != nil || s.SeenFlows != 5 || s.NumFlows != 5 || s.GetNumConnectedNodes().GetValue() != 1 {
		t.Errorf("ServerStatus %v, %v", s, err)
	}
}

// TestLossesAreTold: losses of the datapath's ring buffer reach a
// following client as a LostEvent.
func TestLossesAreTold(t *testing.T) {
	hub := events.NewHub()
	var lost atomic.Uint64
	c := serve(t, hub, lost.Load)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.GetFlows(ctx, &observerpb.GetFlowsRequest{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	lost.Store(7)
	r, err := st.Recv()
	if err != nil || r.GetLostEvents().GetNumEventsLost() != 7 || r.GetLostEvents().GetSource() != flowpb.LostEventSource_PERF_EVENT_RING_BUFFER {
		t.Fatalf("got %v, %v; want 7 lost by the ring buffer", r, err)
	}
	s, err := c.ServerStatus(context.Background(), &observerpb.ServerStatusRequest{})
	if err != nil || s.DatapathLostEvents != 7 || s.ClientLostEvents != 0 {
		t.Errorf("ServerStatus %v, %v; want 7 lost by the datapath, none by a client", s, err)
	}
}

// TestServerStatusCountsClientLosses: a follower with no room loses the
// flow (the others keep it), and ServerStatus counts it.
func TestServerStatusCountsClientLosses(t *testing.T) {
	s := New(Config{Node: "node1"})
	slow, fast := &follower{c: make(chan events.Event, 1)}, &follower{c: make(chan events.Event, 2)}
	s.followers[slow], s.followers[fast] = struct{}{}, struct{}{}
	s.add(events.Event{Type: "drop"})
	if st, _ := s.ServerStatus(context.Background(), nil); st.ClientLostEvents != 0 {
		t.Fatalf("a flow both had room for: %d lost", st.ClientLostEvents)
	}
	s.add(events.Event{Type: "drop"})
	st, _ := s.ServerStatus(context.Background(), nil)
	if st.ClientLostEvents != 1 || slow.lost != 1 || fast.lost != 0 || st.SeenFlows != 2 {
		t.Errorf("lost %d (slow %d, fast %d), seen %d; want 1 (slow 1, fast 0), 2", st.ClientLostEvents, slow.lost, fast.lost, st.SeenFlows)
	}
}

func waitSeen(t *testing.T, c observerpb.ObserverClient, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := c.ServerStatus(context.Background(), &observerpb.ServerStatusRequest{})
		if err == nil && s.SeenFlows >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server saw %v flows (%v), want %d", s.GetSeenFlows(), err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
