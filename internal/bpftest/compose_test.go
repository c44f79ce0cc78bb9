package bpftest

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/testenv"
)

// chains returns the two compositions of eight counting cubes: inlined in
// one program, and one program per cube joined by tail calls.
func chains(t testing.TB, objs *bpfObjects) (inline, tail *ebpf.Program) {
	t.Helper()
	progs := []*ebpf.Program{objs.ChainTail0, objs.ChainTail1, objs.ChainTail2, objs.ChainTail3,
		objs.ChainTail4, objs.ChainTail5, objs.ChainTail6, objs.ChainTail7}
	for i, p := range progs {
		if err := objs.ChainProgs.Put(uint32(i), p); err != nil {
			t.Fatal(err)
		}
	}
	return objs.ChainInline, objs.ChainTail0
}

// counted sums, over CPUs, how often each of the eight cubes ran.
func counted(t testing.TB, objs *bpfObjects) []uint64 {
	t.Helper()
	out := make([]uint64, 8)
	for i := range out {
		var perCPU []uint64
		if err := objs.ChainCounts.Lookup(uint32(i), &perCPU); err != nil {
			t.Fatal(err)
		}
		for _, n := range perCPU {
			out[i] += n
		}
	}
	return out
}

// TestCompositionsRunEveryCube: both chains run each of the eight cubes
// once per packet (so the benchmark compares equal work).
func TestCompositionsRunEveryCube(t *testing.T) {
	h := load(t)
	inline, tail := chains(t, &h.objs)
	for _, p := range []*ebpf.Program{inline, tail} {
		if _, err := p.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range counted(t, &h.objs) {
		if n != 2 {
			t.Errorf("cube %d ran %d times for 2 packets", i, n)
		}
	}
}

// BenchmarkComposition measures a packet through eight cubes composed
// inline and by tail calls, and reports what one tail call adds:
//
//	go test -run XXX -bench Composition ./internal/bpftest
func BenchmarkComposition(b *testing.B) {
	var objs bpfObjects
	testenv.RequireRoot(b)
	if err := loadPrivate(&objs); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	inline, tail := chains(b, &objs)
	const repeat = 2_000_000
	per := func(p *ebpf.Program) float64 {
		best := 0.0
		for range 5 { // the fastest of 5: the machine is shared
			_, d, err := p.Benchmark(make([]byte, 64), repeat, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ns := float64(d.Nanoseconds()); best == 0 || ns < best {
				best = ns
			}
		}
		return best
	}
	for range b.N {
		in, tc := per(inline), per(tail)
		b.ReportMetric(in, "ns/pkt-inline")
		b.ReportMetric(tc, "ns/pkt-tailcalls")
		b.ReportMetric((tc-in)/7, "ns/tail-call")
	}
}
