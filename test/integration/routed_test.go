package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/lab/sandbox"
)

// TestRoutedRacksThroughBGP runs the routed sandbox: two racks, each its
// own L2 segment and subnets, joined only by a router running BIRD that
// every node peers with over eBGP (a NetworkBGPPeering per rack). Pods in
// different racks reach each other only through the routes the nodes
// advertised; a node whose agent crashes keeps its routes on the router
// (graceful restart) until it is back.
func TestRoutedRacksThroughBGP(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil {
		t.Fatal("BIRD 2 is not installed: hack/install-deps.sh installs it (Debian: bird2)")
	}
	sb := upWith(t, "rt", sandbox.Config{Routed: true, SocketLB: true})
	top := sb.Topology
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := sb.Birdc("show", "protocols", "all")
			t.Logf("birdc show protocols all:\n%s", out)
			out, _ = sb.Birdc("show", "route", "all")
			t.Logf("birdc show route all:\n%s", out)
			b, _ := os.ReadFile(filepath.Join(top.LogDir(), "bird.log"))
			t.Logf("bird log:\n%s", b)
		}
	})
	node1, node2 := top.Nodes[0], top.Nodes[1]
	if node1.Rack == node2.Rack {
		t.Fatalf("node1 and node2 share rack %d", node1.Rack)
	}

	// The wiring: no shared L2 between the racks.
	for _, n := range top.Nodes {
		k, _ := top.Rack(n.Rack)
		if !k.Net4.Contains(n.IP4) || !k.Net6.Contains(n.IP6) {
			t.Fatalf("%s (%s, %s) is not in rack %s's subnets", n.Name, n.IP4, n.IP6, k.Name)
		}
	}

	// Positive control: every session up, every node's pod CIDRs on the
	// router via exactly that node.
	waitSessions(t, sb, func(n sandbox.Node, st string) bool { return st == "Established" }, "Established")
	wantPodRoutes := func() error {
		r4, err := sb.RouterRoutes(4)
		if err != nil {
			return err
		}
		r6, err := sb.RouterRoutes(6)
		if err != nil {
			return err
		}
		for _, n := range top.Nodes {
			if got := r4[n.PodNet.String()]; !slices.Equal(got, []string{n.IP4.String()}) {
				return fmt.Errorf("%s's %s: next hops %v, want [%s] (routes %v)", n.Name, n.PodNet, got, n.IP4, r4)
			}
			if got := r6[n.PodNet6.String()]; !slices.Equal(got, []string{n.IP6.String()}) {
				return fmt.Errorf("%s's %s: next hops %v, want [%s] (routes %v)", n.Name, n.PodNet6, got, n.IP6, r6)
			}
		}
		return nil
	}
	within(t, 30*time.Second, "the nodes' pod CIDRs in the router's FIB", wantPodRoutes)

	// Pod to pod across the racks, both families, through the router.
	client, server := node1.Pods[0], node2.Pods[0]
	crossRacks := func(what string) {
		t.Helper()
		k2, _ := top.Rack(node2.Rack)
		before := txPackets(t, top.Router.Netns, k2.RouterIf)
		for _, a := range []netip.Addr{server.IP4, server.IP6} {
			addr := net.JoinHostPort(a.String(), strconv.Itoa(sandbox.PodPort))
			for _, r := range requestsFrom(t, sb, client.Name, "tcp", addr, 3) {
				if r.Err != "" || r.Backend != server.Name {
					t.Errorf("%s: %s -> %s: %+v", what, client.Name, addr, r)
				}
			}
		}
		if after := txPackets(t, top.Router.Netns, k2.RouterIf); after-before < 6 {
			t.Errorf("%s: the router sent %d packets into rack %s for 6 requests: not routed through it", what, after-before, k2.Name)
		}
	}
	crossRacks("all agents up")

	// Service addresses: a Cluster policy LoadBalancer's external and
	// LoadBalancer IPs from every node (ECMP on the router), a Local
	// one's only from the node with its endpoints; the external client,
	// on a segment of its own, reaches them through the router alone.
	all := top.EchoBackends()
	var onNode2 []sandbox.Pod
	for _, p := range all {
		if p.Node == node2.Name {
			onNode2 = append(onNode2, p)
		}
	}
	manifests := externalService("public", "LoadBalancer", "Cluster", []string{"10.96.0.30", "fd00:10:96::30"}, [2]int{30080, 30081},
		[]string{"192.0.2.10", "2001:db8::10"}, []string{"198.51.100.7", "2001:db8::7"}, all) + "---\n" +
		externalService("local-node2", "LoadBalancer", "Local", []string{"10.96.0.32", "fd00:10:96::32"}, [2]int{30095, 30096},
			nil, []string{"198.51.100.8", "2001:db8::8"}, onNode2)
	if err := top.WriteManifest("routed-lb.yaml", manifests); err != nil {
		t.Fatal(err)
	}
	var every4, every6 []string
	for _, n := range top.Nodes {
		every4, every6 = append(every4, n.IP4.String()), append(every6, n.IP6.String())
	}
	slices.Sort(every4)
	slices.Sort(every6)
	wantLB := map[string][]string{
		"192.0.2.10/32": every4, "198.51.100.7/32": every4, "2001:db8::10/128": every6, "2001:db8::7/128": every6,
		"198.51.100.8/32": {node2.IP4.String()}, "2001:db8::8/128": {node2.IP6.String()},
	}
	within(t, 30*time.Second, "the Services' addresses in the router's FIB", func() error {
		for _, fam := range []int{4, 6} {
			routes, err := sb.RouterRoutes(fam)
			if err != nil {
				return err
			}
			for p, want := range wantLB {
				if netip.MustParsePrefix(p).Addr().Is4() != (fam == 4) {
					continue
				}
				if got := routes[p]; !slices.Equal(got, want) {
					return fmt.Errorf("%s: next hops %v, want %v", p, got, want)
				}
			}
		}
		return nil
	})
	everyone := podNames(all)
	for _, ip := range []string{"192.0.2.10", "198.51.100.7", "2001:db8::10", "2001:db8::7", "198.51.100.8", "2001:db8::8"} {
		want := everyone
		if strings.HasSuffix(ip, "8") {
			want = podNames(onNode2)
		}
		addr := net.JoinHostPort(ip, "80")
		for _, r := range fromOutside(t, sb, "tcp", addr, 10) {
			if r.Err != "" || !slices.Contains(want, r.Backend) {
				t.Errorf("external -> %s: %+v, want an answer from %v", addr, r, want)
			}
		}
	}

	// Negative: the router learned nothing a node does not own.
	allowed := map[string]bool{}
	for _, n := range top.Nodes {
		allowed[n.PodNet.String()], allowed[n.PodNet6.String()] = true, true
	}
	for _, a := range serviceAddresses(t, top.ManifestDir()) {
		allowed[netip.PrefixFrom(a, a.BitLen()).String()] = true
	}
	for _, fam := range []int{4, 6} {
		routes, err := sb.RouterRoutes(fam)
		if err != nil {
			t.Fatal(err)
		}
		for p, hops := range routes {
			if !allowed[p] {
				t.Errorf("the router learned %s via %v: no node's pod CIDR nor a Service's LoadBalancer or external IP", p, hops)
			}
		}
	}

	// Graceful restart: node2's agent crashes (no NOTIFICATION, the
	// session just ends); the router keeps its routes past the hold
	// time, and the pods stay reachable, as the datapath runs on.
	if err := sb.StopAgent(node2.Name, true); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, sb, func(n sandbox.Node, st string) bool {
		return (n.Name == node2.Name) != (st == "Established")
	}, "node2 down, the rest Established")
	time.Sleep(10 * time.Second) // past the 9 s hold time
	if err := wantPodRoutes(); err != nil {
		t.Errorf("node2's agent down (graceful restart): %v", err)
	}
	crossRacks("node2's agent down")
	if err := sb.StartAgent(node2.Name); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, sb, func(n sandbox.Node, st string) bool { return st == "Established" }, "Established again")
	within(t, 30*time.Second, "the pod CIDRs after node2's restart", wantPodRoutes)
	crossRacks("node2's agent back")

	// Withdrawn when they no longer apply: "public" becomes a ClusterIP
	// Service (no LoadBalancer or external IP), "local-node2" is deleted;
	// the router then routes none of their addresses, while the pod
	// CIDRs stay (positive control).
	clusterOnly := "apiVersion: v1\nkind: Service\nmetadata: {name: public, namespace: default}\nspec:\n" +
		"  type: ClusterIP\n  ipFamilyPolicy: RequireDualStack\n  clusterIP: 10.96.0.30\n  clusterIPs: [10.96.0.30, fd00:10:96::30]\n" +
		"  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: http}\n---\n" +
		sandbox.SliceYAML("public", false, sandbox.EndpointPorts, all) + "---\n" + sandbox.SliceYAML("public", true, sandbox.EndpointPorts, all)
	if err := top.WriteManifest("routed-lb.yaml", clusterOnly); err != nil {
		t.Fatal(err)
	}
	within(t, 30*time.Second, "the Services' addresses withdrawn from the router", func() error {
		for _, fam := range []int{4, 6} {
			routes, err := sb.RouterRoutes(fam)
			if err != nil {
				return err
			}
			for p := range wantLB {
				if hops, ok := routes[p]; ok {
					return fmt.Errorf("%s still routed via %v", p, hops)
				}
			}
		}
		return nil
	})
	if err := wantPodRoutes(); err != nil {
		t.Errorf("after the withdrawals: %v", err)
	}
}

