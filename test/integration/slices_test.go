package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/router"
)

// TestSliceRateAndQueueing: a NetworkSlice with an egress rate paces its
// pod's traffic to another node to the rate (iperf3 over TCP, within
// ±10%), with the uplink's strict-priority queueing in place while it
// exists, and is shown with its one pod on the client's node (empty on
// the other), and, with --uplink-rate, the uplink sends no more than that
// while it is queued (another pod, in no slice, gets about 300 Mbit/s, and
// far more before and after); the latency class leaves by a transmit
// queue of its own (the sandbox's uplinks have two), which the HTB's
// traffic never enters (the bulk pod's transfer is the control); removed,
// the pod is best effort again at once: the rate is gone and so is the
// queueing. The positive control is the same transfer before the slice,
// far above the rate.
func TestSliceRateAndQueueing(t *testing.T) {
	const uplinkRate = 300e6
	sb := upWith(t, "tq", sandbox.Config{AgentArgs: []string{"--uplink-rate", "300M"}})
	top := sb.Topology
	client := top.ClientPod()
	clientNode, _ := top.Node(client.Node)
	var server, neighbour sandbox.Pod // neighbour: another pod of the client's node
	for _, p := range top.Pods() {
		switch {
		case p.Node != client.Node && server.Name == "" && slices.Contains(top.EchoBackends(), p):
			server = p
		case p.Node == client.Node && p.Name != client.Name && p.IP4.IsValid():
			neighbour = p
		}
	}
	if server.Name == "" || neighbour.Name == "" {
		t.Fatalf("the topology has no echo backend off %s, or no second pod on it", client.Node)
	}
	startIperfServer(t, sb, server)
	rateFrom := func(from sandbox.Pod) float64 { t.Helper(); return iperfRate(t, sb, from, server) }
	rate := func() float64 { t.Helper(); return rateFrom(client) }
	queueing := func() string {
		out, _ := sb.Output(clientNode.Name, "tc", "qdisc", "show", "dev", "eth0")
		return string(out)
	}
	const limit = 50e6
	if r := rate(); r < 4*limit {
		t.Fatalf("before the slice (the positive control): %.0f Mbit/s, want far above %.0f", r/1e6, limit/1e6)
	}
	if r := rateFrom(neighbour); r < 2*uplinkRate {
		t.Fatalf("a pod in no slice, before any slice (the positive control): %.0f Mbit/s, want far above --uplink-rate %.0f", r/1e6, uplinkRate/1e6)
	}
	if q := queueing(); strings.Contains(q, " 4e4") {
		t.Fatalf("the uplink has netcube's queueing before any slice:\n%s", q)
	}

	slice := bulkSlice(client)
	if err := top.WriteManifest("slice.yaml", slice); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the uplink's prio and fq qdiscs", func() bool {
		q := queueing()
		return strings.Contains(q, "qdisc htb 4e43:") || (strings.Contains(q, "prio 4e43:") && strings.Count(q, "qdisc fq ") == 3)
	})
	if r := rate(); r < 0.9*limit || r > 1.1*limit {
		t.Errorf("in a slice of 50 Mbit/s: %.1f Mbit/s, want within 10%%", r/1e6)
	}
	// While slices queue the uplink, it sends at --uplink-rate at most.
	if r := rateFrom(neighbour); r < 0.8*uplinkRate || r > 1.1*uplinkRate {
		t.Errorf("a pod in no slice, the uplink queued at --uplink-rate 300M: %.1f Mbit/s, want about 300", r/1e6)
	}
	if v := metric(t, sb, clientNode, `netcube_slice_pods{class="throughput",slice="bulk"}`); v != "1" {
		t.Errorf("netcube_slice_pods of bulk on %s: %s, want 1 (the client)", clientNode.Name, v)
	}
	other, _ := top.Node(server.Node)
	if v := metric(t, sb, other, `netcube_slice_pods{class="throughput",slice="bulk"}`); v != "0" {
		t.Errorf("netcube_slice_pods of bulk on %s: %s, want 0 (listed, empty there)", other.Name, v)
	}

	if strings.Contains(queueing(), "qdisc htb 4e43:") {
		checkLatencyQueue(t, sb, clientNode, client, neighbour, rateFrom)
	} else {
		t.Log("EDT queueing (prio and fq): the latency class is prio's first band, no queue of its own to check")
	}

	for _, f := range []string{"slice.yaml", "urllc.yaml"} {
		if err := os.Remove(filepath.Join(top.ManifestDir(), f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the uplink's queueing removed", func() bool {
		return !strings.Contains(queueing(), " 4e4")
	})
	if r := rate(); r < 4*limit {
		t.Errorf("the slice removed: %.0f Mbit/s, want its pod best effort again (far above %.0f)", r/1e6, limit/1e6)
	}
	if r := rateFrom(neighbour); r < 2*uplinkRate {
		t.Errorf("the slice removed: a pod in no slice sends %.0f Mbit/s, want the uplink unqueued (far above %.0f)", r/1e6, uplinkRate/1e6)
	}
}

