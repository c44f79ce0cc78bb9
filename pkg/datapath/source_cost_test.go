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
// data packet with the check on (its source registered) and off, in
// alternating rounds so that the machine's drift falls on both.
//
//	go test -run '^$' -bench BenchmarkSourceCheck -benchtime 5x ./pkg/datapath/
func BenchmarkSourceCheck(b *testing.B) {
	testenv.RequireRoot(b)
	packet := pkt.TCP(client4, pod4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("data"))
	on, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{"ct_flows": 4096}})
	if err != nil {
		b.Fatal(err)
	}
	defer on.Close()
	off, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{"ct_flows": 4096}})
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close()
	podSource(b, on, client4.Addr(), progRunIfindex)
	const rounds, repeat = 10, 1_000_000
	var sum [2]float64
	for range b.N {
		for r := range rounds {
			for i, dp := range []*datapath.Datapath{on, off} {
				if r%2 == 1 {
					dp = []*datapath.Datapath{off, on}[i]
					i = 1 - i
				}
				v, d, err := dp.Programs().FromPod.Benchmark(packet, repeat, nil)
				if err != nil || v == actShot {
					b.Fatalf("verdict %d: %v", v, err)
				}
				sum[i] += float64(d.Nanoseconds())
			}
		}
	}
	n := float64(b.N * rounds)
	b.ReportMetric(sum[0]/n, "ns/pkt-check-on")
	b.ReportMetric(sum[1]/n, "ns/pkt-check-off")
	b.ReportMetric(100*(sum[0]-sum[1])/sum[1], "%-cost")
	fmt.Printf("source check: on %.1f ns, off %.1f ns per packet (%+.1f%%)\n", sum[0]/n, sum[1]/n, 100*(sum[0]-sum[1])/sum[1])
}
