package adversarial

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestNodePortClientIsJudgedByTheBackendsPolicy: a NodePort with
// externalTrafficPolicy Cluster whose one endpoint is on the node the host
// outside sends to; the endpoint's ingress policy admits one ipBlock.
// With the host's own address in the block, its SYN reaches the pod from
// the host's address (no SNAT to the node: the positive control, and what
// the pod's policy must see); with another block, the host's SYN never
// reaches the pod. Before, such a flow was SNATed to the node before the
// pod's ingress was judged, and the node is admitted by every policy.
func TestNodePortClientIsJudgedByTheBackendsPolicy(t *testing.T) {
	sb := up(t, "adv-np", sandbox.Config{Nodes: 2, PodsPerNode: 1})
	top := sb.Topology
	node, host := top.Nodes[0], top.External
	backend := node.Pods[0]
	const nodePort = 30191
	svc := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: np-local, namespace: default}
spec:
  type: NodePort
  externalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  clusterIP: 10.96.0.191
  clusterIPs: [10.96.0.191]
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: %d}
---
`, nodePort) + sandbox.SliceYAML("np-local", false, sandbox.EndpointPorts[:1], []sandbox.Pod{backend})
	policy := func(block string) string {
		return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: one-block, namespace: default}
spec:
  podSelector: {matchLabels: {pod: %s}}
  policyTypes: [Ingress]
  ingress:
  - from: [{ipBlock: {cidr: %s}}]
    ports: [{protocol: TCP, port: %d}]
`, top.PodLabels(backend)["pod"], block, sandbox.PodPort)
	}
	if err := top.WriteManifest("np-local.yaml", svc+"---\n"+policy(host.IP4.String()+"/32")); err != nil {
		t.Fatal(err)
	}
	port := uint16(42000)
	syn := func(marker string) []byte {
		port++
		return pkt.TCP(netip.AddrPortFrom(host.IP4, port), netip.AddrPortFrom(node.IP4, nodePort), pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, []byte(marker))
	}
	try := func(marker string) (frames int, first []string) {
		got := capture(t, sb, backend.Name, "eth0", marker, func() { send(t, sb, host.Name, "", syn(marker)) })
		return got.Frames, got.First
	}

	deadline := time.Now().Add(20 * time.Second)
	var first []string
	for n := 0; n == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("positive control: the host's SYN never reached %s, whose policy admits %s", backend.Name, host.IP4)
		}
		n, first = try("adv-np-admitted")
	}
	b, err := hex.DecodeString(first[0])
	if err != nil || len(b) < 14+20 {
		t.Fatalf("the captured SYN %q: %v", first[0], err)
	}
	if src, _ := netip.AddrFromSlice(b[14+12 : 14+16]); src != host.IP4 {
		t.Errorf("the pod saw the host's SYN from %s, want the host's own %s (no SNAT for a local endpoint)", src, host.IP4)
	}

	if err := top.WriteManifest("np-local.yaml", svc+"---\n"+policy("203.0.113.0/24")); err != nil {
		t.Fatal(err)
	}
	// Denied once the agents have read the new block: never after 20 s.
	deadline = time.Now().Add(20 * time.Second)
	for {
		n, _ := try("adv-np-denied")
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host's SYN still reaches %s, whose policy admits only 203.0.113.0/24 (%d frames)", backend.Name, n)
		}
	}
	// And it stays denied.
	for range 3 {
		if n, _ := try("adv-np-denied"); n != 0 {
			t.Errorf("the host's SYN reached %s, whose policy admits only 203.0.113.0/24 (%d frames)", backend.Name, n)
		}
	}
}
