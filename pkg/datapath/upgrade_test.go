package datapath_test

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/faultrec"
	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestUpgradeCarriesConntrackOver: an agent whose conntrack entries have a
// new layout (the lifecycle's state and last-packet time: 48 bytes, where
// the earlier agent's were 40) starts on a node where the earlier agent
// pinned its table: the entries are carried over, upgraded, and the
// established flow keeps its backend, as it does when the table is resized
// (--ct-map-size changed). Without the carry-over the agent would refuse
// to start, or, started afresh, balance every flow again.
func TestUpgradeCarriesConntrackOver(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	pins := filepath.Join(datapath.BPFFS, testenv.Name("netcube-test-upgrade-"))
	t.Cleanup(func() {
		if err := datapath.Unpin(pins); err != nil {
			t.Error(err)
		}
	})
	cfg := func(ctSize uint32) datapath.Config {
		return datapath.Config{PinDir: pins, Cubes: cubes.All, MapSizes: map[string]uint32{
			"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, ct.MapFlows: ctSize,
		}}
	}

	// The earlier agent: a Service of eight backends and one answered flow.
	dp, err := loadTrusting(cfg(1024))
	if err != nil {
		t.Fatal(err)
	}
	var bes []netip.AddrPort
	for i := range 8 {
		bes = append(bes, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 2, byte(21 + i)}), 8080))
	}
	if err := lb.New(dp.Maps()).Upsert(frontend(vip4, model.TCP), backends(bes...)); err != nil {
		t.Fatal(err)
	}
	first := backendOf(t, dp, client4, vip4, bes...)
	reply := pkt.TCP(first, client4, synAck, nil)
	run(t, dp, step{name: "the reply", toPod: true, in: reply, verdict: actOK, out: pkt.Rewrite(reply, vip4, client4)})

	// ... whose table had the first layout: rewritten so, pinned in its place.
	var keys []datapath.CTKey
	var olds [][]byte
	it := dp.Maps().Map(ct.MapFlows).Iterate()
	var k datapath.CTKey
	var v datapath.CTEntry
	for it.Next(&k, &v) {
		raw := make([]byte, unsafe.Sizeof(v))
		if _, err := binary.Encode(raw, binary.NativeEndian, v); err != nil {
			t.Fatal(err)
		}
		keys, olds = append(keys, k), append(olds, raw[:40])
	}
	if len(keys) != 2 {
		t.Fatalf("the flow has %d entries; want 2", len(keys))
	}
	dp.Close()
	path := filepath.Join(pins, ct.MapFlows)
	cur, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.Unpin(); err != nil {
		t.Fatal(err)
	}
	cur.Close()
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: ct.MapFlows, Type: ebpf.LRUHash, KeySize: uint32(unsafe.Sizeof(k)), ValueSize: 40, MaxEntries: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if err := old.Put(keys[i], olds[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Pin(path); err != nil {
		t.Fatal(err)
	}
	old.Close()

	// The new agent, then one with a bigger table: the flow stays on its
	// backend, its entries upgraded.
	for _, size := range []uint32{1024, 4096} {
		dp, err := loadTrusting(cfg(size))
		if err != nil {
			t.Fatalf("load over the earlier table (size %d): %v", size, err)
		}
		svc := keys[0]
		if svc.Dir != datapath.CTService {
			svc = keys[1]
		}
		var e datapath.CTEntry
		if err := dp.Maps().Map(ct.MapFlows).Lookup(&svc, &e); err != nil {
			t.Fatalf("size %d: the flow's entry was not carried over: %v", size, err)
		}
		if e.State&datapath.CTReplied == 0 || e.LastNs == 0 {
			t.Errorf("size %d: carried entry %+v: want it answered and seen", size, e)
		}
		if got := dp.Maps().Map(ct.MapFlows).MaxEntries(); got != size {
			t.Errorf("table size %d, want %d", got, size)
		}
		data := pkt.TCP(client4, vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("after the upgrade"))
		run(t, dp, step{name: "the flow's next packet", in: data, verdict: actOK, out: pkt.Rewrite(data, client4, first)})
		run(t, dp, step{name: "its reply", toPod: true, in: pkt.TCP(first, client4, pkt.TCPOpts{ACK: true, Seq: 5001, Ack: 1018, Window: 502}, nil),
			verdict: actOK, out: pkt.Rewrite(pkt.TCP(first, client4, pkt.TCPOpts{ACK: true, Seq: 5001, Ack: 1018, Window: 502}, nil), vip4, client4)})
		dp.Close()
	}
	faultrec.Write(t, faultrec.Record{Fault: "conntrack layout upgrade (40 to 48 bytes), then a resize (1024 to 4096)", Path: "tc",
		Held: 1, Note: "datapath level (BPF_PROG_RUN), one flow of eight backends; under traffic: TestAgentUpgradeUnderTraffic"})
}

// TestUpgradeRestartsCounters: an earlier agent's monitor_drops had fewer
// reasons (a smaller array): this agent starts over it, with the drops
// counted afresh in a map of its own size, where a map without Restart of
// another size stops the agent (the positive control of the check).
func TestUpgradeRestartsCounters(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	pins := filepath.Join(datapath.BPFFS, testenv.Name("netcube-test-restart-"))
	t.Cleanup(func() {
		if err := datapath.Unpin(pins); err != nil {
			t.Error(err)
		}
	})
	cfg := datapath.Config{PinDir: pins, Cubes: cubes.All, MapSizes: map[string]uint32{
		"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, ct.MapFlows: 1024,
	}}
	dp, err := loadTrusting(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dp.Close()
	// Pins of an earlier layout: monitor_drops with 3 reasons, and
	// lb_source_ranges (no Restart, no Upgrade) of another size.
	repin := func(name string, entries uint32) {
		t.Helper()
		path := filepath.Join(pins, name)
		cur, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cur.Info()
		if err != nil {
			t.Fatal(err)
		}
		if err := cur.Unpin(); err != nil {
			t.Fatal(err)
		}
		cur.Close()
		old, err := ebpf.NewMap(&ebpf.MapSpec{Type: cur.Type(), KeySize: cur.KeySize(), ValueSize: cur.ValueSize(),
			MaxEntries: entries, Flags: info.Flags})
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		if err := old.Pin(path); err != nil {
			t.Fatal(err)
		}
	}
	repin(lb.MapSourceRanges, 7)
	if _, err := loadTrusting(cfg); err == nil {
		t.Fatal("an lb_source_ranges pin of another size was reused or replaced; want the load refused")
	}
	if err := os.Remove(filepath.Join(pins, lb.MapSourceRanges)); err != nil {
		t.Fatal(err)
	}
	repin(monitor.MapDrops, 3)
	dp, err = loadTrusting(cfg)
	if err != nil {
		t.Fatalf("load over an earlier monitor_drops: %v", err)
	}
	defer dp.Close()
	m, err := ebpf.LoadPinnedMap(filepath.Join(pins, monitor.MapDrops), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := m.MaxEntries(), uint32(datapath.MonDropMax); got != want {
		t.Errorf("monitor_drops pinned with %d entries, want %d (this agent's)", got, want)
	}
}
