package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/faultrec"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/datapath"
)

// holder is `netcube-lab pod hold` running in a pod (sandbox.Holder),
// its errors the test's.
type holder struct {
	h *sandbox.Holder
}

func startHold(t *testing.T, sb *sandbox.Sandbox, pod, proto, addr string, count int) (*holder, traffic.HoldReport) {
	t.Helper()
	h, rep, err := sb.StartHold(filepath.Join(binDir, sandbox.LabBinary), pod, proto, addr, count)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return &holder{h}, rep
}

// check sends one request on every held connection.
func (h *holder) check(t *testing.T) traffic.HoldReport {
	t.Helper()
	rep, err := h.h.Check()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// ctStats sums a node's conntrack counters (ct_stats) and counts its
// entries.
func ctStats(t *testing.T, pinDir string) (created, closed, failed uint64, entries int) {
	t.Helper()
	maps, closeMaps, err := datapath.OpenPinned(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps()
	sum := func(s datapath.CTStat) uint64 {
		var perCPU []uint64
		if err := maps.Map(ct.MapStats).Lookup(uint32(s), &perCPU); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		return n
	}
	var k datapath.CTKey
	var v datapath.CTEntry
	for it := maps.Map(ct.MapFlows).Iterate(); it.Next(&k, &v); {
		entries++
	}
	return sum(datapath.CTStatCreated), sum(datapath.CTStatClosed), sum(datapath.CTStatInsertFailed), entries
}

// wideClientPorts lets a pod open connections as fast as it can: TIME_WAIT
// ports reused, and a wide range of them.
func wideClientPorts(t *testing.T, sb *sandbox.Sandbox, pod string) {
	t.Helper()
	if out, err := sb.Output(pod, "sysctl", "-q", "-w", "net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=1024 65000"); err != nil {
		t.Fatalf("sysctl: %v: %s", err, out)
	}
}

// TestConntrackChurnKeepsIdleFlows: on the tc path, 1,000 idle long-lived
// connections through a Service keep their backends while ten times the
// conntrack table's size in short connections (closed the normal way,
// with FINs) churn through it, and while the Service gains an endpoint
// halfway: a lost entry would send an idle flow's next packet to a
// backend chosen afresh, most likely another one, which resets it. The
// short flows leave the table at their close, so the idle flows are
// never the LRU's victims.
func TestConntrackChurnKeepsIdleFlows(t *testing.T) {
	table := 4096 // entries: two per flow
	if faultrec.Long() {
		table = 32768
	}
	sb := upWith(t, "tct", sandbox.Config{AgentArgs: []string{"--ct-map-size", strconv.Itoa(table)}})
	client := sb.Topology.ClientPod()
	wideClientPorts(t, sb, client.Name)
	backends := sb.Topology.EchoBackends()
	ips := []string{"10.96.0.50", "fd00:10:96::50"}
	write := func(bes []sandbox.Pod) {
		t.Helper()
		if err := sb.Topology.WriteManifest("churn.yaml", sandbox.ServiceYAML("churn", ips, sandbox.EchoPorts)+"---\n"+
			sandbox.SliceYAML("churn", false, sandbox.EndpointPorts, bes)+"---\n"+
			sandbox.SliceYAML("churn", true, sandbox.EndpointPorts, bes)); err != nil {
			t.Fatal(err)
		}
	}
	write(backends[:2])
	addr := "10.96.0.50:80"
	testenv.WaitFor(t, 10*time.Second, addr, func() bool {
		return requests(t, sb, "tcp", addr, 1, "--timeout", "200ms")[0].Err == ""
	})

	h, open := startHold(t, sb, client.Name, "tcp", addr, 1000)
	if open.Held != 1000 {
		t.Fatalf("opening 1,000 connections: %+v", open)
	}
	if rep := h.check(t); rep.Held != 1000 { // positive control: they answer
		t.Fatalf("the held connections before the churn: %+v", rep)
	}
	pins := sb.Topology.Nodes[0].PinDir
	if sb.Topology.Nodes[0].Name != client.Node {
		t.Fatalf("the client pod is on %s, not the first node", client.Node)
	}
	created0, _, _, _ := ctStats(t, pins)

	churn := func(n int) (errs int, rate float64) {
		start := time.Now()
		for _, r := range requests(t, sb, "tcp", addr, n, "--fin") {
			if r.Err != "" {
				if errs++; errs <= 3 {
					t.Logf("short connection %d (from %s) failed: %s (%s)", r.Seq, r.Local, r.Err, r.TCP)
				}
			}
		}
		return errs, float64(n) / time.Since(start).Seconds()
	}
	half := 10 * table / 2
	errs1, rate1 := churn(half)
	write(backends) // a third endpoint joins
	time.Sleep(500 * time.Millisecond)
	errs2, rate2 := churn(half)
	created, closed, failed, entries := ctStats(t, pins)
	t.Logf("churn: %d short connections (%.0f/s, %.0f/s), %d and %d failed; conntrack: %d flows written, %d closed by the datapath, %d not written, %d entries left of %d",
		2*half, rate1, rate2, errs1, errs2, created-created0, closed, failed, entries, table)
	if created-created0 < uint64(2*half) {
		t.Fatalf("only %d flows went through conntrack; the churn did not pass the tc path", created-created0)
	}
	if errs1+errs2 > 0 {
		t.Errorf("%d of %d short connections failed", errs1+errs2, 2*half)
	}
	logTCPCounters(t, sb, append([]sandbox.Pod{client}, backends...)...)

	rep := h.check(t)
	faultrec.Write(t, faultrec.Record{Fault: fmt.Sprintf("%d short connections (10x the conntrack table) and an endpoint added", 2*half),
		Path: "tc", Held: rep.Held, Lost: rep.Lost + rep.Moved, NewConnections: 2 * half, NewErrors: errs1 + errs2,
		Note: fmt.Sprintf("%.0f connections/s; %d of %d table entries left", (rate1+rate2)/2, entries, table)})
	if rep.Held != 1000 {
		t.Errorf("idle connections broken by the churn: %+v", rep)
	}
}

// logTCPCounters logs each pod's TCP counters that are not zero (the pods'
// namespaces are the test's own, so they count its traffic alone): what
// the kernels at both ends saw of a failure (retransmits, resets, listen
// queue drops, PAWS rejects).
func logTCPCounters(t *testing.T, sb *sandbox.Sandbox, pods ...sandbox.Pod) {
	t.Helper()
	for _, p := range pods {
		// -a: since the namespace was made, -s: no history file (it is
		// shared by every namespace).
		out, err := sb.Output(p.Name, "nstat", "-a", "-s")
		if err != nil {
			t.Logf("%s: nstat: %v", p.Name, err)
			continue
		}
		var counters []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && (strings.HasPrefix(f[0], "Tcp") || strings.HasPrefix(f[0], "IpIn") || strings.HasPrefix(f[0], "Ip6In")) {
				counters = append(counters, f[0]+"="+f[1])
			}
		}
		t.Logf("%s TCP counters: %s", p.Name, strings.Join(counters, " "))
	}
}

// TestAgentKillUnderLoad: the agent is killed (-9) and restarted while
// 1,000 long-lived connections (500 IPv4, 500 IPv6) are held through a
// Service and short connections are opened as fast as the client can, on
// both paths: no held connection breaks, no new connection fails (the
// datapath runs on without the agent), and the restarted agent is ready
// within seconds.
func TestAgentKillUnderLoad(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sb := up(t, path.socketLB)
			client := sb.Topology.ClientPod()
			wideClientPorts(t, sb, client.Name)
			loadFor, down := 8*time.Second, 2*time.Second
			if faultrec.Long() {
				loadFor, down = 40*time.Second, 20*time.Second
			}
			var converge time.Duration
			held, lost, total := underLoad(t, sb, loadFor, func() {
				if err := sb.StopAgent(client.Node, true); err != nil {
					t.Fatal(err)
				}
				time.Sleep(down)
				restart := time.Now()
				if err := sb.StartAgent(client.Node); err != nil {
					t.Fatal(err)
				}
				converge = time.Since(restart)
			})
			faultrec.Write(t, faultrec.Record{Fault: fmt.Sprintf("agent kill -9, down %s, restarted", down), Path: path.name, Held: held, Lost: lost,
				NewConnections: total.Requests, NewErrors: total.Errors, ConvergeSeconds: converge.Seconds()})
			if total.Errors > 0 {
				t.Errorf("%d of %d short connections failed across the kill (first: %s)", total.Errors, total.Requests, total.FirstErr)
			}
		})
	}
}

