package integration

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestPodNetwork: pods the CNI plugin wired reach each other on one node
// (handed straight into the destination pod: its host veth never
// transmits) and across nodes, by native routing and through the VXLAN
// overlay, IPv4 and IPv6, TCP and UDP; nodes reach their own and other
// nodes' pods; a Service is balanced to a pod on another node.
func TestPodNetwork(t *testing.T) {
	for _, mode := range []string{"native", "vxlan"} {
		t.Run(mode, func(t *testing.T) {
			sb := upWith(t, "tp"+mode[:1], sandbox.Config{Routing: mode})
			n1, n2 := sb.Topology.Nodes[0], sb.Topology.Nodes[1]
			client, local, remote := n1.Pods[0], n1.Pods[1], n2.Pods[1]

			overlayBefore := linkCounter(t, n1.Netns, "nc_vxlan", "tx_packets")
			for _, c := range []struct {
				from string
				to   sandbox.Pod
			}{
				{client.Name, local}, {client.Name, remote}, // pod -> pod
				{n1.Name, local}, {n1.Name, remote}, // node -> pod
			} {
				for _, addr := range []netip.Addr{c.to.IP4, c.to.IP6} {
					for _, proto := range []string{"tcp", "udp"} {
						target := netip.AddrPortFrom(addr, sandbox.PodPort).String()
						for _, r := range requestsFrom(t, sb, c.from, proto, target, 3, "--timeout", "1s") {
							if r.Err != "" || r.Backend != c.to.Name {
								t.Fatalf("%s -> %s (%s) %s: %+v", c.from, c.to.Name, target, proto, r)
							}
						}
					}
				}
			}
			overlayAfter := linkCounter(t, n1.Netns, "nc_vxlan", "tx_packets")
			if mode == "vxlan" && overlayAfter-overlayBefore < 12 {
				t.Errorf("VXLAN mode: only %d packets left through the overlay", overlayAfter-overlayBefore)
			}
			if mode == "native" && overlayAfter != -1 {
				t.Errorf("native mode has an overlay device")
			}

			// Same node: into the pod directly, both ways; the host-side
			// veths transmit nothing (the kernel's path would: it is how
			// it reaches a pod).
			txBefore := linkCounter(t, n1.Netns, local.HostIf, "tx_packets") + linkCounter(t, n1.Netns, client.HostIf, "tx_packets")
			rxBefore := linkCounter(t, local.Netns, "eth0", "rx_packets")
			rs := requestsFrom(t, sb, client.Name, "tcp", netip.AddrPortFrom(local.IP4, sandbox.PodPort).String(), 30)
			for _, r := range rs {
				if r.Err != "" {
					t.Fatalf("same node: %+v", r)
				}
			}
			tx := linkCounter(t, n1.Netns, local.HostIf, "tx_packets") + linkCounter(t, n1.Netns, client.HostIf, "tx_packets") - txBefore
			rx := linkCounter(t, local.Netns, "eth0", "rx_packets") - rxBefore
			if rx < 90 || tx > 3 {
				t.Errorf("same node, 30 connections: the pod received %d packets, its and the client's host veths transmitted %d (want ≥ 90 and ~0)", rx, tx)
			}

			// Outside the cluster (the external host stands for the
			// internet): masqueraded to the node, the answers back to
			// the pod; the outside sees the node, not the pod.
			outside, err := sb.StartOutsideServer()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				pod  sandbox.Pod
				node sandbox.Node
			}{{client, n1}, {remote, n2}} {
				for _, proto := range []string{"tcp", "udp"} {
					for i, dst := range outside {
						rs := requestsFrom(t, sb, c.pod.Name, proto, dst, 3, "--timeout", "1s")
						want := []netip.Addr{c.node.IP4, c.node.IP6}[i]
						for _, r := range rs {
							if r.Err != "" || r.Peer != want.String() {
								t.Fatalf("%s -> outside %s %s: %+v, want the outside to see %s", c.pod.Name, dst, proto, r, want)
							}
						}
					}
				}
			}

			// A Service: balanced, then routed to the other node too.
			answered := map[string]int{}
			for _, r := range requests(t, sb, "tcp", fmt.Sprintf("%s:80", sandbox.EchoIPs[0]), 30) {
				if r.Err != "" {
					t.Fatalf("Service: %+v", r)
				}
				answered[r.Backend]++
			}
			if answered[n2.Pods[0].Name]+answered[n2.Pods[1].Name] == 0 {
				t.Errorf("Service: no pod of %s answered: %v", n2.Name, answered)
			}
		})
	}
}

