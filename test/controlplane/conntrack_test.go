package controlplane

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestConntrackGCAndMetrics: the running agent's GC (every
// --conntrack-gc-interval) removes the conntrack entries whose flows have
// timed out and keeps the live ones, and /metrics says so: entries,
// capacity, pressure, removals, and the datapath's own counters.
func TestConntrackGCAndMetrics(t *testing.T) {
	pins := pinDir(t)
	a := startAgent(t, pins, "--conntrack-gc-interval", "1s", "--ct-map-size", "1024", "--conntrack-udp-timeout", "5s")
	flows, err := ebpf.LoadPinnedMap(filepath.Join(pins, ct.MapFlows), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer flows.Close()
	now := ct.Now()
	// 10 UDP flows idle 6 s (past the 5 s given), 5 idle 1 s.
	for i := range 15 {
		idle := time.Second
		if i < 10 {
			idle = 6 * time.Second
		}
		k := datapath.CTKey{Saddr: datapath.AddrFrom(netip.MustParseAddr("10.244.1.1")), Daddr: datapath.AddrFrom(netip.MustParseAddr("10.96.0.1")),
			Sport: datapath.Port(uint16(30000 + i)), Dport: datapath.Port(53), Proto: 17, Dir: datapath.CTService}
		v := datapath.CTEntry{BackendId: 1, RevNatId: 1, LastNs: now - uint64(idle)}
		if err := flows.Put(&k, &v); err != nil {
			t.Fatal(err)
		}
	}
	metric := func(name string) string {
		for _, l := range strings.Split(a.get("/metrics", a.metrics), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == name {
				return f[1]
			}
		}
		return ""
	}
	testenv.WaitFor(t, 10*time.Second, "the GC's sweep", func() bool { return metric("netcube_conntrack_gc_removed_total") == "10" })
	for name, want := range map[string]string{
		"netcube_conntrack_entries":               "5",
		"netcube_conntrack_capacity":              "1024",
		"netcube_conntrack_pressure":              fmt.Sprint(5.0 / 1024),
		"netcube_conntrack_flows_created_total":   "0",
		"netcube_conntrack_insert_failures_total": "0",
	} {
		if got := metric(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	n := 0
	var k datapath.CTKey
	var v datapath.CTEntry
	for it := flows.Iterate(); it.Next(&k, &v); {
		n++
		if datapath.HostPort(k.Sport) < 30010 {
			t.Errorf("a timed-out flow (port %d) is still there", datapath.HostPort(k.Sport))
		}
	}
	if n != 5 {
		t.Errorf("%d entries left, want the 5 live ones", n)
	}
}

// TestConntrackTimeoutFlagsChecked: a timeout the datapath cannot hold is
// refused at start, naming it.
func TestConntrackTimeoutFlagsChecked(t *testing.T) {
	out, err := exec.Command(filepath.Join(binDir, "netcube-agent"), "--manifests", t.TempDir(), "--bpf-root", pinDir(t),
		"--conntrack-tcp-timeout-established", "500ms").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tcpEstablishedTimeout") {
		t.Fatalf("agent with a 500ms established timeout: %v\n%s", err, out)
	}
}
