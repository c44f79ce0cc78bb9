package adversarial

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestSYNFloodKeepsEstablishedFlows: a host outside floods a NodePort
// with SYNs from spoofed sources, four times as many flows as node1's
// conntrack holds (1,024 entries here; each flood flow would hold two for
// the 60 s SYN timeout, and the backend's SYN-ACKs to the spoofed sources
// are never completed). The connections established before it keep
// answering, from their backends, and new connections from the host are
// served during it: the table gives up flood flows for them (early drop,
// counted), never an established one. Positive controls first: the held
// connections answer and a new connection is served before the flood.
// (The same table with early drop off refuses the new connections:
// pkg/datapath TestConntrackEarlyDrop; the figures under load:
// docs/benchmarks/synflood.md.)
func TestSYNFloodKeepsEstablishedFlows(t *testing.T) {
	const table, held, floodFlows = 1024, 100, 2048
	sb := up(t, "adv-syn", sandbox.Config{Nodes: 2, PodsPerNode: 1,
		AgentArgs: []string{fmt.Sprintf("--ct-map-size=%d", table)}})
	top := sb.Topology
	node := top.Nodes[0]
	const nodePort = 30190
	if err := top.WriteManifest("flood.yaml", localService("flood", "10.96.0.190", nodePort, 0, node.Pods)); err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(node.IP4, nodePort)
	testenv.WaitFor(t, 20*time.Second, "the NodePort", func() bool {
		return request(t, sb, top.External.Name, "tcp", addr.String(), 1, "--timeout", "300ms")[0].Err == ""
	})

	h, open, err := sb.StartHold(filepath.Join(binDir, sandbox.LabBinary), top.External.Name, "tcp", addr.String(), held)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if open.Held != held {
		t.Fatalf("opening %d connections: %+v", held, open)
	}
	if rep, err := h.Check(); err != nil || rep.Held != held {
		t.Fatalf("positive control: the held connections before the flood: %+v, %v", rep, err)
	}

	// The flood: spoofed sources in 198.18.0.0/15, a port each.
	syn := pkt.TCPOpts{SYN: true, Seq: 7, Window: 64240}
	var frames [][]byte
	for i := range floodFlows {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}), uint16(10000+i%50000))
		frames = append(frames, pkt.TCP(src, addr, syn, nil))
	}
	for len(frames) > 0 { // (in batches: the command line's length)
		n := min(len(frames), 256)
		send(t, sb, top.External.Name, "", frames[:n]...)
		frames = frames[n:]
	}

	evicted := ctCounter(t, node.PinDir, datapath.CTStatEarlyDrop)
	if evicted < floodFlows/2 {
		t.Errorf("only %d flows evicted: the flood of %d flows did not fill the table of %d entries", evicted, floodFlows, table)
	}
	for i, r := range request(t, sb, top.External.Name, "tcp", addr.String(), 20, "--timeout", "1s") {
		if r.Err != "" {
			t.Errorf("new connection %d during the flood failed: %s", i, r.Err)
		}
	}
	rep, err := h.Check()
	if err != nil || rep.Held != held {
		t.Errorf("the held connections after the flood: %+v, %v (want all %d held)", rep, err, held)
	}
	t.Logf("flood: %d spoofed SYNs; node1: %d flows evicted, %d not written", floodFlows,
		ctCounter(t, node.PinDir, datapath.CTStatEarlyDrop), ctCounter(t, node.PinDir, datapath.CTStatInsertFailed))
}

// ctCounter sums counter stat of a node's ct_stats over its CPUs.
func ctCounter(t *testing.T, pinDir string, stat datapath.CTStat) uint64 {
	t.Helper()
	maps, closeMaps, err := datapath.OpenPinned(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps()
	return cube.PerCPUSum(maps.Map(ct.MapStats), uint32(stat))
}
