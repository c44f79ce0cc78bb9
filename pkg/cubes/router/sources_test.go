package router

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestSourceSlots: router_source_slots holds each pod device's addresses
// at slot ifindex % size, both families in one slot, one address written
// twice; two devices a multiple of the size apart leave the slot to the
// lower ifindex (the other is checked by router_sources alone); a pod
// gone empties its slot, and a second pass writes nothing.
func TestSourceSlots(t *testing.T) {
	f := cubetest.New(t, nil, Cube{})
	size := f.Maps.Size(MapSourceSlots)
	if size == 0 || size&(size-1) != 0 {
		t.Fatalf("router_source_slots has %d slots: want a power of two (the BPF masks with it)", size)
	}
	a := func(s string) datapath.Addr { return datapath.AddrFrom(netip.MustParseAddr(s)) }
	pod4, pod6, other4, late4 := a("10.244.1.10"), a("fd00:10:244:1::10"), a("10.244.1.11"), a("10.244.1.12")
	sources := map[datapath.Addr]datapath.RouterSource{
		pod4: {Ifindex: 12}, pod6: {Ifindex: 12}, // dual stack
		other4: {Ifindex: 13},
		late4:  {Ifindex: 13 + size}, // shares slot 13: the lower ifindex keeps it
	}
	if err := PutSources(f.Maps, sources); err != nil {
		t.Fatal(err)
	}
	slot := func(i uint32) datapath.RouterSourceSlot {
		t.Helper()
		var v datapath.RouterSourceSlot
		if err := f.Maps.Map(MapSourceSlots).Lookup(i, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name string
		i    uint32
		want datapath.RouterSourceSlot
	}{
		{"a dual-stack pod", 12, datapath.RouterSourceSlot{Ifindex: 12, Addrs: [2]datapath.Addr{pod4, pod6}}},
		{"a pod of one address, and the slot's other device", 13, datapath.RouterSourceSlot{Ifindex: 13, Addrs: [2]datapath.Addr{other4, other4}}},
		{"no pod", 14, datapath.RouterSourceSlot{}},
	} {
		if got := slot(c.i); got != c.want {
			t.Errorf("%s: slot %d = %+v, want %+v", c.name, c.i, got, c.want)
		}
	}
	var n int
	if err := cube.Each(f.Maps, MapSources, func(datapath.Addr, datapath.RouterSource) bool { n++; return true }); err != nil || n != len(sources) {
		t.Errorf("router_sources holds %d addresses (%v), want all %d: the slots are only a fast path", n, err, len(sources))
	}

	// The pod of slot 13 gone: the device that shared it takes it.
	delete(sources, other4)
	if err := PutSources(f.Maps, sources); err != nil {
		t.Fatal(err)
	}
	if got, want := slot(13), (datapath.RouterSourceSlot{Ifindex: 13 + size, Addrs: [2]datapath.Addr{late4, late4}}); got != want {
		t.Errorf("slot 13 after its pod left: %+v, want %+v", got, want)
	}
	// Every pod gone: every slot empty.
	if err := PutSources(f.Maps, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint32{12, 13} {
		if got := slot(i); got != (datapath.RouterSourceSlot{}) {
			t.Errorf("slot %d with no pods: %+v, want empty", i, got)
		}
	}
}
