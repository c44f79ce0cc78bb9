package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

// externalService renders a dual-stack Service reached from outside: its
// type, externalTrafficPolicy, NodePorts (TCP http, UDP udp), external IPs
// and load-balancer IPs, with EndpointSlices of the given pods.
func externalService(name, typ, policy string, clusterIPs []string, nodePorts [2]int, externalIPs, lbIPs []string, pods []sandbox.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n", name)
	fmt.Fprintf(&b, "  type: %s\n  externalTrafficPolicy: %s\n  ipFamilyPolicy: RequireDualStack\n", typ, policy)
	if typ == "LoadBalancer" && policy == "Local" {
		fmt.Fprintf(&b, "  healthCheckNodePort: %d\n", nodePorts[0]+1000)
	}
	fmt.Fprintf(&b, "  clusterIP: %s\n  clusterIPs: [%s]\n", clusterIPs[0], strings.Join(clusterIPs, ", "))
	if len(externalIPs) > 0 {
		fmt.Fprintf(&b, "  externalIPs: [%s]\n", strings.Join(externalIPs, ", "))
	}
	fmt.Fprintf(&b, "  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: %d}\n", nodePorts[0])
	fmt.Fprintf(&b, "  - {name: udp, port: %d, protocol: UDP, targetPort: %d, nodePort: %d}\n", sandbox.PodPort, sandbox.PodPort, nodePorts[1])
	if len(lbIPs) > 0 {
		b.WriteString("status:\n  loadBalancer:\n    ingress:\n")
		for _, ip := range lbIPs {
			fmt.Fprintf(&b, "    - ip: %s\n", ip)
		}
	}
	return b.String() + "---\n" +
		sandbox.SliceYAML(name, false, sandbox.EndpointPorts, pods) + "---\n" +
		sandbox.SliceYAML(name, true, sandbox.EndpointPorts, pods)
}

// withSourceRanges adds loadBalancerSourceRanges to a rendered Service.
func withSourceRanges(manifest string, ranges ...string) string {
	return strings.Replace(manifest, "  ports:\n", "  loadBalancerSourceRanges: ["+strings.Join(ranges, ", ")+"]\n  ports:\n", 1)
}

// fromOutside sends count requests from the client outside the cluster.
func fromOutside(t *testing.T, sb *sandbox.Sandbox, proto, addr string, count int, extra ...string) []traffic.Result {
	t.Helper()
	return requestsFrom(t, sb, sb.Topology.External.Name, proto, addr, count, extra...)
}

func podNames(pods []sandbox.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// answeredBy asserts that every request was answered, by exactly the pods
// want, each seeing the client as peer.
func answeredBy(t *testing.T, rs []traffic.Result, want []string, peer netip.Addr) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range rs {
		if r.Err != "" {
			t.Fatalf("request %d failed: %s", r.Seq, r.Err)
		}
		seen[r.Backend]++
		if peer.IsValid() && r.Peer != peer.String() {
			t.Fatalf("backend %s saw the client as %s, want %s", r.Backend, r.Peer, peer)
		}
	}
	var got []string
	for b := range seen {
		got = append(got, b)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("answered by %v (%v), want %v", got, seen, want)
	}
}

// answeredByCluster is answeredBy for externalTrafficPolicy Cluster
// through node: an endpoint on node itself (one of local) sees the client
// (no SNAT, so that its ingress policy judges the client), any other sees
// node's address.
func answeredByCluster(t *testing.T, rs []traffic.Result, want, local []string, node, client netip.Addr) {
	t.Helper()
	for _, r := range rs {
		peer := node
		if slices.Contains(local, r.Backend) {
			peer = client
		}
		if r.Err == "" && r.Peer != peer.String() {
			t.Fatalf("backend %s saw the client as %s, want %s", r.Backend, r.Peer, peer)
		}
	}
	answeredBy(t, rs, want, netip.Addr{})
}

