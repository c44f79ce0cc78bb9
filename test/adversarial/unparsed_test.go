package adversarial

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestPacketsWithoutPortsNeverReachAnIsolatedPod: a pod isolated by an
// ingress NetworkPolicy that admits only TCP to its port from the client
// pod. From the client (on the other node), the admitted TCP packet
// arrives (the positive control); an ICMP echo, a GRE packet, an ESP
// packet and an ICMP error quoting a connection that does not exist do
// not (captured in the target's namespace): each is judged as a packet
// to port 0, which only a rule without ports admits. Then the rule loses
// its ports: the echo and the GRE packet arrive (the positive control of
// "port 0").
func TestPacketsWithoutPortsNeverReachAnIsolatedPod(t *testing.T) {
	sb := up(t, "adv-icmp", sandbox.Config{Nodes: 2, PodsPerNode: 2})
	top := sb.Topology
	attacker := top.ClientPod()
	var target sandbox.Pod
	for _, p := range top.Pods() {
		if p.Node != attacker.Node {
			target = p
			break
		}
	}
	targetLabel := top.PodLabels(target)["pod"]
	policy := func(ports string) string {
		return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-tcp, namespace: default}
spec:
  podSelector: {matchLabels: {pod: %s}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
%s`, targetLabel, ports)
	}
	if err := top.WriteManifest("only-tcp.yaml", policy(fmt.Sprintf("    ports: [{protocol: TCP, port: %d}]\n", sandbox.PodPort))); err != nil {
		t.Fatal(err)
	}
	src, dst := attacker.IP4, target.IP4
	packets := func(marker string) map[string][]byte {
		quoted := pkt.UDP(netip.AddrPortFrom(dst, 53), netip.AddrPortFrom(src, 40000), []byte(marker))
		return map[string][]byte{
			"an ICMP echo":                        pkt.Echo(src, dst, 7, 1, false, []byte(marker)),
			"a GRE packet":                        pkt.WithProto(pkt.UDP(netip.AddrPortFrom(src, 40000), netip.AddrPortFrom(dst, 9), []byte(marker)), 47),
			"an ESP packet":                       pkt.WithProto(pkt.UDP(netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(dst, 9), []byte(marker)), 50),
			"an ICMP error quoting no connection": pkt.Error(src, dst, pkt.PortUnreach, 0, quoted, 0),
		}
	}
	arrives := func(marker string, frame []byte) int {
		return capture(t, sb, target.Name, "eth0", marker, func() { send(t, sb, attacker.Name, "", frame) }).Frames
	}

	// Positive control: the admitted TCP (the policy in force, read by
	// the agents: retried until then).
	tcp := func(marker string) []byte {
		return pkt.TCP(netip.AddrPortFrom(src, 41000), netip.AddrPortFrom(dst, sandbox.PodPort), pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, []byte(marker))
	}
	deadline := time.Now().Add(20 * time.Second)
	for marker := "adv-tcp-admitted"; arrives(marker, tcp(marker)) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("positive control: the admitted TCP packet never reached %s", target.Name)
		}
	}
	for name, frame := range packets("adv-no-ports") {
		if n := arrives("adv-no-ports", frame); n != 0 {
			t.Errorf("%s from %s reached %s, isolated to TCP port %d (%d frames)", name, attacker.Name, target.Name, sandbox.PodPort, n)
		}
	}

	// The rule without ports admits them (the agents read it first: the
	// echo is retried until then).
	if err := top.WriteManifest("only-tcp.yaml", policy("")); err != nil {
		t.Fatal(err)
	}
	admitted := packets("adv-port-zero")
	deadline = time.Now().Add(20 * time.Second)
	for arrives("adv-port-zero", admitted["an ICMP echo"]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an ICMP echo never reached %s under a rule without ports", target.Name)
		}
	}
	if n := arrives("adv-port-zero", admitted["a GRE packet"]); n == 0 {
		t.Errorf("a GRE packet did not reach %s under a rule without ports", target.Name)
	}
}
