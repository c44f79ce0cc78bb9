package trace

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

var (
	client = netip.MustParseAddrPort("10.244.1.11:40000")
	vip    = netip.MustParseAddrPort("10.96.0.10:80")
	empty  = netip.MustParseAddrPort("10.96.0.20:80")
	maglev = netip.MustParseAddrPort("10.96.0.30:80")
	be     = netip.MustParseAddrPort("10.244.1.21:8080")
)

// TestTraceReadsTheNodeAndChangesNothing: a pinned datapath with a
// Service whose backend is a pod of the node; the trace of a pod's packet
// to it shows the load balancer's choice and the delivery into the backend
// pod, and its reply translated back; one to a Service without endpoints
// is refused; one to a Maglev Service finds its table; the node's own
// conntrack is untouched.
func TestTraceReadsTheNodeAndChangesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	pins := filepath.Join("/sys/fs/bpf", testenv.Name("trace"))
	t.Cleanup(func() { _ = os.RemoveAll(pins) })
	dp, err := loadTrusting(datapath.Config{PinDir: pins, MapSizes: map[string]uint32{"ct_flows": 4096}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	tables := lb.New(dp.Maps())
	for _, fb := range []model.FrontendBackends{
		{Frontend: model.Frontend{Addr: vip.Addr(), Port: vip.Port(), Proto: model.TCP}, Backends: []model.Backend{{Addr: be.Addr(), Port: be.Port()}}},
		{Frontend: model.Frontend{Addr: empty.Addr(), Port: empty.Port(), Proto: model.TCP}},
		{Frontend: model.Frontend{Addr: maglev.Addr(), Port: maglev.Port(), Proto: model.TCP}, Flags: model.Maglev,
			Backends: []model.Backend{{Addr: be.Addr(), Port: be.Port()}}},
	} {
		if err := tables.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range []netip.Addr{client.Addr(), be.Addr()} {
		ep := datapath.RouterEndpoint{Ifindex: uint32(100 + i), PodMac: [6]byte{2, 0xaa, 0, 0, 0, byte(i)}, HostMac: [6]byte{2, 0xbb, 0, 0, 0, byte(i)}}
		if err := cube.Put(dp.Maps(), router.MapEndpoints, datapath.AddrFrom(a), ep); err != nil {
			t.Fatal(err)
		}
		// The pods' own addresses, on the device BPF_PROG_RUN gives a
		// packet (loopback; 100+i exist nowhere).
		if err := cube.Put(dp.Maps(), router.MapSources, datapath.AddrFrom(a), datapath.RouterSource{Ifindex: 1}); err != nil {
			t.Fatal(err)
		}
	}

	tr, err := New(pins)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r, err := tr.Trace(Packet{Proto: "TCP", Src: client, Dst: vip, SYN: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Way.Delivered != be || len(r.Way.Hops) != 1 || r.Way.Hops[0].Program != "from_pod" || r.Way.Hops[0].Verdict != "into the pod" {
		t.Fatalf("way %+v, want delivered into the pod %s by from_pod", r.Way, be)
	}
	lbSeen := false
	for _, e := range r.Way.Hops[0].Events {
		lbSeen = lbSeen || (e.Trace == "service-backend" && e.To == be)
	}
	if !lbSeen {
		t.Errorf("no load-balancer event naming %s: %+v", be, r.Way.Hops[0].Events)
	}
	if r.Reply == nil || r.Reply.Delivered != client || r.Reply.Hops[len(r.Reply.Hops)-1].Out.Src != vip {
		t.Errorf("reply %+v, want delivered to %s from %s", r.Reply, client, vip)
	}

	r, err = tr.Trace(Packet{Proto: "TCP", Src: client, Dst: empty, SYN: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Way.Refused || r.Reply != nil || r.Way.Hops[0].Out == nil || !r.Way.Hops[0].Out.RST {
		t.Errorf("to a Service without endpoints: %+v, want refused with a RST", r.Way)
	}

	// A Maglev Service: its table (a map of maps) was copied too.
	r, err = tr.Trace(Packet{Proto: "TCP", Src: client, Dst: maglev, SYN: true})
	if err != nil || r.Way.Delivered != be {
		t.Errorf("to a Maglev Service: %+v, %v; want delivered to %s", r.Way, err, be)
	}

	// The node's own maps: no flow was written by the traces.
	n := 0
	var k datapath.CTKey
	var v datapath.CTEntry
	for it := dp.Maps().Map(ct.MapFlows).Iterate(); it.Next(&k, &v); {
		n++
	}
	if n != 0 {
		t.Errorf("the node's conntrack holds %d entries after the traces, want 0", n)
	}
	// ... while the copy's does (the control: the trace did create them).
	n = 0
	for it := tr.Maps().Map(ct.MapFlows).Iterate(); it.Next(&k, &v); {
		n++
	}
	if n == 0 {
		t.Error("the copy's conntrack holds nothing: the trace wrote nowhere")
	}
}
