package adversarial

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestSourceRangesNeverWiderThanWritten: a LoadBalancer IP walled by
// loadBalancerSourceRanges. With the host outside's own /32 its SYN
// reaches the endpoint (the positive control); then the ranges become
// what a hostile or careless Service writes: an IPv4-mapped prefix
// shorter than /96 (before, LPM prefix length 31 in the 16-byte keys: it
// admitted every client) and ::/0 alone (before, it matched every IPv4
// address in those keys). Neither lets the host's IPv4 SYN reach the
// endpoint (captured in its namespace).
func TestSourceRangesNeverWiderThanWritten(t *testing.T) {
	sb := up(t, "adv-pfx", sandbox.Config{Nodes: 2, PodsPerNode: 1})
	top := sb.Topology
	node, host := top.Nodes[0], top.External
	backend := node.Pods[0]
	lbIP := netip.MustParseAddr("198.51.100.21")
	if err := top.RouteFromExternal(netip.PrefixFrom(lbIP, 32), node.Name); err != nil {
		t.Fatal(err)
	}
	service := func(ranges ...string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: walled, namespace: default}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  clusterIP: 10.96.0.192
  clusterIPs: [10.96.0.192]
  loadBalancerSourceRanges: [%s]
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: 30192}
status:
  loadBalancer:
    ingress:
    - ip: %s
---
`, strings.Join(ranges, ", "), lbIP) + sandbox.SliceYAML("walled", false, sandbox.EndpointPorts[:1], []sandbox.Pod{backend})
	}
	port := uint16(43000)
	reaches := func(marker string) int {
		port++
		syn := pkt.TCP(netip.AddrPortFrom(host.IP4, port), netip.AddrPortFrom(lbIP, 80), pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, []byte(marker))
		return capture(t, sb, backend.Name, "eth0", marker, func() { send(t, sb, host.Name, "", syn) }).Frames
	}
	if err := top.WriteManifest("walled.yaml", service(host.IP4.String()+"/32")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for reaches("adv-pfx-admitted") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("positive control: the host's SYN to %s never reached %s, the range its own /32", lbIP, backend.Name)
		}
	}
	for _, ranges := range [][]string{{`"::ffff:0:0/95"`}, {`"::/0"`}} {
		t.Run(ranges[0], func(t *testing.T) {
			if err := top.WriteManifest("walled.yaml", service(ranges...)); err != nil {
				t.Fatal(err)
			}
			// Refused once the agents have read it: never after 20 s.
			deadline := time.Now().Add(20 * time.Second)
			for reaches("adv-pfx-walled") != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the host's IPv4 SYN still reaches %s with loadBalancerSourceRanges %s", backend.Name, ranges[0])
				}
			}
			for range 3 {
				if n := reaches("adv-pfx-walled"); n != 0 {
					t.Errorf("the host's IPv4 SYN reached %s with loadBalancerSourceRanges %s (%d frames)", backend.Name, ranges[0], n)
				}
			}
		})
	}
}
