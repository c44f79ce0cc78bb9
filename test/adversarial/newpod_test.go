package adversarial

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
)

// udp4 is an Ethernet frame holding an IPv4 UDP packet from src to
// dst:port carrying payload (`pod send` sends the packet through the
// pod's routes, so the Ethernet header is only its framing; the kernel
// sets the IP header's length and checksum; UDP's checksum is left out).
func udp4(src, dst netip.Addr, port uint16, payload string) []byte {
	f := make([]byte, 14+28+len(payload))
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	b := f[14:]
	b[0], b[8], b[9] = 0x45, 64, 17
	copy(b[12:16], src.AsSlice())
	copy(b[16:20], dst.AsSlice())
	binary.BigEndian.PutUint16(b[20:], 40000)
	binary.BigEndian.PutUint16(b[22:], port)
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	return f
}

// TestNewPodIsJudgedFromItsFirstPacket: a NetworkPolicy lets pods labelled
// app=fresh send only to the client pod. A new pod with that label,
// whose Pod object has no address yet (as every pod's before its runtime
// reports one), sends the moment its CNI ADD returns: its packet to the
// client arrives (the positive control, sent with it), its packet to
// another pod does not. Before, a pod entered the policy maps only once
// the API's status gave its address, so its first seconds were open.
func TestNewPodIsJudgedFromItsFirstPacket(t *testing.T) {
	sb := up(t, "ncnewpod", sandbox.Config{})
	top := sb.Topology
	client, target := top.ClientPod(), top.Nodes[0].Pods[1]
	if err := top.WriteManifest("fresh-egress.yaml", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: fresh-egress, namespace: default}
spec:
  podSelector: {matchLabels: {app: fresh}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {app: client}}}]
`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the agents read the policy (fsnotify) before the pod comes

	fresh, err := sb.AddPod("fresh", top.Nodes[0].Name, map[string]string{"app": "fresh"})
	if err != nil {
		t.Fatal(err)
	}
	allowed, denied := fmt.Sprintf("newpod-allowed-%d", time.Now().UnixNano()), fmt.Sprintf("newpod-denied-%d", time.Now().UnixNano())
	var toTarget, toClient int
	toClient = capture(t, sb, client.Name, "eth0", allowed, func() {
		toTarget = capture(t, sb, target.Name, "eth0", denied, func() {
			send(t, sb, fresh.Name, "",
				udp4(fresh.IP4, client.IP4, sandbox.PodPort, allowed),
				udp4(fresh.IP4, target.IP4, sandbox.PodPort, denied))
		}).Frames
	}).Frames
	if toClient == 0 {
		t.Fatalf("the new pod's packet to the client, which its policy allows, did not arrive")
	}
	if toTarget != 0 {
		t.Fatalf("the new pod's first packet to %s arrived (%d frames): its egress policy was not in force when its CNI ADD returned", target.Name, toTarget)
	}
}