// TestSliceDSCP: a pod in a latency slice sends with its slice's DSCP,
// EF (46): its packets reach a pod of another node with it, and with
// VXLAN the outer header carries it too, for the underlay to honour. The
// positive control is the same traffic before the slice: DSCP 0.
func TestSliceDSCP(t *testing.T) {
	sb := upWith(t, "tqd", sandbox.Config{Routing: "vxlan"})
	top := sb.Topology
	client := top.ClientPod()
	var server sandbox.Pod
	for _, p := range top.EchoBackends() {
		if p.Node != client.Node {
			server = p
		}
	}
	serverNode, _ := top.Node(server.Node)
	target := fmt.Sprintf("%s:%d", server.IP4, sandbox.PodPort)
	type seen struct {
		DSCP      uint8  `json:"dscp"`
		InnerDSCP *uint8 `json:"inner_dscp"`
	}
	// sniff catches 3 of the client's packets to the server's port, in
	// the server pod and, VXLAN, on its node's uplink, while the client
	// sends requests.
	sniff := func() (inPod, outer []seen) {
		t.Helper()
		var wg sync.WaitGroup
		catch := func(where string, vxlan bool, into *[]seen) {
			defer wg.Done()
			args := []string{"pod", "sniff", "--dev", "eth0", "--port", fmt.Sprint(sandbox.PodPort), "-n", "3", "--timeout", "5s"}
			if vxlan {
				args = append(args, "--vxlan-port", fmt.Sprint(router.VXLANPort))
			}
			out, err := sb.Output(where, filepath.Join(binDir, sandbox.LabBinary), args...)
			if err != nil {
				t.Errorf("sniff on %s: %v", where, err)
				return
			}
			if err := json.Unmarshal(out, into); err != nil {
				t.Errorf("sniff on %s: %v: %s", where, err, out)
			}
		}
		wg.Add(2)
		go catch(server.Name, false, &inPod)
		go catch(serverNode.Name, true, &outer)
		time.Sleep(300 * time.Millisecond)
		requests(t, sb, "udp", target, 10)
		wg.Wait()
		if len(inPod) == 0 || len(outer) == 0 {
			t.Fatalf("caught %d packets in the server pod and %d VXLAN packets on its node", len(inPod), len(outer))
		}
		return inPod, outer
	}
	inPod, outer := sniff()
	for _, s := range append(inPod, outer...) {
		if s.DSCP != 0 {
			t.Fatalf("before any slice (the positive control): DSCP %d, want 0 (%+v, %+v)", s.DSCP, inPod, outer)
		}
	}

	slice := fmt.Sprintf(`apiVersion: netcube.io/v1alpha1
kind: NetworkSlice
metadata: {name: urllc}
spec:
  class: latency
  podSelector: {matchLabels: {pod: %s}}
`, client.Name)
	if err := top.WriteManifest("slice.yaml", slice); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the client's packets marked EF", func() bool {
		inPod, outer = sniff()
		return inPod[0].DSCP == 46
	})
	for _, s := range inPod {
		if s.DSCP != 46 {
			t.Errorf("in the server pod: DSCP %d, want 46 (EF, the latency class's)", s.DSCP)
		}
	}
	for _, s := range outer {
		if s.DSCP != 46 || s.InnerDSCP == nil || *s.InnerDSCP != 46 {
			t.Errorf("on the server's node, VXLAN: outer DSCP %d, inner %v; want both 46", s.DSCP, s.InnerDSCP)
		}
	}
}

// iperfRate is what from sends to server's iperf3 (port 5201) over TCP for
// 3 s, in bits per second.
func iperfRate(t *testing.T, sb *sandbox.Sandbox, from, server sandbox.Pod) float64 {
	t.Helper()
	out, err := sb.Output(from.Name, "iperf3", "-c", server.IP4.String(), "-p", "5201", "-t", "3", "-J")
	if err != nil {
		t.Fatalf("iperf3: %v", err)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3 -J: %v", err)
	}
	t.Logf("iperf3 %s -> %s: %.1f Mbit/s", from.Name, server.Name, r.End.SumReceived.BitsPerSecond/1e6)
	return r.End.SumReceived.BitsPerSecond
}