// TestNodeRoutesFollowNodes: routes to a node's pods come and go with its
// Node object; a pod CIDR overlapping another node's is refused and
// reported, and routed again once fixed.
func TestNodeRoutesFollowNodes(t *testing.T) {
	sb := upWith(t, "tr", sandbox.Config{})
	n1, n2 := sb.Topology.Nodes[0], sb.Topology.Nodes[1]
	client, remote := n1.Pods[0], n2.Pods[0]
	target := netip.AddrPortFrom(remote.IP4, sandbox.PodPort).String()
	reaches := func() bool {
		rs := requestsFrom(t, sb, client.Name, "tcp", target, 1, "--timeout", "300ms")
		return rs[0].Err == "" && rs[0].Backend == remote.Name
	}
	routed := func() bool {
		out, _ := exec.Command("ip", "-n", n1.Netns, "route", "show", n2.PodNet.String()).Output()
		return strings.Contains(string(out), "via "+n2.IP4.String())
	}
	if !reaches() || !routed() {
		t.Fatalf("%s does not reach %s before any change", client.Name, remote.Name)
	}
	nodes := strings.Split(sb.Topology.NodesYAML(), "---\n")
	write := func(docs ...string) {
		if err := sb.Topology.WriteManifest("nodes.yaml", strings.Join(docs, "---\n")); err != nil {
			t.Fatal(err)
		}
	}

	write(nodes[0]) // node2 deleted
	testenv.WaitFor(t, 5*time.Second, "the route to the deleted node's pods removed", func() bool { return !routed() })
	if reaches() {
		t.Fatal("a deleted node's pod is still reached")
	}

	overlap := strings.Replace(nodes[1], n2.PodNet.String(), "10.244.1.128/25", 1)
	write(nodes[0], overlap)
	testenv.WaitFor(t, 5*time.Second, "the overlapping pod CIDR reported", func() bool {
		out, err := sb.Output(n1.Name, "curl", "-s", "127.0.0.1:10249/metrics")
		return err == nil && strings.Contains(string(out), `netcube_config_problems{reason="PodCIDRConflict"} 1`)
	})
	out, _ := exec.Command("ip", "-n", n1.Netns, "route", "show", "10.244.1.128/25").Output()
	if len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("an overlapping pod CIDR was routed: %s", out)
	}
	log, _ := os.ReadFile(filepath.Join(sb.Topology.LogDir(), "agent-"+n1.Name+".log"))
	if !strings.Contains(string(log), "10.244.1.128/25 overlaps node node1's 10.244.1.0/24") {
		t.Errorf("the agent's log does not name the overlap")
	}

	write(nodes...)
	testenv.WaitFor(t, 5*time.Second, "the route to the node's pods back", routed)
	testenv.WaitFor(t, 5*time.Second, "the node's pod reached again", reaches)
}

// linkCounter reads a link's statistic in a namespace (-1: no such link).
func linkCounter(t *testing.T, netns, link, stat string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", netns, "cat", "/sys/class/net/"+link+"/statistics/"+stat).Output()
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPodCIDRsFromTheControllerManager: with the real
// kube-controller-manager allocating node CIDRs (--allocate-node-cidrs), a
// new node gets pod CIDRs of both families, and every agent routes them to
// it; when the node goes, so do the routes.
func TestPodCIDRsFromTheControllerManager(t *testing.T) {
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	sb := upWith(t, "tk", sandbox.Config{APIServer: true})
	env, err := sb.Env()
	if err != nil {
		t.Fatal(err)
	}
	env.ToolsDir, env.ServiceCIDRs = tools, "10.96.0.0/16,fd00:10:96::/112"
	if err := env.StartControllerManager("10.244.0.0/16,fd00:10:244::/48"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client
	node3 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node3"}}
	created, err := c.CoreV1().Nodes().Create(ctx, node3, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.0.13"}, {Type: corev1.NodeInternalIP, Address: "fd00:172:30::13"}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	testenv.WaitFor(t, 30*time.Second, "kube-controller-manager allocating node3's pod CIDRs", func() bool {
		n, err := c.CoreV1().Nodes().Get(ctx, "node3", metav1.GetOptions{})
		cidrs = nil
		if err == nil {
			cidrs = n.Spec.PodCIDRs
		}
		return len(cidrs) == 2
	})
	for _, taken := range []string{"10.244.1.0/24", "10.244.2.0/24", "fd00:10:244:1::/64", "fd00:10:244:2::/64"} {
		if slices.Contains(cidrs, taken) {
			t.Fatalf("node3 got %v, which another node has", cidrs)
		}
	}
	routed := func(n sandbox.Node, cidr, via string) func() bool {
		family := "-4"
		if strings.Contains(cidr, ":") {
			family = "-6"
		}
		return func() bool {
			out, _ := exec.Command("ip", family, "-n", n.Netns, "route", "show", cidr).Output()
			return strings.Contains(string(out), "via "+via)
		}
	}
	for _, n := range sb.Topology.Nodes {
		testenv.WaitFor(t, 5*time.Second, n.Name+" routing node3's IPv4 pods", routed(n, cidrs[0], "172.30.0.13"))
		testenv.WaitFor(t, 5*time.Second, n.Name+" routing node3's IPv6 pods", routed(n, cidrs[1], "fd00:172:30::13"))
	}
	if err := c.CoreV1().Nodes().Delete(ctx, "node3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range sb.Topology.Nodes {
		gone := routed(n, cidrs[0], "172.30.0.13")
		testenv.WaitFor(t, 5*time.Second, n.Name+" no longer routing node3's pods", func() bool { return !gone() })
	}
}