// waitSessions waits up to 30 s until ok holds for every node's BGP
// session state.
func waitSessions(t *testing.T, sb *sandbox.Sandbox, ok func(sandbox.Node, string) bool, what string) {
	t.Helper()
	within(t, 30*time.Second, "BGP sessions "+what, func() error {
		s, err := sb.BGPSessions()
		if err != nil {
			return err
		}
		for _, n := range sb.Topology.Nodes {
			if !ok(n, s[n.Name]) {
				return fmt.Errorf("sessions %v", s)
			}
		}
		return nil
	})
}

func within(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// txPackets is a device's transmitted packets in a namespace.
func txPackets(t *testing.T, netns, dev string) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "-n", netns, "-j", "-s", "link", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("ip -s link %s in %s: %v", dev, netns, err)
	}
	var links []struct {
		Stats struct {
			TX struct {
				Packets uint64 `json:"packets"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s link %s: %v: %s", dev, err, out)
	}
	return links[0].Stats.TX.Packets
}

// serviceAddresses are the Services' external IPs and LoadBalancer
// ingress IPs in the manifest directory: what the nodes may advertise
// besides their pod CIDRs.
func serviceAddresses(t *testing.T, dir string) []netip.Addr {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---")) {
			var svc struct {
				Kind string `json:"kind"`
				Spec struct {
					ExternalIPs []string `json:"externalIPs"`
				} `json:"spec"`
				Status struct {
					LoadBalancer struct {
						Ingress []struct {
							IP string `json:"ip"`
						} `json:"ingress"`
					} `json:"loadBalancer"`
				} `json:"status"`
			}
			if yaml.Unmarshal(doc, &svc) != nil || svc.Kind != "Service" {
				continue
			}
			ips := svc.Spec.ExternalIPs
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			for _, s := range ips {
				if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
					out = append(out, a)
				}
			}
		}
	}
	return out
}