// TestPodIngressBandwidth: a pod's kubernetes.io/ingress-bandwidth
// annotation shapes what it receives (a tbf on its veth, which the router
// sends its packets through), from another node (redirected in from the
// uplink) and from a pod of its own node (redirected from that pod's
// veth) alike: TCP within 10% of the rate; the uplinks are not queued for
// it. The annotation removed, the shaper is gone and the pod receives at
// full speed again. The positive control is the same transfers before
// the annotation.
func TestPodIngressBandwidth(t *testing.T) {
	const limit = 100e6
	sb := upWith(t, "tqi", sandbox.Config{})
	top := sb.Topology
	client := top.ClientPod()
	var server, neighbour sandbox.Pod // neighbour: on the server's node
	for _, p := range top.Pods() {
		if p.Node != client.Node && server.Name == "" && slices.Contains(top.EchoBackends(), p) {
			server = p
		}
	}
	for _, p := range top.Pods() {
		if p.Node == server.Node && p.Name != server.Name && p.IP4.IsValid() {
			neighbour = p
		}
	}
	if server.Name == "" || neighbour.Name == "" {
		t.Fatalf("the topology has no echo backend off %s with a second pod on its node", client.Node)
	}
	serverNode, _ := top.Node(server.Node)
	startIperfServer(t, sb, server)
	for _, from := range []sandbox.Pod{client, neighbour} {
		if r := iperfRate(t, sb, from, server); r < 4*limit {
			t.Fatalf("before the annotation (the positive control), from %s: %.0f Mbit/s, want far above %.0f", from.Name, r/1e6, limit/1e6)
		}
	}
	pods := top.PodsYAML()
	head := fmt.Sprintf("  name: %s\n  namespace: default\n", server.Name)
	if !strings.Contains(pods, head) {
		t.Fatalf("no pod %s in pods.yaml", server.Name)
	}
	annotated := strings.Replace(pods, head, head+"  annotations: {kubernetes.io/ingress-bandwidth: 100M}\n", 1)
	if err := top.WriteManifest("pods.yaml", annotated); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the pod shaped", func() bool {
		return metric(t, sb, serverNode, "netcube_pods_ingress_bandwidth") == "1"
	})
	for _, from := range []sandbox.Pod{client, neighbour} {
		if r := iperfRate(t, sb, from, server); r < 0.9*limit || r > 1.1*limit {
			t.Errorf("to a pod of ingress-bandwidth 100M, from %s: %.1f Mbit/s, want within 10%%", from.Name, r/1e6)
		}
	}
	qdiscs := func(dev string) string {
		out, _ := sb.Output(serverNode.Name, "tc", "qdisc", "show", "dev", dev)
		return string(out)
	}
	veth := podVeth(t, sb, serverNode, server)
	if q := qdiscs(veth); !strings.Contains(q, "qdisc tbf 4e43: root") {
		t.Errorf("the pod's veth %s has no netcube tbf:\n%s", veth, q)
	}
	if q := qdiscs("eth0"); strings.Contains(q, " 4e43: ") {
		t.Errorf("an ingress rate alone queues the uplink:\n%s", q)
	}

	if err := top.WriteManifest("pods.yaml", pods); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the pod no longer shaped", func() bool {
		return metric(t, sb, serverNode, "netcube_pods_ingress_bandwidth") == "0" && !strings.Contains(qdiscs(veth), " 4e43: ")
	})
	if r := iperfRate(t, sb, client, server); r < 4*limit {
		t.Errorf("the annotation removed: %.0f Mbit/s, want far above %.0f", r/1e6, limit/1e6)
	}
}