// TestExternalAccess: a client outside the cluster (on the nodes' network,
// not a node) reaches Services through any node: NodePorts on every node
// address, ExternalIPs and LoadBalancer IPs routed to a node, TCP and UDP,
// IPv4 and IPv6. With externalTrafficPolicy Cluster every endpoint serves and
// sees the node's address (SNAT); with Local only the node's own endpoints
// serve, and see the client's address (as an endpoint on the receiving
// node does with Cluster); a node without one drops (the client
// times out rather than being refused: a load balancer's health check moves
// it elsewhere). Pods reach NodePorts too.
func TestExternalAccess(t *testing.T) {
	sb := up(t, false)
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	all := top.EchoBackends()
	var onNode1, onNode2 []sandbox.Pod
	for _, p := range all {
		if p.Node == node1.Name {
			onNode1 = append(onNode1, p)
		} else {
			onNode2 = append(onNode2, p)
		}
	}
	manifests := externalService("public", "LoadBalancer", "Cluster", []string{"10.96.0.30", "fd00:10:96::30"}, [2]int{30080, 30081},
		[]string{"192.0.2.10", "2001:db8::10"}, []string{"198.51.100.7", "2001:db8::7"}, all) + "---\n" +
		externalService("local", "LoadBalancer", "Local", []string{"10.96.0.31", "fd00:10:96::31"}, [2]int{30090, 30091}, nil, nil, all) + "---\n" +
		externalService("local-node2", "LoadBalancer", "Local", []string{"10.96.0.32", "fd00:10:96::32"}, [2]int{30095, 30096}, nil, nil, onNode2) + "---\n" +
		externalService("no-endpoints", "LoadBalancer", "Cluster", []string{"10.96.0.33", "fd00:10:96::33"}, [2]int{30097, 30098},
			[]string{"192.0.2.11"}, nil, nil) + "---\n" +
		withSourceRanges(externalService("ranged", "LoadBalancer", "Cluster", []string{"10.96.0.34", "fd00:10:96::34"}, [2]int{30099, 30100},
			nil, []string{"198.51.100.8", "2001:db8::8"}, all), top.External.IP4.String()+"/32", "2001:db8:ffff::/48") + "---\n" +
		withSourceRanges(externalService("walled", "LoadBalancer", "Cluster", []string{"10.96.0.35", "fd00:10:96::35"}, [2]int{30101, 30102},
			nil, []string{"198.51.100.9"}, all), "10.0.0.0/8")
	if err := top.WriteManifest("external.yaml", manifests); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"198.51.100.8/32", "198.51.100.9/32", "2001:db8::8/128", "192.0.2.11/32", "192.0.2.10/32", "198.51.100.7/32", "2001:db8::10/128", "2001:db8::7/128"} {
		if err := top.RouteFromExternal(netip.MustParsePrefix(prefix), node2.Name); err != nil {
			t.Fatal(err)
		}
	}
	// The agents apply the new file within a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := fromOutside(t, sb, "tcp", net.JoinHostPort(node1.IP4.String(), "30080"), 1, "--timeout", "200ms")
		if rs[0].Err == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NodePort not served 10 s after the Service was written: %s", rs[0].Err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	everyone := podNames(all)
	for i, n := range top.Nodes {
		local := podNames([][]sandbox.Pod{onNode1, onNode2}[i])
		for _, ip := range []netip.Addr{n.IP4, n.IP6} {
			client := top.External.IP4
			if ip.Is6() {
				client = top.External.IP6
			}
			for _, c := range []struct{ proto, port string }{{"tcp", "30080"}, {"udp", "30081"}} {
				addr := net.JoinHostPort(ip.String(), c.port)
				t.Run("Cluster NodePort "+c.proto+" "+addr, func(t *testing.T) {
					answeredByCluster(t, fromOutside(t, sb, c.proto, addr, 40), everyone, local, ip, client)
				})
			}
		}
	}
	for _, ip := range []string{"192.0.2.10", "198.51.100.7", "2001:db8::10", "2001:db8::7"} {
		via := node2.IP4
		if strings.Contains(ip, ":") {
			via = node2.IP6
		}
		for _, c := range []struct{ proto, port string }{{"tcp", "80"}, {"udp", strconv.Itoa(sandbox.PodPort)}} {
			addr := net.JoinHostPort(ip, c.port)
			client := top.External.IP4
			if via.Is6() {
				client = top.External.IP6
			}
			t.Run("Cluster external IP "+c.proto+" "+addr, func(t *testing.T) {
				answeredByCluster(t, fromOutside(t, sb, c.proto, addr, 40), everyone, podNames(onNode2), via, client)
			})
		}
	}
	for _, c := range []struct {
		node  sandbox.Node
		local []sandbox.Pod
	}{{node1, onNode1}, {node2, onNode2}} {
		for _, ip := range []netip.Addr{c.node.IP4, c.node.IP6} {
			client := top.External.IP4
			if ip.Is6() {
				client = top.External.IP6
			}
			for _, p := range []struct{ proto, port string }{{"tcp", "30090"}, {"udp", "30091"}} {
				addr := net.JoinHostPort(ip.String(), p.port)
				t.Run("Local NodePort "+p.proto+" "+addr, func(t *testing.T) {
					answeredBy(t, fromOutside(t, sb, p.proto, addr, 20), podNames(c.local), client)
				})
			}
		}
	}
	t.Run("Local NodePort on a node without a local endpoint: dropped, not refused", func(t *testing.T) {
		for _, ip := range []netip.Addr{node1.IP4, node1.IP6} {
			r := fromOutside(t, sb, "tcp", net.JoinHostPort(ip.String(), "30095"), 1, "--timeout", "300ms")[0]
			if !strings.Contains(r.Err, "timeout") {
				t.Errorf("%s: got %+v, want a timeout", ip, r)
			}
		}
		answeredBy(t, fromOutside(t, sb, "tcp", net.JoinHostPort(node2.IP4.String(), "30095"), 20), podNames(onNode2), top.External.IP4)
	})
	t.Run("health-check node ports tell a load balancer which nodes have local endpoints", func(t *testing.T) {
		for _, c := range []struct {
			node sandbox.Node
			port int
			want string // status and localEndpoints
		}{
			{node1, 31090, "200 " + strconv.Itoa(len(onNode1))}, {node2, 31090, "200 " + strconv.Itoa(len(onNode2))},
			{node1, 31095, "503 0"}, {node2, 31095, "200 " + strconv.Itoa(len(onNode2))},
		} {
			url := fmt.Sprintf("http://%s/", net.JoinHostPort(c.node.IP4.String(), strconv.Itoa(c.port)))
			out, err := sb.Output(top.External.Name, "curl", "-s", "-m", "2", "-w", " %{http_code}", url)
			if err != nil {
				t.Fatalf("%s: %v", url, err)
			}
			var body struct{ LocalEndpoints int }
			text := strings.TrimSpace(string(out))
			i := strings.LastIndex(text, " ")
			if err := json.Unmarshal([]byte(text[:i]), &body); err != nil {
				t.Fatalf("%s: %q: %v", url, out, err)
			}
			if got := text[i+1:] + " " + strconv.Itoa(body.LocalEndpoints); got != c.want {
				t.Errorf("%s: %s, want %s", url, got, c.want)
			}
		}
	})
	t.Run("loadBalancerSourceRanges admit only clients within them", func(t *testing.T) {
		answeredByCluster(t, fromOutside(t, sb, "tcp", "198.51.100.8:80", 40), everyone, podNames(onNode2), node2.IP4, top.External.IP4)
		// The v6 ranges do not hold the client: dropped.
		r := fromOutside(t, sb, "tcp", "[2001:db8::8]:80", 1, "--timeout", "300ms")[0]
		if !strings.Contains(r.Err, "timeout") {
			t.Errorf("v6 client outside the ranges: %+v, want a timeout", r)
		}
		// One LoadBalancer IP, walled step by step: first its ranges hold
		// the client (the control), then they do not, then one of them
		// cannot be read (fail closed, though a valid one holds the client).
		walled := func(ranges ...string) string {
			return withSourceRanges(externalService("walled", "LoadBalancer", "Cluster", []string{"10.96.0.35", "fd00:10:96::35"}, [2]int{30101, 30102},
				nil, []string{"198.51.100.9"}, all), ranges...)
		}
		others := strings.SplitN(manifests, "---\n"+walled("10.0.0.0/8"), 2)[0]
		for _, step := range []struct {
			name   string
			ranges []string
			answer bool
		}{
			{"ranges holding the client", []string{top.External.IP4.String() + "/32"}, true},
			{"ranges without the client", []string{"10.0.0.0/8"}, false},
			{"ranges holding the client", []string{top.External.IP4.String() + "/32"}, true},
			{"an unreadable range beside one holding the client", []string{top.External.IP4.String() + "/32", "10.0.0.0/33"}, false},
		} {
			if err := top.WriteManifest("external.yaml", others+"---\n"+walled(step.ranges...)); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 10*time.Second, step.name+" applied", func() bool {
				return (fromOutside(t, sb, "tcp", "198.51.100.9:80", 1, "--timeout", "200ms")[0].Err == "") == step.answer
			})
			if step.answer {
				answeredByCluster(t, fromOutside(t, sb, "tcp", "198.51.100.9:80", 20), everyone, podNames(onNode2), node2.IP4, top.External.IP4)
				continue
			}
			for _, r := range fromOutside(t, sb, "tcp", "198.51.100.9:80", 3, "--timeout", "300ms") {
				if !strings.Contains(r.Err, "timeout") {
					t.Errorf("%s: %+v, want a timeout", step.name, r)
				}
			}
		}
	})
	t.Run("no endpoints: NodePort and external IP refuse at once, TCP and UDP", func(t *testing.T) {
		for _, c := range []struct{ proto, addr string }{
			{"tcp", net.JoinHostPort(node1.IP4.String(), "30097")}, {"udp", net.JoinHostPort(node1.IP4.String(), "30098")},
			{"tcp", net.JoinHostPort(node2.IP6.String(), "30097")}, {"udp", net.JoinHostPort(node2.IP6.String(), "30098")},
			{"tcp", "192.0.2.11:80"}, {"udp", "192.0.2.11:" + strconv.Itoa(sandbox.PodPort)},
		} {
			for _, r := range fromOutside(t, sb, c.proto, c.addr, 2) {
				refusedFast(t, r)
			}
		}
	})
	t.Run("from a pod to another node's NodePort", func(t *testing.T) {
		for _, r := range requests(t, sb, "tcp", net.JoinHostPort(node2.IP4.String(), "30080"), 20) {
			if r.Err != "" {
				t.Fatalf("request %d failed: %s", r.Seq, r.Err)
			}
		}
	})
}

