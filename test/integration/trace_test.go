package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/trace"
)

// traceOn runs `netcube trace -o json` on a node (in its network
// namespace, as an operator on it would).
func traceOn(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, src, dst string) trace.Result {
	t.Helper()
	out, err := sb.Output(node.Name, filepath.Join(binDir, "netcube"), "trace", "-o", "json",
		"--socket", sb.Topology.APISocket(node), "--bpf-root", node.PinDir, src, dst)
	if err != nil {
		t.Fatalf("netcube trace %s %s on %s: %v\n%s", src, dst, node.Name, err, out)
	}
	var r trace.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("netcube trace -o json: %v\n%s", err, out)
	}
	return r
}

func traced(r trace.Result, what string) bool {
	for _, h := range append(r.Way.Hops, replyHops(r)...) {
		for _, e := range h.Events {
			if e.Trace == what || e.Drop == what {
				return true
			}
		}
	}
	return false
}

func replyHops(r trace.Result) []trace.Hop {
	if r.Reply == nil {
		return nil
	}
	return r.Reply.Hops
}

// TestTraceExplainsRealTraffic: `netcube trace` on a node says what the
// real traffic then shows, for a ClusterIP (a backend picked, the reply
// from the ClusterIP), a Service without endpoints (refused), a NodePort
// with externalTrafficPolicy Local (dropped on a node without a local
// endpoint, delivered on one with), a pod's flow out of the cluster
// (masqueraded to the node's address) and a flow a NetworkPolicy denies
// (dropped, after the same trace without the policy got through), which
// netcube policy get explains with the agent up and down; and
// the node's own conntrack is not written by any trace. Bad input names
// what is wrong.
func TestTraceExplainsRealTraffic(t *testing.T) {
	sb := up(t, false)
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	client := top.ClientPod()
	var onNode2 []sandbox.Pod
	var backends []netip.AddrPort
	for _, p := range top.EchoBackends() {
		backends = append(backends, netip.AddrPortFrom(p.IP4, sandbox.PodPort))
		if p.Node == node2.Name {
			onNode2 = append(onNode2, p)
		}
	}
	if err := top.WriteManifest("local.yaml", externalService("local-node2", "NodePort", "Local",
		[]string{"10.96.0.32", "fd00:10:96::32"}, [2]int{30095, 30096}, nil, nil, onNode2)); err != nil {
		t.Fatal(err)
	}
	nodePort2 := net.JoinHostPort(node2.IP4.String(), "30095")
	testenv.WaitFor(t, 10*time.Second, "the NodePort served", func() bool {
		return fromOutside(t, sb, "tcp", nodePort2, 1, "--timeout", "200ms")[0].Err == ""
	})
	pod := "default/" + client.Name
	// Real flows that stay in conntrack (UDP: until they time out), the
	// control of the check at the end.
	if res := requests(t, sb, "udp", net.JoinHostPort("10.96.0.10", fmt.Sprint(sandbox.PodPort)), 1)[0]; res.Err != "" {
		t.Fatal(res.Err)
	}
	if res := fromOutside(t, sb, "udp", net.JoinHostPort(node2.IP4.String(), "30096"), 1)[0]; res.Err != "" {
		t.Fatal(res.Err)
	}

	t.Run("ClusterIP", func(t *testing.T) {
		r := traceOn(t, sb, node1, pod, "10.96.0.10:80")
		if !slices.Contains(backends, r.Way.Delivered) || !traced(r, "service-backend") {
			t.Errorf("trace: %+v, want a backend of %v picked", r.Way, backends)
		}
		if r.Reply == nil || r.Reply.Delivered != netip.AddrPortFrom(client.IP4, 40000) ||
			r.Reply.Hops[len(r.Reply.Hops)-1].Out.Src != netip.MustParseAddrPort("10.96.0.10:80") {
			t.Errorf("reply: %+v, want delivered to the client from 10.96.0.10:80", r.Reply)
		}
		for _, res := range requests(t, sb, "tcp", "10.96.0.10:80", 3) {
			if res.Err != "" {
				t.Errorf("real traffic: %s", res.Err)
			}
		}
	})
	t.Run("no endpoints", func(t *testing.T) {
		r := traceOn(t, sb, node1, pod, "10.96.0.20:80")
		if !r.Way.Refused || r.Reply != nil {
			t.Errorf("trace: %+v, want refused", r.Way)
		}
		refusedFast(t, requests(t, sb, "tcp", "10.96.0.20:80", 1)[0])
	})
	t.Run("NodePort Local", func(t *testing.T) {
		ext := top.External.IP4.String()
		// The node with a local endpoint first (the positive control).
		r := traceOn(t, sb, node2, ext, nodePort2)
		local := false
		for _, p := range onNode2 {
			local = local || r.Way.Delivered == netip.AddrPortFrom(p.IP4, sandbox.PodPort)
		}
		if !local || r.Way.Hops[0].Program != "from_net" {
			t.Errorf("trace on %s: %+v, want delivered to a pod of it by from_net", node2.Name, r.Way)
		}
		if res := fromOutside(t, sb, "tcp", nodePort2, 1)[0]; res.Err != "" {
			t.Errorf("real traffic to %s's NodePort: %s", node2.Name, res.Err)
		}
		r = traceOn(t, sb, node1, ext, net.JoinHostPort(node1.IP4.String(), "30095"))
		if r.Way.Dropped != "no-local-endpoint" {
			t.Errorf("trace on %s (no local endpoint): %+v, want dropped: no-local-endpoint", node1.Name, r.Way)
		}
		if res := fromOutside(t, sb, "tcp", net.JoinHostPort(node1.IP4.String(), "30095"), 1, "--timeout", "300ms")[0]; res.Err == "" {
			t.Errorf("real traffic to %s's NodePort answered by %s", node1.Name, res.Backend)
		}
	})
	t.Run("masquerade", func(t *testing.T) {
		outside, err := sb.StartOutsideServer()
		if err != nil {
			t.Fatal(err)
		}
		r := traceOn(t, sb, node1, pod, outside[0])
		masq := false
		for _, e := range r.Way.Hops[0].Events {
			masq = masq || (e.Trace == "masquerade" && e.To.Addr() == node1.IP4)
		}
		if !masq {
			t.Errorf("trace: %+v, want masqueraded to %s", r.Way, node1.IP4)
		}
		if res := requests(t, sb, "tcp", outside[0], 1)[0]; res.Err != "" || res.Peer != node1.IP4.String() {
			t.Errorf("real traffic: %+v, want answered, seen from %s", res, node1.IP4)
		}
	})
	t.Run("policy denied", func(t *testing.T) {
		echo := onNode2[0]
		dst := net.JoinHostPort(echo.IP4.String(), fmt.Sprint(sandbox.PodPort))
		if r := traceOn(t, sb, node2, client.IP4.String(), dst); r.Way.Delivered != netip.MustParseAddrPort(dst) {
			t.Fatalf("before the policy: %+v, want delivered (the positive control)", r.Way)
		}
		if err := top.WriteManifest("policy.yaml", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{port: 9999}]
`); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 10*time.Second, "the policy enforced", func() bool {
			return requests(t, sb, "tcp", dst, 1, "--timeout", "300ms")[0].Err != ""
		})
		r := traceOn(t, sb, node2, client.IP4.String(), dst)
		if r.Way.Dropped != "policy-denied-ingress" || r.Reply != nil {
			t.Errorf("trace: %+v, want dropped: policy-denied-ingress", r.Way)
		}

		// netcube policy get: the echo pod is isolated for ingress, and
		// its one rule lets the client's identity in on TCP 9999 only;
		// with the agent down, by address, the same.
		get := func(who string) policy.Applied {
			t.Helper()
			out, err := sb.Output(node2.Name, filepath.Join(binDir, "netcube"), "policy", "get", "-o", "json",
				"--socket", top.APISocket(node2), "--bpf-root", node2.PinDir, who)
			if err != nil {
				t.Fatalf("netcube policy get %s: %v", who, err)
			}
			var as []policy.Applied
			if err := json.Unmarshal(out, &as); err != nil || len(as) == 0 {
				t.Fatalf("netcube policy get -o json: %v\n%s", err, out)
			}
			return as[0]
		}
		check := func(a policy.Applied) {
			t.Helper()
			if !a.Selected || !a.IsolatedIngress || a.IsolatedEgress || len(a.Rules) != 1 {
				t.Fatalf("policy of %s: %+v, want isolated for ingress with one rule", echo.Name, a)
			}
			rule := a.Rules[0]
			if rule.Direction != "ingress" || rule.Proto != "TCP" || rule.PortFrom != 9999 || rule.PortTo != 9999 ||
				!slices.Contains(a.Peers[rule.Peer], netip.PrefixFrom(client.IP4, 32)) {
				t.Errorf("rule %+v (peers %v), want ingress TCP 9999 from the identity of %s", rule, a.Peers, client.IP4)
			}
		}
		check(get("default/" + echo.Name))
		if err := sb.StopAgent(node2.Name, false); err != nil {
			t.Fatal(err)
		}
		check(get(echo.IP4.String()))
		if err := sb.StartAgent(node2.Name); err != nil {
			t.Fatal(err)
		}
		if a := get(client.IP4.String()); a.Selected {
			t.Errorf("policy of the client (not of this node, selected by none): %+v", a)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct{ src, dst, want string }{
			{"default/ghost", "10.96.0.10:80", `no pod "default/ghost"`},
			{pod, "10.96.0.10:99999", "port 99999 is out of range"},
			{"10.0.0.256", "10.96.0.10:80", `"10.0.0.256" is not ADDR:PORT`},
		} {
			out, err := sb.Output(node1.Name, filepath.Join(binDir, "netcube"), "trace",
				"--socket", top.APISocket(node1), "--bpf-root", node1.PinDir, c.src, c.dst)
			if err == nil || !strings.Contains(string(out)+err.Error(), c.want) { // stderr is in err
				t.Errorf("netcube trace %s %s: %v, %s; want an error with %q", c.src, c.dst, err, out, c.want)
			}
		}
	})
	// Every trace ran on a copy: the nodes' conntrack holds the real
	// flows only, none of the traces' (their client port, 40000), while
	// the real traffic's flows are there (the control: the UDP flows sent
	// first, which outlive their one request).
	for _, n := range []sandbox.Node{node1, node2} {
		maps, closeMaps, err := datapath.OpenPinned(n.PinDir)
		if err != nil {
			t.Fatal(err)
		}
		traces, real := 0, 0
		var k datapath.CTKey
		var v datapath.CTEntry
		for it := maps.Map(ct.MapFlows).Iterate(); it.Next(&k, &v); {
			if k.Sport == datapath.Port(40000) || k.Dport == datapath.Port(40000) {
				traces++
			} else {
				real++
			}
		}
		closeMaps()
		if traces != 0 || real == 0 {
			t.Errorf("%s's conntrack: %d entries of the traces' flows (want 0), %d of real ones (want some)", n.Name, traces, real)
		}
	}
}
