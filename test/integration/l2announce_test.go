package integration

import (
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// uplinkMAC is node n's eth0 address.
func uplinkMAC(t *testing.T, n sandbox.Node) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", n.Netns, "-j", "link", "show", "eth0").Output()
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip link show eth0 in %s: %v %s", n.Netns, err, out)
	}
	return links[0].Address
}

// neighbourMAC is the external client's neighbour entry for ip ("": none).
func neighbourMAC(t *testing.T, sb *sandbox.Sandbox, ip string) string {
	t.Helper()
	out, _ := exec.Command("ip", "-n", sb.Topology.External.Netns, "-j", "neigh", "show", ip).Output()
	var ns []struct {
		LLAddr string `json:"lladdr"`
	}
	if json.Unmarshal(out, &ns) != nil || len(ns) == 0 {
		return ""
	}
	return ns[0].LLAddr
}

// TestOneNodeAnnouncesEachLoadBalancerIP: with the L2 election (the
// default), a LoadBalancer IP on the nodes' link is answered by exactly
// one node's datapath, whose MAC the client on the link learns; when that
// node dies (its uplink down, its agent killed), the other node takes the
// address over and tells the link at once: the client's existing
// neighbour entry moves to the new node's MAC by the gratuitous ARP
// (the client never had to ask again) and its connections are served.
func TestOneNodeAnnouncesEachLoadBalancerIP(t *testing.T) {
	sb := upWith(t, "l2", sandbox.Config{SocketLB: true})
	top := sb.Topology
	const ip = "172.30.0.100"
	manifest := externalService("l2web", "LoadBalancer", "Cluster", []string{"10.96.0.40", "fd00:10:96::40"}, [2]int{30140, 30141},
		nil, []string{ip, "fd00:172:30::100"}, top.EchoBackends())
	if err := top.WriteManifest("l2web.yaml", manifest); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(ip, "80")
	testenv.WaitFor(t, 20*time.Second, "the external client reaches "+ip, func() bool {
		return fromOutside(t, sb, "tcp", addr, 1, "--timeout", "500ms")[0].Err == ""
	})
	var first []string
	testenv.WaitFor(t, 10*time.Second, "exactly one node announcing "+ip, func() bool {
		first = top.Announcing(netip.MustParseAddr(ip))
		return len(first) == 1
	})
	var owner, other sandbox.Node
	for _, n := range top.Nodes {
		if n.Name == first[0] {
			owner = n
		} else {
			other = n
		}
	}
	if got, want := neighbourMAC(t, sb, ip), uplinkMAC(t, owner); got != want {
		t.Fatalf("the client's neighbour entry for %s is %q, want the announcer %s's %s", ip, got, owner.Name, want)
	}
	// The Service's pods: the survivor's only, so that what is measured
	// is the address moving, not backends on the dead node (nothing here
	// marks them not ready).
	var survivors []sandbox.Pod
	for _, p := range top.EchoBackends() {
		if p.Node == other.Name {
			survivors = append(survivors, p)
		}
	}
	if err := top.WriteManifest("l2web.yaml", externalService("l2web", "LoadBalancer", "Cluster", []string{"10.96.0.40", "fd00:10:96::40"},
		[2]int{30140, 30141}, nil, []string{ip, "fd00:172:30::100"}, survivors)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "only the survivor's pods answering", func() bool {
		for _, r := range fromOutside(t, sb, "tcp", addr, 6, "--timeout", "500ms") {
			if r.Err != "" || !strings.HasPrefix(r.Backend, "n"+strings.TrimPrefix(other.Name, "node")+"p") {
				return false
			}
		}
		return true
	})

	// The announcer dies: nothing from it again.
	if out, err := exec.Command("ip", "-n", owner.Netns, "link", "set", "eth0", "down").CombinedOutput(); err != nil {
		t.Fatalf("%s's uplink down: %v %s", owner.Name, err, out)
	}
	if err := sb.StopAgent(owner.Name, true); err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	// (The dead node's pins keep its entry: a datapath without its link.)
	testenv.WaitFor(t, 10*time.Second, other.Name+" announcing "+ip, func() bool {
		return slices.Contains(top.Announcing(netip.MustParseAddr(ip)), other.Name)
	})
	testenv.WaitFor(t, 10*time.Second, "the client's neighbour entry moved to "+other.Name, func() bool {
		return neighbourMAC(t, sb, ip) == uplinkMAC(t, other)
	})
	t.Logf("%s took %s over and the client's entry moved %s after %s died", other.Name, ip, time.Since(died).Round(time.Millisecond), owner.Name)
	for _, r := range fromOutside(t, sb, "tcp", addr, 10, "--timeout", "500ms") {
		if r.Err != "" {
			t.Errorf("after the takeover: %+v", r)
		}
	}
}
