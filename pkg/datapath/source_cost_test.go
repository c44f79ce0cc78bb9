package datapath_test

import (
	"fmt"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
)

// BenchmarkSourceCheck: what from_pod's source check costs a pod's packet
// (BPF_PROG_RUN, the program's own time per packet): a pod-to-pod TCP
// data packet with the check on, its source found in the device's slot
// (router_source_slots, as every pod whose slot no other device holds),
// on, found by the hash alone (router_sources: a pod whose slot another
// device holds), and off, in rounds that start at a different variant
// each so that the machine's drift falls on all three.
//
//	go test -run '^$' -bench BenchmarkSourceCheck -benchtime 5x ./pkg/datapath/
func BenchmarkSourceCheck(b *testing.B) {
	testenv.RequireRoot(b)
	packet := pkt.TCP(client4, pod4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("data"))
	sizes := map[string]uint32{"ct_flows": 4096}
	slot, err := datapath.Load(datapath.Config{MapSizes: sizes})
	if err != nil {
		b.Fatal(err)
	}
	defer slot.Close()
	registerPodSource(b, slot, client4.Addr())
	hash, err := datapath.Load(datapath.Config{MapSizes: sizes})
	if err != nil {
		b.Fatal(err)
	}
	defer hash.Close()
	podSource(b, hash, client4.Addr(), progRunIfindex)
	off, err := loadTrusting(datapath.Config{MapSizes: sizes})
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close()
	variants := []*datapath.Datapath{slot, hash, off}
	const rounds, repeat = 12, 1_000_000
	var sum [3]float64
	for range b.N {
		for r := range rounds {
			for j := range variants {
				i := (j + r) % len(variants)
				v, d, err := variants[i].Programs().FromPod.Benchmark(packet, repeat, nil)
				if err != nil || v == actShot {
					b.Fatalf("verdict %d: %v", v, err)
				}
				sum[i] += float64(d.Nanoseconds())
			}
		}
	}
	n := float64(b.N * rounds)
	on, byHash, none := sum[0]/n, sum[1]/n, sum[2]/n
	b.ReportMetric(on, "ns/pkt-check-slot")
	b.ReportMetric(byHash, "ns/pkt-check-hash")
	b.ReportMetric(none, "ns/pkt-check-off")
	b.ReportMetric(100*(on-none)/none, "%-cost")
	fmt.Printf("source check: by the device's slot %.1f ns (%+.1f%%), by the hash %.1f ns (%+.1f%%), off %.1f ns per packet\n",
		on, 100*(on-none)/none, byHash, 100*(byHash-none)/none, none)
}