// underLoad runs fault while the client pod holds 500 connections to each
// of the echo Service's ClusterIPs (IPv4 and IPv6, each answered once:
// the positive control) and opens new ones to both as fast as it can for
// loadFor (the fault starts 2 s in). It fails t for each held connection
// the fault broke, and returns the held and lost ones, and the new ones.
func underLoad(t *testing.T, sb *sandbox.Sandbox, loadFor time.Duration, fault func()) (held, lost int, total traffic.Summary) {
	t.Helper()
	client := sb.Topology.ClientPod()
	addrs := []string{"10.96.0.10:80", "[fd00:10:96::10]:80"}
	var holds []*holder
	for _, a := range addrs {
		h, open := startHold(t, sb, client.Name, "tcp", a, 500)
		if open.Held != 500 {
			t.Fatalf("%s: opening 500 connections: %+v", a, open)
		}
		holds = append(holds, h)
	}
	type result struct {
		s   traffic.Summary
		err error
	}
	results := make(chan result, len(addrs))
	for _, a := range addrs {
		go func() {
			out, err := sb.Output(client.Name, filepath.Join(binDir, sandbox.LabBinary), "pod", "load", "--duration", loadFor.String(), a)
			var s traffic.Summary
			if err == nil {
				err = json.Unmarshal(out, &s)
			}
			results <- result{s, err}
		}()
	}
	time.Sleep(2 * time.Second)
	fault()
	for range addrs {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		total.Requests += r.s.Requests
		total.Errors += r.s.Errors
		if total.FirstErr == "" {
			total.FirstErr = r.s.FirstErr
		}
	}
	if total.Requests < 1000 {
		t.Fatalf("only %d new connections in %s: too few to tell", total.Requests, loadFor)
	}
	for i, h := range holds {
		rep := h.check(t)
		held, lost = held+rep.Held, lost+rep.Lost+rep.Moved
		if rep.Held != 500 {
			t.Errorf("%s: held connections broken: %+v", addrs[i], rep)
		}
	}
	return held, lost, total
}
