package policy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestConnectionPolicyCost prints, packet by packet, what the benchmark's
// policies add to from_pod over a whole TCP connection between two pods
// of this node (the sender egress-isolated, the receiver
// ingress-isolated, as in `netcube-lab bench policy`): its opening, one
// request and one response, its close. Each connection is new (a new
// client port), so its keys meet the maps as a new connection's do; the
// modes alternate in blocks of connections: no policy, the policies with
// verdict events off, and on (the agent's default; the events are read
// between blocks, as the agent reads them), and on with 100 Admin-tier and
// 100 Baseline-tier ClusterNetworkPolicies selecting both pods (withTiers). BPF_PROG_RUN's time of each
// packet, medians over the blocks. A figure, not a timed assertion: `go
// test ./pkg/cubes/policy -run ConnectionPolicyCost -v`.
func TestConnectionPolicyCost(t *testing.T) {
	dp, c, server, on := sameNodePair(t)
	s := netip.AddrPortFrom(server, 8080)
	const actRedirect, block, blocks = 7, 200, 15
	type step struct {
		name  string
		reply bool // server to client
		o     pkt.TCPOpts
		data  bool
	}
	conn := []step{
		{"SYN", false, pkt.TCPOpts{SYN: true, Seq: 1}, false},
		{"SYN-ACK", true, pkt.TCPOpts{SYN: true, ACK: true, Seq: 100, Ack: 2}, false},
		{"ACK", false, pkt.TCPOpts{ACK: true, Seq: 2, Ack: 101}, false},
		{"request", false, pkt.TCPOpts{ACK: true, Seq: 2, Ack: 101}, true},
		{"response", true, pkt.TCPOpts{ACK: true, Seq: 101, Ack: 3}, true},
		{"FIN", false, pkt.TCPOpts{FIN: true, ACK: true, Seq: 3, Ack: 102}, false},
		{"FIN-ACK", true, pkt.TCPOpts{FIN: true, ACK: true, Seq: 102, Ack: 4}, false},
		{"last ACK", false, pkt.TCPOpts{ACK: true, Seq: 4, Ack: 103}, false},
	}
	modes := []string{"no policy", "policies, events off", "policies, events on", "+ 200 CNPs, events on"}
	tiers := withTiers(t, server)
	drain := eventDrain(t, dp)
	per := make([][][]float64, len(modes)) // mode, step, block
	for m := range per {
		per[m] = make([][]float64, len(conn))
	}
	next := uint16(20000)
	have := &policy.Tables{}
	for b := range blocks * len(modes) {
		m := b % len(modes)
		want, flags := on, datapath.MonFlagDrops
		switch m {
		case 0:
			want = &policy.Tables{}
		case 2:
			flags |= datapath.MonFlagPolicy
		case 3:
			want, flags = tiers, flags|datapath.MonFlagPolicy
		}
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		have = want
		if err := monitor.SetFlags(dp.Maps(), flags); err != nil {
			t.Fatal(err)
		}
		drain()
		sum := make([]time.Duration, len(conn))
		for range block {
			cp := netip.AddrPortFrom(c, next)
			next++
			for i, st := range conn {
				src, dst := cp, s
				if st.reply {
					src, dst = s, cp
				}
				var payload []byte
				if st.data {
					payload = []byte("x")
				}
				v, d, err := dp.Programs().FromPod.Benchmark(pkt.TCP(src, dst, st.o, payload), 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				if v != actRedirect {
					t.Fatalf("%s, %s: not delivered (verdict %d)", modes[m], st.name, v)
				}
				sum[i] += d
			}
		}
		for i := range conn {
			per[m][i] = append(per[m][i], float64(sum[i].Nanoseconds())/block)
		}
		// The policies were in force: a port they do not allow is refused.
		denied := netip.AddrPortFrom(server, 8081)
		if v := runProg(t, dp.Programs().FromPod, pkt.TCP(netip.AddrPortFrom(c, next), denied, pkt.TCPOpts{SYN: true, Seq: 1}, nil)); (v == actRedirect) != (m == 0) {
			t.Fatalf("%s: a SYN to port 8081 got verdict %d: the figures would not be of the mode printed", modes[m], v)
		}
		next++
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	var out strings.Builder
	total := make([]float64, len(modes))
	fmt.Fprintf(&out, "from_pod per packet of a same-node connection, ns (medians of %d blocks of %d connections):\n", blocks, block)
	fmt.Fprintf(&out, "%-9s %10s %21s %20s %22s\n", "packet", modes[0], modes[1], modes[2], modes[3])
	for i, st := range conn {
		fmt.Fprintf(&out, "%-9s", st.name)
		for m := range modes {
			v := median(per[m][i])
			total[m] += v
			fmt.Fprintf(&out, " %*.0f", len(modes[m]), v)
		}
		out.WriteString("\n")
	}
	fmt.Fprintf(&out, "%-9s %10.0f %21.0f %20.0f %22.0f (policies add %.0f ns off, %.0f ns on; the ClusterNetworkPolicies %+.0f ns per connection: the connections/s that implies, %.3f of NetworkPolicy alone's)",
		"total", total[0], total[1], total[2], total[3], total[1]-total[0], total[2]-total[0], total[3]-total[2], total[2]/total[3])
	t.Log(out.String())
}