// TestFromNodes: a node's own processes reach Services (ClusterIP, the
// NodePort on its own and on another node's address) through socket-LB,
// and cannot bind a port of the NodePort range, while pods, in their own
// namespaces, can.
func TestFromNodes(t *testing.T) {
	sb := up(t, true)
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	all := top.EchoBackends()
	if err := top.WriteManifest("public.yaml", externalService("public", "NodePort", "Cluster",
		[]string{"10.96.0.30", "fd00:10:96::30"}, [2]int{30080, 30081}, nil, nil, all)); err != nil {
		t.Fatal(err)
	}
	fromNode := func(proto, addr string, count int, extra ...string) []traffic.Result {
		return requestsFrom(t, sb, node1.Name, proto, addr, count, extra...)
	}
	testenv.WaitFor(t, 10*time.Second, "the NodePort Service", func() bool {
		return fromNode("tcp", "10.96.0.30:80", 1, "--timeout", "200ms")[0].Err == ""
	})
	for _, addr := range []string{"10.96.0.30:80", "[fd00:10:96::30]:80",
		net.JoinHostPort(node1.IP4.String(), "30080"), net.JoinHostPort(node2.IP4.String(), "30080"),
		net.JoinHostPort(node2.IP6.String(), "30080")} {
		for _, r := range fromNode("tcp", addr, 10) {
			if r.Err != "" {
				t.Fatalf("from %s to %s: %s", node1.Name, addr, r.Err)
			}
		}
	}
	if r := fromNode("udp", net.JoinHostPort(node2.IP4.String(), "30081"), 5); r[0].Err != "" {
		t.Fatalf("from %s, UDP NodePort: %s", node1.Name, r[0].Err)
	}

	serve := func(where string, port int) error {
		cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), "pod", "serve", "--name", "squatter", "--port", strconv.Itoa(port))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := sb.Start(where, cmd); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return fmt.Errorf("%v: %s", err, stderr.String())
		case <-time.After(300 * time.Millisecond): // serving
			_ = cmd.Process.Kill()
			<-done
			return nil
		}
	}
	if err := serve(node1.Name, 30085); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("a node process bound NodePort-range port 30085: %v", err)
	}
	if err := serve(node1.Name, 8089); err != nil {
		t.Errorf("a node process could not bind 8089, outside the range: %v", err)
	}
	if err := serve(top.ClientPod().Name, 30085); err != nil {
		t.Errorf("a pod could not bind 30085 in its own namespace: %v", err)
	}
}
