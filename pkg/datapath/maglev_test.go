package datapath_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

func maglevBackends(n int) []netip.AddrPort {
	var out []netip.AddrPort
	for i := range n {
		out = append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i / 200), byte(i%200 + 1)}), 8080))
	}
	return out
}

// randomFlows are n distinct client address:ports (seeded: the same every run).
func randomFlows(n int) []netip.AddrPort {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]netip.AddrPort, n)
	for i := range out {
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(r.IntN(256)), byte(r.IntN(256))}), uint16(1024+r.IntN(60000)))
	}
	return out
}

// placeFlows sends a SYN of each flow through from_pod and returns the
// backend each went to. Conntrack is emptied first, so every flow is
// placed afresh by the algorithm.
func placeFlows(tb testing.TB, dp *datapath.Datapath, flows []netip.AddrPort, candidates []netip.AddrPort) []netip.AddrPort {
	tb.Helper()
	clearMap(tb, dp, ct.MapFlows)
	out := make([]netip.AddrPort, len(flows))
	buf := make([]byte, 1600)
	for i, c := range flows {
		in := pkt.TCP(c, vip4, syn, nil)
		opts := runOpts(in, buf)
		if v, err := dp.Programs().FromPod.Run(opts); err != nil || v != actOK {
			tb.Fatalf("flow %s: verdict %d, %v", c, v, err)
		}
		for _, b := range candidates {
			if bytes.Equal(opts.DataOut, pkt.Rewrite(in, c, b)) {
				out[i] = b
				break
			}
		}
		if !out[i].IsValid() {
			tb.Fatalf("flow %s went to no backend", c)
		}
	}
	return out
}

func clearMap(tb testing.TB, dp *datapath.Datapath, name string) {
	tb.Helper()
	m := dp.Maps().Map(name)
	var keys []datapath.CTKey
	var k datapath.CTKey
	var v datapath.CTEntry
	for it := m.Iterate(); it.Next(&k, &v); {
		keys = append(keys, k)
	}
	for _, k := range keys {
		_ = m.Delete(k)
	}
}

func applyMaglev(tb testing.TB, cube *lb.Tables, bs []netip.AddrPort) {
	tb.Helper()
	if err := cube.Apply(model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Flags: model.Maglev, Backends: backends(bs...)}); err != nil {
		tb.Fatal(err)
	}
}

// remapped is the fraction of flows whose backend changed.
func remapped(before, after []netip.AddrPort) float64 {
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
		}
	}
	return float64(moved) / float64(len(before))
}

// TestMaglev: with Maglev a flow's backend is a function of the flow (the
// same again, and the same on another node whose agent learnt the backends
// in another order), flows spread over every backend, and when one of N
// backends is removed only about 1/N of the flows move.
func TestMaglev(t *testing.T) {
	const n = 10
	bs := maglevBackends(n)
	flows := randomFlows(4000)
	dp, cube := load(t)
	applyMaglev(t, cube, bs)
	first := placeFlows(t, dp, flows, bs)
	if again := placeFlows(t, dp, flows, bs); remapped(first, again) != 0 {
		t.Fatalf("%.3f of the flows went elsewhere the second time", remapped(first, again))
	}
	spread := map[netip.AddrPort]int{}
	for _, b := range first {
		spread[b]++
	}
	if len(spread) != n {
		t.Errorf("flows reached %d of %d backends", len(spread), n)
	}

	// Another node: same backends, learnt in the reverse order (other ids).
	dp2, cube2 := load(t)
	reversed := make([]netip.AddrPort, n)
	for i, b := range bs {
		reversed[n-1-i] = b
	}
	applyMaglev(t, cube2, reversed)
	if other := placeFlows(t, dp2, flows, bs); remapped(first, other) != 0 {
		t.Errorf("another node sends %.3f of the flows elsewhere", remapped(first, other))
	}

	// One backend leaves: its flows move, few others do.
	gone := bs[3]
	applyMaglev(t, cube, append(bs[:3:3], bs[4:]...))
	after := placeFlows(t, dp, flows, bs)
	for i := range first {
		if first[i] == gone && after[i] == gone {
			t.Fatalf("flow %s still goes to the removed backend", flows[i])
		}
	}
	frac := remapped(first, after)
	t.Logf("one of %d backends removed: %.3f of the flows remapped (ideal %.3f)", n, frac, 1.0/n)
	if frac > 1.5/n {
		t.Errorf("%.3f of the flows remapped; want about 1/%d", frac, n)
	}
}

// BenchmarkMaglevRemap prints the fraction of flows remapped when one
// backend of N is removed (ideal 1/N), measured with 20,000 flows through
// the datapath (conntrack emptied between the two placements).
func BenchmarkMaglevRemap(b *testing.B) {
	for _, n := range []int{10, 50, 100} {
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			bs := maglevBackends(n)
			flows := randomFlows(20000)
			for b.Loop() {
				dp, cube := load(b)
				applyMaglev(b, cube, bs)
				before := placeFlows(b, dp, flows, bs)
				applyMaglev(b, cube, bs[1:])
				after := placeFlows(b, dp, flows, bs)
				b.ReportMetric(remapped(before, after), "remapped")
				b.ReportMetric(1/float64(n), "ideal")
				dp.Close()
			}
		})
	}
}
