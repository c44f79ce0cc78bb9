package sandbox

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBirdImportFilters runs the routed sandbox's import filters in a real
// BIRD: node1's filters see, as static routes, everything the sandbox's
// nodes announce today (which must pass) and what a compromised node1
// could announce (which must not). No BGP, no namespaces: BIRD runs with
// a control socket in a temporary directory and no kernel protocol, so it
// touches no routing table; TestRouterRejectsHijackedRoutes
// (test/integration) runs the same filters on the router's BGP sessions.
func TestBirdImportFilters(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bird not found: hack/install-deps.sh installs bird2")
		}
		t.Skip("bird not found (Debian: bird2)")
	}
	top := Layout(Config{Name: "x", Nodes: 3, Routed: true}, "/sys/fs/cgroup")
	node1 := top.Nodes[0]
	accept := []string{
		// node1's own pod CIDRs, exactly.
		node1.PodNet.String(), node1.PodNet6.String(),
		// What TestRoutedRacksThroughBGP's Services announce (external
		// and LoadBalancer IPs), and the failover benchmark's LB IP.
		"192.0.2.10/32", "2001:db8::10/128", "198.51.100.7/32", "2001:db8::7/128",
		"198.51.100.8/32", "2001:db8::8/128", "198.51.100.80/32",
		// Host routes in the sandbox's LoadBalancer pool.
		"172.30.0.241/32", "fd00:172:30::f1/128",
	}
	reject := []string{
		// Other nodes' pod CIDRs, and a longer prefix inside one (which
		// would win by longest match even beside the real route).
		top.Nodes[1].PodNet.String(), top.Nodes[1].PodNet6.String(), top.Nodes[2].PodNet.String(),
		"10.244.2.128/25", "fd00:10:244:2::/65",
		// node1's own pod CIDR in pieces or inside a wider one: only the
		// CIDR its Node has.
		"10.244.1.0/25", "10.244.0.0/16", "fd00:10:244::/48",
		// Default routes, and whole Service ranges rather than host
		// routes in them.
		"0.0.0.0/0", "::/0", "198.51.100.0/24", "172.30.0.240/28", "2001:db8::/64",
		// Addresses outside every Service range: another documentation
		// range, ClusterIPs (no peering of the sandbox advertises them),
		// a rack's subnet.
		"203.0.113.66/32", "2001:db8:1::66/128", "10.96.0.10/32", "fd00:10:96::10/128", "172.30.12.0/24",
	}

	dir := t.TempDir()
	var conf strings.Builder
	conf.WriteString("log stderr all;\nrouter id 192.0.2.1;\n")
	conf.WriteString(top.birdImportFilters())
	for _, fam := range []string{"4", "6"} {
		fmt.Fprintf(&conf, "\nprotocol static announced%s {\n\tipv%s { import filter node1_import%s; import keep filtered on; };\n", fam, fam, fam)
		for _, p := range append(slices.Clone(accept), reject...) {
			if netip.MustParsePrefix(p).Addr().Is4() == (fam == "4") {
				fmt.Fprintf(&conf, "\troute %s blackhole;\n", p)
			}
		}
		conf.WriteString("}\n")
	}
	confFile, sock := filepath.Join(dir, "bird.conf"), filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(confFile, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bird", "-p", "-c", confFile).CombinedOutput(); err != nil {
		t.Fatalf("bird -p: %v: %s\n%s", err, out, conf.String())
	}
	var log strings.Builder
	bird := exec.Command("bird", "-f", "-c", confFile, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	bird.Stdout, bird.Stderr = &log, &log
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bird.Process.Kill()
		_ = bird.Wait()
		if t.Failed() {
			t.Logf("bird log:\n%s", log.String())
		}
	})
	show := func(args ...string) []string {
		t.Helper()
		var out []byte
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			out, err = exec.Command("birdc", append([]string{"-s", sock, "show", "route"}, args...)...).CombinedOutput()
			if err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("birdc show route %v: %v: %s", args, err, out)
		}
		var ps []string
		for _, p := range parseBirdPrefixes(string(out)) {
			ps = append(ps, p.String())
		}
		slices.Sort(ps)
		return ps
	}
	// The static routes are in once both protocols are up.
	var accepted, filtered []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		accepted, filtered = show(), show("filtered")
		if len(accepted)+len(filtered) == len(accept)+len(reject) || time.Now().After(deadline) {
			break
		}
	}
	want := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = netip.MustParsePrefix(p).Masked().String()
		}
		slices.Sort(out)
		return out
	}
	// Positive control first: everything the nodes announce today passes.
	if !slices.Equal(accepted, want(accept)) {
		t.Errorf("node1's filters accepted %v, want %v", accepted, want(accept))
	}
	// Everything else was seen and rejected (kept aside, not dropped
	// unseen).
	if !slices.Equal(filtered, want(reject)) {
		t.Errorf("node1's filters rejected %v, want %v", filtered, want(reject))
	}
}

func TestParseBirdPrefixes(t *testing.T) {
	out := "Table master4:\n10.244.1.0/24        unicast [node1 10:00:00.000] * (100) [AS64512i]\n\tvia 172.30.11.11 on rack1\n" +
		"198.51.100.7/32      unicast [node1 10:00:00.000] * (100) [AS64512i]\n\tvia 172.30.11.11 on rack1\n" +
		"                     unicast [node2 10:00:01.000] (100) [AS64512i]\n\tvia 172.30.12.12 on rack2\n\n" +
		"Table master6:\nfd00:10:244:1::/64   unicast [node1 10:00:00.000] * (100) [AS64512i]\n\tvia fd00:172:30:11::11 on rack1\n"
	got := parseBirdPrefixes(out)
	want := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}
