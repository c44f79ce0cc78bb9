package integration

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
)

// TestRouterRejectsHijackedRoutes: the routed sandbox's router imports
// from each node only what that node may announce (lab/sandbox/bird.go).
// node1 is compromised: its agent is stopped and another BGP speaker
// takes its session, announcing node2's pod CIDRs (and longer prefixes
// inside them), default routes and addresses outside every Service range,
// beside a few routes node1 may announce. The router installs only the
// latter, lists the rest as filtered, and node2's pods stay reached
// through node2.
func TestRouterRejectsHijackedRoutes(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil {
		t.Fatal("BIRD 2 is not installed: hack/install-deps.sh installs it (Debian: bird2)")
	}
	sb := upWith(t, "rh", sandbox.Config{Routed: true})
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	var hijackLog syncBuffer
	// On failure, the router's view: once, while the hijacker still runs
	// (its cleanup calls this first; the one here covers a failure before
	// it started).
	dump := sync.OnceFunc(func() {
		if t.Failed() {
			for _, args := range [][]string{{"show", "protocols", "all"}, {"show", "route", "all"}, {"show", "route", "filtered", "all"}} {
				out, _ := sb.Birdc(args...)
				t.Logf("birdc %s:\n%s", strings.Join(args, " "), out)
			}
			b, _ := os.ReadFile(filepath.Join(top.LogDir(), "bird.log"))
			t.Logf("router's bird log:\n%s", b)
			t.Logf("hijacker's bird log:\n%s", hijackLog.String())
		}
	})
	t.Cleanup(dump)

	// Positive control: the agents' own announcements all pass the
	// filters: the pod CIDRs via their node, a Cluster policy Service's
	// external and LoadBalancer IPs via both, and nothing filtered.
	all := top.EchoBackends()
	if err := top.WriteManifest("hijack-lb.yaml", externalService("public", "LoadBalancer", "Cluster",
		[]string{"10.96.0.30", "fd00:10:96::30"}, [2]int{30080, 30081},
		[]string{"192.0.2.10", "2001:db8::10"}, []string{"198.51.100.7", "2001:db8::7"}, all)); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, sb, func(n sandbox.Node, st string) bool { return st == "Established" }, "Established")
	both4, both6 := []string{node1.IP4.String(), node2.IP4.String()}, []string{node1.IP6.String(), node2.IP6.String()}
	slices.Sort(both4)
	slices.Sort(both6)
	legit := map[string][]string{
		node1.PodNet.String(): {node1.IP4.String()}, node1.PodNet6.String(): {node1.IP6.String()},
		node2.PodNet.String(): {node2.IP4.String()}, node2.PodNet6.String(): {node2.IP6.String()},
		"192.0.2.10/32": both4, "198.51.100.7/32": both4, "2001:db8::10/128": both6, "2001:db8::7/128": both6,
	}
	within(t, 30*time.Second, "the agents' routes in the router's FIB", func() error { return routerHas(top, legit) })
	if filtered, err := top.BirdPrefixes("filtered"); err != nil || len(filtered) > 0 {
		t.Fatalf("the router filtered what the agents announce: %v (%v)", filtered, err)
	}
	reachNode2 := func(what string) {
		t.Helper()
		server := node2.Pods[0]
		k2, _ := top.Rack(node2.Rack)
		before := txPackets(t, top.Router.Netns, k2.RouterIf)
		for _, a := range []netip.Addr{server.IP4, server.IP6} {
			addr := net.JoinHostPort(a.String(), strconv.Itoa(sandbox.PodPort))
			for _, r := range fromOutside(t, sb, "tcp", addr, 3) {
				if r.Err != "" || r.Backend != server.Name {
					t.Errorf("%s: external -> %s: %+v, want an answer from %s", what, addr, r, server.Name)
				}
			}
		}
		if after := txPackets(t, top.Router.Netns, k2.RouterIf); after-before < 6 {
			t.Errorf("%s: the router sent %d packets into rack %s for 6 requests to node2's pod", what, after-before, k2.Name)
		}
	}
	reachNode2("before the hijack")

	// The compromised node. The router's BIRD peers with each node's
	// address and is passive, so a hijacker must connect from node1's own
	// address, as node1: its agent is stopped (the datapath runs on) and a
	// second BIRD in node1's namespace takes the session. Any BGP speaker
	// on a node that is not netcube's would do; BIRD is at hand and runs
	// as its own process in the namespace, which GoBGP in the test
	// process could not (its sockets follow whichever thread dials).
	if err := sb.StopAgent(node1.Name, false); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, sb, func(n sandbox.Node, st string) bool {
		return (n.Name == node1.Name) != (st == "Established")
	}, "node1's agent gone")
	mayAnnounce := map[string][]string{ // the filters let these through: the session is really imported from
		node1.PodNet.String(): {node1.IP4.String()}, node1.PodNet6.String(): {node1.IP6.String()},
		"198.51.100.50/32": {node1.IP4.String()}, "2001:db8::50/128": {node1.IP6.String()},
	}
	hijacks := []string{
		node2.PodNet.String(), node2.PodNet6.String(), // ECMP with node2: half its pods' traffic
		"10.244.2.0/25", "fd00:10:244:2::/65", // longer than node2's: all of it
		"0.0.0.0/0", "::/0",
		"203.0.113.66/32", "2001:db8:1::66/128", // outside every Service range
		"198.51.100.0/24", // a whole Service range, not a host route in it
	}
	k1, _ := top.Rack(node1.Rack)
	startHijacker(t, sb, node1, k1, append(slices.Collect(maps.Keys(mayAnnounce)), hijacks...), &hijackLog, dump)
	waitSessions(t, sb, func(n sandbox.Node, st string) bool { return st == "Established" }, "the hijacker established as node1")

	// Positive control on the hijacker's own session: what node1 may
	// announce is installed, via node1 (198.51.100.50 and 2001:db8::50
	// nothing else announces).
	within(t, 30*time.Second, "the hijacker's allowed routes in the router's FIB", func() error { return routerHas(top, mayAnnounce) })
	// Every hijack reached the router and its filter rejected it.
	within(t, 10*time.Second, "the hijacks among node1's filtered routes", func() error {
		filtered, err := top.BirdPrefixes("filtered", "protocol", "node1")
		if err != nil {
			return err
		}
		for _, h := range hijacks {
			if !slices.Contains(filtered, netip.MustParsePrefix(h)) {
				return fmt.Errorf("%s not filtered (filtered: %v)", h, filtered)
			}
		}
		return nil
	})
	// None of them is among the routes BIRD learned from node1, nor in
	// the router's FIB (but node2's pod CIDRs, which node2 announces:
	// still via node2 alone), and node2's pods answer from node2.
	fromNode1, err := top.BirdPrefixes("protocol", "node1")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hijacks {
		if slices.Contains(fromNode1, netip.MustParsePrefix(h)) {
			t.Errorf("birdc show route protocol node1 lists the hijacked %s", h)
		}
	}
	for _, fam := range []int{4, 6} {
		routes, err := top.RouterRoutes(fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hijacks {
			if hops, ok := routes[h]; ok && h != node2.PodNet.String() && h != node2.PodNet6.String() {
				t.Errorf("the router installed the hijacked %s via %v", h, hops)
			}
		}
	}
	if err := routerHas(top, map[string][]string{
		node2.PodNet.String(): {node2.IP4.String()}, node2.PodNet6.String(): {node2.IP6.String()},
	}); err != nil {
		t.Errorf("node2's pod CIDRs during the hijack: %v", err)
	}
	reachNode2("during the hijack")
}

