package adversarial

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/model"
)

// inNamespaces rewrites the sandbox's Pod objects (pods.yaml) with the
// pods of moved in the namespace given (their labels replaced by labels,
// when set), and declares those namespaces: the sandbox makes every pod
// in default, ClusterNetworkPolicy selects by namespace.
func inNamespaces(t *testing.T, sb *sandbox.Sandbox, moved map[string]string, labels map[string]string) {
	t.Helper()
	docs := strings.Split(sb.Topology.PodsYAML(), "\n---\n")
	namespaces := map[string]bool{}
	for i, d := range docs {
		for pod, ns := range moved {
			if !strings.Contains(d, "\n  name: "+pod+"\n") {
				continue
			}
			d = strings.Replace(d, "  namespace: default\n", "  namespace: "+ns+"\n", 1)
			if l, ok := labels[pod]; ok {
				old := fmt.Sprintf("  labels: {app: %s, pod: %s}\n", sb.Topology.PodLabels(podNamed(t, sb, pod))["app"], pod)
				if !strings.Contains(d, old) {
					t.Fatalf("pod %s's labels not found in its manifest:\n%s", pod, d)
				}
				d = strings.Replace(d, old, "  labels: {"+l+"}\n", 1)
			}
			docs[i] = d
			namespaces[ns] = true
		}
	}
	for ns := range namespaces {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {kubernetes.io/metadata.name: %s}\n", ns, ns))
	}
	if err := sb.Topology.WriteManifest("pods.yaml", strings.Join(docs, "\n---\n")); err != nil {
		t.Fatal(err)
	}
}

func podNamed(t *testing.T, sb *sandbox.Sandbox, name string) sandbox.Pod {
	t.Helper()
	p, ok := sb.Topology.Pod(name)
	if !ok {
		t.Fatalf("no pod %s", name)
	}
	return p
}

// policyEntries counts the entries of a node's compiled policy maps: the
// identities, the endpoints and the rules. Tier sets are compiled per
// identity, before any packet: traffic must never add one.
func policyEntries(t *testing.T, pinDir string) map[string]int {
	t.Helper()
	maps, closeMaps, err := datapath.OpenPinned(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps()
	out := map[string]int{}
	for _, name := range []string{policy.MapHosts, policy.MapPeers, policy.MapEndpoints, policy.MapRules, policy.MapEntries, ct.MapFlows} {
		out[name] = mapLen(t, maps.Map(name))
	}
	return out
}

func mapLen(t *testing.T, m cube.Map) int {
	t.Helper()
	k, v := make([]byte, m.KeySize()), make([]byte, m.ValueSize())
	n := 0
	it := m.Iterate()
	for it.Next(k, v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterating %s: %v", m.Name(), err)
	}
	return n
}

// agentMetric reads one series (name{labels} as printed) from a node's
// agent; 0 when it is not there yet.
func agentMetric(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, series string) float64 {
	t.Helper()
	out, err := sb.Output(node.Name, "curl", "-s", "127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", node.Name, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q", series, v)
			}
			return f
		}
	}
	return 0
}

// monitor runs `netcube monitor -o json --type drop` against a node's
// agent for the rest of the test and keeps the events.
type monitor struct {
	mu     sync.Mutex
	events []events.Event
}

func watchDrops(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node) *monitor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "netcube"), "monitor", "-o", "json", "--type", "drop", "--socket", sb.Topology.APISocket(node))
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var stderr syncBuilder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	m := &monitor{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e events.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				m.mu.Lock()
				m.events = append(m.events, e)
				m.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
	})
	testenv.WaitFor(t, 10*time.Second, "netcube monitor listening on "+node.Name, func() bool {
		return strings.Contains(stderr.String(), "Listening for events")
	})
	return m
}

func (m *monitor) count(match func(events.Event) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.events {
		if match(e) {
			n++
		}
	}
	return n
}