// podVeth is the node's side of pod's veth: the device the node routes
// the pod's address to.
func podVeth(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, pod sandbox.Pod) string {
	t.Helper()
	out, err := sb.Output(node.Name, "ip", "-o", "route", "get", pod.IP4.String())
	if err != nil {
		t.Fatalf("ip route get %s on %s: %v", pod.IP4, node.Name, err)
	}
	f := strings.Fields(string(out))
	for i := range f[:len(f)-1] {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	t.Fatalf("no device in %q", out)
	return ""
}

// TestSliceRateKernelRouted: with --routing kernel, the kernel forwards
// a pod's packets to the uplink and its forwarding resets skb->priority;
// the slice's rate holds all the same (the class is given again as the
// packet leaves by the uplink). The positive control is the transfer
// before the slice, far above the rate.
func TestSliceRateKernelRouted(t *testing.T) {
	sb := upWith(t, "tqk", sandbox.Config{Routing: "kernel"})
	top := sb.Topology
	client := top.ClientPod()
	var server sandbox.Pod
	for _, p := range top.EchoBackends() {
		if p.Node != client.Node {
			server = p
		}
	}
	startIperfServer(t, sb, server)
	const limit = 50e6
	if r := iperfRate(t, sb, client, server); r < 4*limit {
		t.Fatalf("before the slice (the positive control): %.0f Mbit/s, want far above %.0f", r/1e6, limit/1e6)
	}
	slice := bulkSlice(client)
	if err := top.WriteManifest("slice.yaml", slice); err != nil {
		t.Fatal(err)
	}
	clientNode, _ := top.Node(client.Node)
	testenv.WaitFor(t, 10*time.Second, "the uplink queued", func() bool {
		out, _ := sb.Output(clientNode.Name, "tc", "qdisc", "show", "dev", "eth0")
		return strings.Contains(string(out), " 4e43: ")
	})
	if r := iperfRate(t, sb, client, server); r < 0.9*limit || r > 1.1*limit {
		t.Errorf("kernel-routed, in a slice of 50 Mbit/s: %.1f Mbit/s, want within 10%%", r/1e6)
	}
}

// startIperfServer runs iperf3's server (port 5201) in pod until the test
// ends.
func startIperfServer(t *testing.T, sb *sandbox.Sandbox, pod sandbox.Pod) {
	t.Helper()
	iperf := exec.Command("iperf3", "-s", "-p", "5201")
	if err := sb.Start(pod.Name, iperf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iperf.Process.Kill(); _ = iperf.Wait() })
	time.Sleep(300 * time.Millisecond)
}

// bulkSlice is a NetworkSlice "bulk" of 50 Mbit/s holding pod alone.
// checkLatencyQueue: with HTB queueing on a two-queue uplink, what the
// bulk pod sends goes into the HTB (4e43:) and not into the latency
// class's queue (4e4c:), the control; put in a latency slice, the
// neighbour's transfer goes into the latency queue and not the HTB.
func checkLatencyQueue(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, bulk, neighbour sandbox.Pod, send func(sandbox.Pod) float64) {
	t.Helper()
	sent := func() (htb, latency uint64) {
		t.Helper()
		out, err := sb.Output(node.Name, "tc", "-s", "-j", "qdisc", "show", "dev", "eth0")
		if err != nil {
			t.Fatalf("tc -s qdisc: %v", err)
		}
		var qs []struct {
			Kind   string `json:"kind"`
			Handle string `json:"handle"`
			Bytes  uint64 `json:"bytes"`
		}
		if err := json.Unmarshal(out, &qs); err != nil {
			t.Fatalf("tc -s -j qdisc: %v: %s", err, out)
		}
		found := 0
		for _, q := range qs {
			switch {
			case q.Kind == "htb" && q.Handle == "4e43:":
				htb, found = q.Bytes, found+1
			case q.Handle == "4e4c:":
				latency, found = q.Bytes, found+1
			}
		}
		if found != 2 {
			t.Fatalf("%s's uplink: want netcube's HTB 4e43: and the latency class's queue 4e4c:, got %s", node.Name, out)
		}
		return htb, latency
	}
	h0, l0 := sent()
	send(bulk)
	h1, l1 := sent()
	if h1-h0 < 1e6 || l1-l0 > (h1-h0)/100 {
		t.Errorf("the bulk pod's transfer (the control): %d bytes into the HTB, %d into the latency queue; want it all in the HTB", h1-h0, l1-l0)
	}
	if err := sb.Topology.WriteManifest("urllc.yaml", fmt.Sprintf(`apiVersion: netcube.io/v1alpha1
kind: NetworkSlice
metadata: {name: urllc}
spec:
  class: latency
  podSelector: {matchLabels: {pod: %s}}
`, neighbour.Name)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the neighbour in the latency slice", func() bool {
		out, _ := sb.Output(node.Name, "curl", "-s", "127.0.0.1:10249/metrics")
		return strings.Contains(string(out), "\n"+`netcube_slice_pods{class="latency",slice="urllc"} 1`+"\n")
	})
	h2, l2 := sent()
	send(neighbour)
	h3, l3 := sent()
	if l3-l2 < 1e6 || h3-h2 > (l3-l2)/100 {
		t.Errorf("a pod in a latency slice: %d bytes into its queue, %d into the HTB; want them all in its queue", l3-l2, h3-h2)
	}
}

func bulkSlice(pod sandbox.Pod) string {
	return fmt.Sprintf(`apiVersion: netcube.io/v1alpha1
kind: NetworkSlice
metadata: {name: bulk}
spec:
  class: throughput
  egressRate: 50M
  podSelector: {matchLabels: {pod: %s}}
`, pod.Name)
}