// routerHas checks that the router's FIB routes each prefix via exactly
// the given next hops.
func routerHas(top sandbox.Topology, want map[string][]string) error {
	for _, fam := range []int{4, 6} {
		routes, err := top.RouterRoutes(fam)
		if err != nil {
			return err
		}
		for p, hops := range want {
			if netip.MustParsePrefix(p).Addr().Is4() != (fam == 4) {
				continue
			}
			if got := routes[p]; !slices.Equal(got, hops) {
				return fmt.Errorf("%s: next hops %v, want %v", p, got, hops)
			}
		}
	}
	return nil
}

// startHijacker runs BIRD in node n's namespace as a BGP speaker posing as
// n (its address, its ASN) towards its rack's router, announcing routes
// (as static blackholes: it has no kernel protocol, so node n's own
// routing table is untouched). It is stopped when the test ends, after
// beforeStop and before the sandbox goes (whose down would kill it too,
// as a process in its namespace).
func startHijacker(t *testing.T, sb *sandbox.Sandbox, n sandbox.Node, k sandbox.Rack, routes []string, log *syncBuffer, beforeStop func()) {
	t.Helper()
	dir := t.TempDir()
	var conf strings.Builder
	// The device protocol: BIRD opens a direct eBGP session only once it
	// knows the interface the neighbor is on.
	fmt.Fprintf(&conf, "log stderr all;\nrouter id %s;\n\nprotocol device {\n}\n\n", n.IP4)
	for _, fam := range []string{"4", "6"} {
		fmt.Fprintf(&conf, "protocol static hijack%s {\n\tipv%s;\n", fam, fam)
		for _, r := range routes {
			if netip.MustParsePrefix(r).Addr().Is4() == (fam == "4") {
				fmt.Fprintf(&conf, "\troute %s blackhole;\n", r)
			}
		}
		conf.WriteString("}\n\n")
	}
	// An IPv6 route over the IPv4 session needs its IPv6 next hop given,
	// as netcube's speaker gives it (the node's address on the rack).
	fmt.Fprintf(&conf, "protocol bgp rack {\n\tlocal %s as %d;\n\tneighbor %s as %d;\n\tconnect delay time 1;\n\tconnect retry time 1;\n"+
		"\tipv4 { import none; export all; };\n\tipv6 { import none; export all; next hop address %s; };\n}\n",
		n.IP4, sandbox.NodeASN, k.Router4, sandbox.RouterASN, n.IP6)
	file := filepath.Join(dir, "hijack.conf")
	if err := os.WriteFile(file, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bird", "-p", "-c", file).CombinedOutput(); err != nil {
		t.Fatalf("bird -p -c %s: %v: %s\n%s", file, err, out, conf.String())
	}
	cmd := exec.Command("bird", "-f", "-c", file, "-s", filepath.Join(dir, "bird.ctl"), "-P", filepath.Join(dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := sb.Start(n.Name, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		beforeStop()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// syncBuffer is a log a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