type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sendAll sends frames from who in batches (the command line's length).
func sendAll(t *testing.T, sb *sandbox.Sandbox, who string, frames [][]byte) {
	t.Helper()
	for len(frames) > 0 {
		n := min(len(frames), 200)
		send(t, sb, who, "", frames[:n]...)
		frames = frames[n:]
	}
}

// TestClusterPolicyAdminDenyHoldsAgainstAHostilePod: the cluster's admin
// denies, in the Admin tier, every connection from namespace hostile to
// namespace victim (hostile-to-victim), passes hostile's UDP to port 9 to
// NetworkPolicy (hostile-pass, before it), where victim's owner admits
// only namespace friendly; hostile's owner writes a NetworkPolicy of its
// own allowing all its egress. The hostile pod (n1p1, node1, CAP_NET_RAW)
// attacks the victim (n2p1, node2) and nothing of it is captured in the
// victim's namespace: packets from its own address (TCP SYN, a bare ACK
// posing as a reply, UDP, ICMP echo, a fragmented datagram and its
// non-first fragments alone), the same posing as the friendly pod (the
// peer the victim admits), as either node (node2's address is the host,
// always admitted by NetworkPolicy) and as an address of an Accept rule's
// networks; a flood of 2,000 new connections on distinct source and
// destination ports; UDP 9 (the Pass path, where the victim's
// NetworkPolicy decides); and all again after the hostile pod's owner
// relabels it (namespace labels are the admin's). Positive controls: the
// same packets reach the victim before the policies, and, under them,
// the friendly pod's do (its UDP 9 through Pass and NetworkPolicy). The
// flood adds no entry to node2's policy maps (identities, endpoints,
// rules) nor to its conntrack table (a denied connection is not
// recorded), node2's drop counter of the victim's ingress grows by at
// least the flood, and `netcube monitor` reports the drops as the Admin
// Deny's, naming it.
func TestClusterPolicyAdminDenyHoldsAgainstAHostilePod(t *testing.T) {
	sb := up(t, "adv-cnp", sandbox.Config{Nodes: 2, PodsPerNode: 2})
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	hostile, friendly, victim := node1.Pods[0], node1.Pods[1], node2.Pods[0]
	const netsCIDR, netsAddr = "192.0.2.0/24", "192.0.2.77"
	port := uint16(sandbox.PodPort)
	at := func(a netip.Addr, p uint16) netip.AddrPort { return netip.AddrPortFrom(a, p) }

	// The attacks, from src (marker in every packet; every fragment of
	// the fragmented datagram holds it whole).
	attacks := func(src netip.Addr, marker string) map[string][][]byte {
		frag := pkt.Fragments(pkt.UDP(at(src, 40002), at(victim.IP4, port), []byte(strings.Repeat(marker+"/", 12))), 64, 4242)
		return map[string][][]byte{
			"a TCP SYN":                       {pkt.TCP(at(src, 40000), at(victim.IP4, port), pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, []byte(marker))},
			"a bare ACK posing as a reply":    {pkt.TCP(at(src, 40001), at(victim.IP4, port), pkt.TCPOpts{ACK: true, Seq: 9, Ack: 9, Window: 64240}, []byte(marker))},
			"a UDP datagram":                  {pkt.UDP(at(src, 40003), at(victim.IP4, port), []byte(marker))},
			"an ICMP echo":                    {pkt.Echo(src, victim.IP4, 7, 1, false, []byte(marker))},
			"a fragmented UDP datagram":       frag,
			"its non-first fragments, alone":  frag[1:],
			"a UDP datagram to the Pass port": {pkt.UDP(at(src, 40004), at(victim.IP4, 9), []byte(marker))},
		}
	}
	arrives := func(marker string, from string, frames [][]byte) int {
		return capture(t, sb, victim.Name, "eth0", marker, func() { send(t, sb, from, "", frames...) }).Frames
	}

	// Positive control: before any policy, hostile's packets arrive
	// (all but the fragments alone, which no datagram completes).
	for name, frames := range attacks(hostile.IP4, "adv-cnp-before") {
		if name == "its non-first fragments, alone" {
			continue
		}
		if n := arrives("adv-cnp-before", hostile.Name, frames); n == 0 {
			t.Fatalf("positive control: %s from %s never reached %s without any policy", name, hostile.Name, victim.Name)
		}
	}

	inNamespaces(t, sb, map[string]string{hostile.Name: "hostile", friendly.Name: "friendly", victim.Name: "victim"}, nil)
	if err := top.WriteManifest("cnp-hostile.yaml", fmt.Sprintf(`apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: hostile-to-victim}
spec:
  tier: Admin
  priority: 10
  subject:
    namespaces: {matchLabels: {kubernetes.io/metadata.name: victim}}
  ingress:
  - name: no-hostile
    action: Deny
    from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: hostile}}}]
---
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: hostile-pass}
spec:
  tier: Admin
  priority: 5
  subject:
    namespaces: {matchLabels: {kubernetes.io/metadata.name: victim}}
  ingress:
  - name: udp-9-to-networkpolicy
    action: Pass
    from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: hostile}}}]
    protocols: [{udp: {destinationPort: {number: 9}}}]
---
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: victim-egress}
spec:
  tier: Admin
  priority: 20
  subject:
    namespaces: {matchLabels: {kubernetes.io/metadata.name: victim}}
  egress:
  - name: to-the-networks
    action: Accept
    to: [{networks: [%q]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-friendly, namespace: victim}
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: friendly}}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: all-egress, namespace: hostile}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress: [{}]
`, netsCIDR)); err != nil {
		t.Fatal(err)
	}
	// In force once the hostile SYN stops arriving (the agents read the
	// manifests).
	testenv.WaitFor(t, 20*time.Second, "the Admin Deny in force", func() bool {
		return arrives("adv-cnp-wait", hostile.Name, attacks(hostile.IP4, "adv-cnp-wait")["a TCP SYN"]) == 0
	})
	// Positive control under the policies: the friendly pod's packets,
	// UDP 9 among them (Pass, then the victim's NetworkPolicy).
	for _, name := range []string{"a TCP SYN", "a UDP datagram", "a UDP datagram to the Pass port"} {
		if n := arrives("adv-cnp-friendly", friendly.Name, attacks(friendly.IP4, "adv-cnp-friendly")[name]); n == 0 {
			t.Fatalf("positive control: %s from the friendly pod %s never reached %s under the policies", name, friendly.Name, victim.Name)
		}
	}

	mon := watchDrops(t, sb, node2)
	dropsSeries := fmt.Sprintf(`netcube_policy_drops_total{namespace="victim",pod=%q,reason="ingress"}`, victim.Name)
	dropsBefore := agentMetric(t, sb, node2, dropsSeries)

	poses := map[string]netip.Addr{
		"its own address":                  hostile.IP4,
		"the friendly pod, admitted":       friendly.IP4,
		"its node":                         node1.IP4,
		"the victim's node (the host)":     node2.IP4,
		"an address of an Accept networks": netip.MustParseAddr(netsAddr),
	}
	// Each pose's attacks in one capture (a capture lasts seconds): the
	// first frame caught says which got through.
	attackAll := func(stage string) {
		for who, src := range poses {
			var frames [][]byte
			for _, f := range attacks(src, "adv-cnp-attack") {
				frames = append(frames, f...)
			}
			got := capture(t, sb, victim.Name, "eth0", "adv-cnp-attack", func() { send(t, sb, hostile.Name, "", frames...) })
			if got.Frames != 0 {
				t.Errorf("%s: %d of %d packets from %s posing as %s (%s) reached %s, the first: %v", stage, got.Frames, len(frames), hostile.Name, who, src, victim.Name, got.First)
			}
		}
	}
	attackAll("under the Admin Deny")

	// The flood: new connections from hostile's own address, each its
	// own source and destination port, SYNs and UDP.
	entriesBefore := map[string]map[string]int{node1.Name: policyEntries(t, node1.PinDir), node2.Name: policyEntries(t, node2.PinDir)}
	const flood = 2000
	var frames [][]byte
	for i := range flood {
		src, dst := at(hostile.IP4, uint16(10000+i)), at(victim.IP4, uint16(1000+i*7%60000))
		if i%2 == 0 {
			frames = append(frames, pkt.TCP(src, dst, pkt.TCPOpts{SYN: true, Seq: uint32(i), Window: 64240}, []byte("adv-cnp-flood")))
		} else {
			frames = append(frames, pkt.UDP(src, dst, []byte("adv-cnp-flood")))
		}
	}
	start := time.Now()
	got := capture(t, sb, victim.Name, "eth0", "adv-cnp-flood", func() { sendAll(t, sb, hostile.Name, frames) })
	t.Logf("flood: %d new connections in %s", flood, time.Since(start).Round(time.Millisecond))
	if got.Frames != 0 {
		t.Errorf("%d of the flood's %d packets reached %s: %v", got.Frames, flood, victim.Name, got.First)
	}
	for _, n := range []sandbox.Node{node1, node2} {
		after := policyEntries(t, n.PinDir)
		for name, was := range entriesBefore[n.Name] {
			grew := after[name] - was
			if name == ct.MapFlows {
				// Other traffic of the node may come and go; a
				// recorded flood would add a thousand.
				if n.Name == node2.Name && grew > flood/20 {
					t.Errorf("%s: %s grew by %d entries with the denied flood of %d: denied connections are recorded", n.Name, name, grew, flood)
				}
				continue
			}
			if grew != 0 {
				t.Errorf("%s: %s went from %d to %d entries with the flood: tier sets must be compiled per identity, not per packet", n.Name, name, was, after[name])
			}
		}
		t.Logf("%s's maps before and after the flood: %v -> %v", n.Name, entriesBefore[n.Name], after)
	}
	var drops float64
	testenv.WaitFor(t, 10*time.Second, "the drops counted", func() bool {
		drops = agentMetric(t, sb, node2, dropsSeries) - dropsBefore
		return drops >= flood
	})
	t.Logf("%s counts %.0f ingress drops of %s", node2.Name, drops, victim.Name)
	deny := model.ClusterPolicyRef(model.AdminTier, "hostile-to-victim")
	testenv.WaitFor(t, 10*time.Second, "netcube monitor naming "+deny, func() bool {
		return mon.count(func(e events.Event) bool {
			return e.Policy != nil && e.Policy.Direction == "ingress" && e.Dst.Addr() == victim.IP4 &&
				e.Src.Addr() == hostile.IP4 && e.Policy.Rule == "denied" && slices.Equal(e.Policy.Policies, []string{deny})
		}) > 0
	})
	if n := mon.count(func(e events.Event) bool {
		return e.Policy != nil && e.Dst.Addr() == victim.IP4 && e.Src.Addr() == hostile.IP4 && e.Dst.Port() == 9 && e.Proto == "UDP" &&
			slices.Contains(e.Policy.Policies, deny)
	}); n != 0 {
		t.Errorf("%d drops of UDP 9 (passed to NetworkPolicy by hostile-pass) named %s", n, deny)
	}

	// The hostile pod's owner relabels it: the namespace's Deny holds.
	inNamespaces(t, sb, map[string]string{hostile.Name: "hostile", friendly.Name: "friendly", victim.Name: "victim"},
		map[string]string{hostile.Name: "app: friendly, pod: " + friendly.Name})
	time.Sleep(2 * time.Second) // the agents read it
	attackAll("after relabelling the hostile pod")
	for _, name := range []string{"a TCP SYN", "a UDP datagram to the Pass port"} {
		if n := arrives("adv-cnp-friendly2", friendly.Name, attacks(friendly.IP4, "adv-cnp-friendly2")[name]); n == 0 {
			t.Errorf("positive control: %s from the friendly pod never reached %s after the relabel", name, victim.Name)
		}
	}
}

// TestClusterPolicyNodesPeerFollowsNodeLabels: an Admin Deny of the
// client pod's egress to nodes labelled role=protected. Node2 is not
// labelled: the client (node1) reaches a host-network listener on node2
// (the positive control). node2 labelled role=protected: blocked within
// seconds; the label removed: reachable again. The manifest directory's
// Node objects are what the agents read (as the API's, labels and
// addresses).
func TestClusterPolicyNodesPeerFollowsNodeLabels(t *testing.T) {
	sb := up(t, "adv-cnpnode", sandbox.Config{Nodes: 2, PodsPerNode: 1})
	top := sb.Topology
	client, node2 := top.ClientPod(), top.Nodes[1]
	const hostPort = 9099
	cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), "pod", "serve", "--name", node2.Name, "--port", strconv.Itoa(hostPort))
	if err := sb.Start(node2.Name, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := netip.AddrPortFrom(node2.IP4, hostPort).String()
	reaches := func() bool {
		return request(t, sb, client.Name, "tcp", addr, 1, "--timeout", "500ms")[0].Err == ""
	}
	testenv.WaitFor(t, 10*time.Second, "positive control: the listener on "+node2.Name, reaches)

	if err := top.WriteManifest("cnp-nodes.yaml", fmt.Sprintf(`apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: no-protected-nodes}
spec:
  tier: Admin
  priority: 10
  subject:
    pods:
      namespaceSelector: {}
      podSelector: {matchLabels: {pod: %s}}
  egress:
  - name: deny-protected
    action: Deny
    to: [{nodes: {matchLabels: {role: protected}}}]
`, client.Name)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the agents read it
	if !reaches() {
		t.Fatalf("with no node labelled role=protected, %s no longer reaches %s", client.Name, addr)
	}
	label := func(labels string) {
		t.Helper()
		y := top.NodesYAML()
		at := strings.Index(y, "  name: "+node2.Name+"\n")
		if at < 0 {
			t.Fatalf("no %s in the nodes' manifest", node2.Name)
		}
		at += len("  name: " + node2.Name + "\n")
		y = y[:at] + labels + y[at:]
		if err := top.WriteManifest("nodes.yaml", "# The nodes, labelled by the test.\n"+y); err != nil {
			t.Fatal(err)
		}
	}
	label("  labels: {role: protected}\n")
	start := time.Now()
	testenv.WaitFor(t, 5*time.Second, node2.Name+" labelled role=protected: blocked", func() bool { return !reaches() })
	t.Logf("blocked %s after the label", time.Since(start).Round(time.Millisecond))
	label("")
	start = time.Now()
	testenv.WaitFor(t, 5*time.Second, "the label removed: reachable again", reaches)
	t.Logf("reachable %s after the label's removal", time.Since(start).Round(time.Millisecond))
}
