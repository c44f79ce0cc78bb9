package datapath_test

import (
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestEachCubeCountsItsPackets: a packet is counted (once, with its
// bytes) by each cube it crossed and by no other (monitor_cubes): a
// Service's SYN to a backend of this node by lb, ct, nat, policy (the
// backend is selected) and router; its reply by the same five; pod to pod
// by policy and router only; a refused one by lb; a packet no cube acts on
// nowhere. With the counting off, nothing is counted (after the positive
// control of the same packet counted with it on).
func TestEachCubeCountsItsPackets(t *testing.T) {
	dp, tables := load(t)
	maps := dp.Maps()
	setNodeAddrs(t, dp)
	apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Backends: backends(be4b)})
	apply(t, tables, model.FrontendBackends{Frontend: frontend(vip6, model.TCP)}) // no endpoints
	endpoint(t, dp, be4b.Addr(), 7)
	endpoint(t, dp, client4.Addr(), 8)
	// The backend is selected by a policy (of egress only: it receives
	// anything, and what it is sent is recorded).
	if err := cube.Put(maps, policy.MapEndpoints, datapath.AddrFrom(be4b.Addr()),
		datapath.PolicyEndpoint{Id: 1, Flags: datapath.IsolatedEgress}); err != nil {
		t.Fatal(err)
	}
	if err := monitor.SetFlags(maps, datapath.MonFlagCubes); err != nil {
		t.Fatal(err)
	}

	syn4 := pkt.TCP(client4, vip4, syn, nil)
	reply := pkt.TCP(be4b, client4, synAck, nil)
	for _, c := range []struct {
		name    string
		prog    string
		in      []byte
		verdict uint32
		cubes   string // the cubes it crosses, sorted
	}{
		{"pod -> Service, backend on this node", "from_pod", syn4, actRedirect, "ct lb nat policy router"},
		{"its reply, into the client", "from_pod", reply, actRedirect, "ct lb nat policy router"},
		{"pod -> pod of this node", "from_pod", pkt.TCP(client4, be4b, syn, nil), actRedirect, "policy router"},
		{"a Service without endpoints: refused", "from_pod", pkt.TCP(client6, vip6, syn, nil), actRedirect, "lb"},
		{"leaving the uplink, nobody's flow", "to_net", pkt.TCP(node4AP, ext4, syn, nil), actOK, ""},
	} {
		before := traffic(t, maps)
		if v := runProg(t, program(dp, c.prog), c.in); v != c.verdict {
			t.Fatalf("%s: verdict %d, want %d", c.name, v, c.verdict)
		}
		after := traffic(t, maps)
		var crossed []string
		for name, a := range after {
			b := before[name]
			switch {
			case a == b:
			case a.Packets == b.Packets+1 && a.Bytes == b.Bytes+uint64(len(c.in)):
				crossed = append(crossed, name)
			default:
				t.Errorf("%s: %s counted %+v -> %+v, want one packet of %d bytes or nothing", c.name, name, b, a, len(c.in))
			}
		}
		sort.Strings(crossed)
		if got := strings.Join(crossed, " "); got != c.cubes {
			t.Errorf("%s: counted by %q, want %q", c.name, got, c.cubes)
		}
	}

	// Counting off: the reply again, counted by nobody.
	if err := monitor.SetFlags(maps, 0); err != nil {
		t.Fatal(err)
	}
	before := traffic(t, maps)
	runProg(t, dp.Program("from_pod"), reply)
	if after := traffic(t, maps); !equalTraffic(before, after) {
		t.Errorf("with counting off: %v -> %v", before, after)
	}
}

var node4AP = netip.AddrPortFrom(node4, 50000)

func traffic(t *testing.T, maps *cube.Maps) map[string]monitor.Traffic {
	t.Helper()
	tr, err := monitor.CubeTraffic(maps.Map(monitor.MapCubes))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != int(datapath.MonCubeMax) {
		t.Fatalf("%d cubes counted, want %d (TestEveryCubeIsNamed)", len(tr), datapath.MonCubeMax)
	}
	return tr
}

func equalTraffic(a, b map[string]monitor.Traffic) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}
