package datapath_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// BenchmarkPacketPaths: the programs' own time per packet (BPF_PROG_RUN)
// on the paths every pod's packets take, as nodes run them (the source
// check on): pod->pod out of the sender (from_pod) and into the receiver
// (to_pod), and pod->Service on an established flow (from_pod: the flow's
// conntrack entries found and refreshed, the packet translated). It is
// written to compile against earlier trees too (hack/bench-packet-ab.sh
// runs it at two commits, alternating, with a registerPodSource of each
// tree's own), so it uses only what they share. NETCUBE_PACKET_COST_OUT,
// if set, names a file its figures are appended to as one JSON line.
//
//	go test -run '^$' -bench BenchmarkPacketPaths -benchtime 1x ./pkg/datapath/
func BenchmarkPacketPaths(b *testing.B) {
	testenv.RequireRoot(b)
	dp, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{"ct_flows": 4096}})
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	if err := lb.New(dp.Maps()).Upsert(frontend(vip4, model.TCP), backends(be4)); err != nil {
		b.Fatal(err)
	}
	registerPodSource(b, dp, client4.Addr())
	progs := dp.Programs()
	data := pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}
	// The Service flow, established: SYN, SYN-ACK, ACK.
	for _, s := range []struct {
		toPod bool
		p     []byte
	}{
		{false, pkt.TCP(client4, vip4, syn, nil)},
		{true, pkt.TCP(be4, client4, synAck, nil)},
		{false, pkt.TCP(client4, vip4, data, nil)},
	} {
		prog := progs.FromPod
		if s.toPod {
			prog = progs.ToPod
		}
		if v, _, err := prog.Benchmark(s.p, 1, nil); err != nil || v == actShot {
			b.Fatalf("the Service flow's handshake: verdict %d, %v", v, err)
		}
	}
	paths := []struct {
		name   string
		run    func() (float64, error)
		repeat int
	}{
		{"from_pod pod->pod", repeated(progs.FromPod.Benchmark, pkt.TCP(client4, pod4, data, []byte("data"))), 1},
		{"to_pod pod->pod", repeated(progs.ToPod.Benchmark, pkt.TCP(client4, pod4, data, []byte("data"))), 1},
		// One run per call: repeated runs would see the packet as the
		// first run rewrote it.
		{"from_pod pod->Service", once(progs.FromPod.Benchmark, pkt.TCP(client4, vip4, data, []byte("data"))), 200_000},
	}
	const rounds = 5
	sums := make([]float64, len(paths))
	for range b.N {
		for r := range rounds {
			for i := range paths {
				i = (i + r) % len(paths) // each round starts at another path
				var sum float64
				for range paths[i].repeat {
					ns, err := paths[i].run()
					if err != nil {
						b.Fatalf("%s: %v", paths[i].name, err)
					}
					sum += ns
				}
				sums[i] += sum / float64(paths[i].repeat)
			}
		}
	}
	out := map[string]float64{}
	for i, p := range paths {
		out[p.name] = sums[i] / float64(b.N*rounds)
		fmt.Printf("%s: %.1f ns per packet\n", p.name, out[p.name])
	}
	if f := os.Getenv("NETCUBE_PACKET_COST_OUT"); f != "" {
		line, _ := json.Marshal(out)
		w, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		fmt.Fprintf(w, "%s\n", line)
	}
}

type benchmarkFunc = func(in []byte, repeat int, reset func()) (uint32, time.Duration, error)

// repeated is a path measured as 1,000,000 runs in the kernel, for a
// packet no run rewrites.
func repeated(bench benchmarkFunc, packet []byte) func() (float64, error) {
	return func() (float64, error) {
		v, d, err := bench(packet, 1_000_000, nil)
		if err == nil && v == actShot {
			err = fmt.Errorf("dropped")
		}
		return float64(d.Nanoseconds()), err
	}
}

// once is a path measured one run at a time.
func once(bench benchmarkFunc, packet []byte) func() (float64, error) {
	return func() (float64, error) {
		v, d, err := bench(packet, 1, nil)
		if err == nil && v == actShot {
			err = fmt.Errorf("dropped")
		}
		return float64(d.Nanoseconds()), err
	}
}
