package lb

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// backendIDs maps each backend in lb_backends to its id.
func backendIDs(t *testing.T, maps *cube.Maps) map[model.Backend]uint32 {
	t.Helper()
	out := map[model.Backend]uint32{}
	var id uint32
	var b datapath.Backend
	it := maps.Map(MapBackends).Iterate()
	for it.Next(&id, &b) {
		out[backendOf(b)] = id
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// setSweeps plays the conntrack sweep counter (lb_retired's key 0), and
// seen a sweep's stamp on a backend a live flow runs on: what ct_gc.c
// writes (TestConntrackSweepStampsRetiredBackends runs the real one).
func setSweeps(t *testing.T, maps *cube.Maps, n uint32) {
	t.Helper()
	if err := cube.Put(maps, MapRetired, sweepCounter, n); err != nil {
		t.Fatal(err)
	}
}

// TestRetiredBackends: a TCP backend removed from its Service stays in
// lb_backends, in no slot, until two whole conntrack sweeps have found no
// flow on it; a sweep that finds one keeps it longer; re-added before
// that, it is the same backend (its id, so its flows) again. A UDP
// backend is deleted at once, and so is every backend without retiring.
func TestRetiredBackends(t *testing.T) {
	maps := newMaps(t, nil)
	c := New(maps)
	if err := c.EnableRetiring(); err != nil {
		t.Fatal(err)
	}
	tcp, udp := testFrontend(1), testFrontend(2)
	udp.Proto = model.UDP
	three := backendsN(3, 0)
	for _, fe := range []model.Frontend{tcp, udp} {
		if err := c.Upsert(fe, three); err != nil {
			t.Fatal(err)
		}
	}
	before := backendIDs(t, maps)
	if len(before) != 3 {
		t.Fatalf("lb_backends %v: want the three backends (the TCP and UDP ones share their addresses, and the map key is the id)", before)
	}
	setSweeps(t, maps, 7)

	gone := three[2]
	for _, fe := range []model.Frontend{tcp, udp} {
		if err := c.Upsert(fe, three[:2]); err != nil {
			t.Fatal(err)
		}
	}
	if c.Retired() != 1 {
		t.Fatalf("%d retired backends after removing one from a TCP and a UDP Service; want the TCP one", c.Retired())
	}
	var stamp uint32
	var id uint32
	for id = range c.retired {
	}
	if b := c.backends.getID(id); b == nil || backendOf(c.backends.keyOf(b)) != gone || model.Proto(c.backends.keyOf(b).Proto) != model.TCP {
		t.Fatalf("retired backend %d is not %s over TCP", id, gone)
	}
	if err := maps.Map(MapRetired).Lookup(id, &stamp); err != nil || stamp != 7 {
		t.Fatalf("lb_retired[%d] = %d, %v; want the sweep then running, 7", id, stamp, err)
	}
	if !sameSet(c.Backends(tcp), three[:2]) || !sameSet(c.Backends(udp), three[:2]) {
		t.Fatalf("the Services serve %v and %v, want %v", c.Backends(tcp), c.Backends(udp), three[:2])
	}
	checkMaps(t, c)

	expire := func(sweeps uint32, want int) {
		t.Helper()
		setSweeps(t, maps, sweeps)
		n, err := c.ExpireRetired()
		if err != nil || n != want {
			t.Fatalf("at sweep %d: %d expired, %v; want %d", sweeps, n, err, want)
		}
	}
	expire(9, 0) // sweep 8 is whole, 9 may be running: one whole sweep is not enough
	// Sweep 9 finds a flow on it.
	if err := cube.Put(maps, MapRetired, id, uint32(9)); err != nil {
		t.Fatal(err)
	}
	expire(11, 0)
	var b datapath.Backend
	if err := maps.Map(MapBackends).Lookup(id, &b); err != nil {
		t.Fatalf("retired backend %d left lb_backends while a flow ran on it: %v", id, err)
	}
	expire(12, 1) // sweeps 10 and 11 found none
	if err := maps.Map(MapBackends).Lookup(id, &b); err == nil {
		t.Fatalf("retired backend %d still in lb_backends", id)
	}
	if err := maps.Map(MapRetired).Lookup(id, &stamp); err == nil {
		t.Fatalf("expired backend %d still in lb_retired", id)
	}
	checkMaps(t, c)

	// Removed and re-added before it expires: the same id, not retired.
	if err := c.Upsert(tcp, three); err != nil {
		t.Fatal(err)
	}
	again := backendIDs(t, maps)[gone]
	if err := c.Upsert(tcp, three[:2]); err != nil {
		t.Fatal(err)
	}
	if err := c.Upsert(tcp, three); err != nil {
		t.Fatal(err)
	}
	if got := backendIDs(t, maps)[gone]; got != again || c.Retired() != 0 {
		t.Fatalf("re-added while retired: id %d (was %d), %d retired; want the same id and none retired", got, again, c.Retired())
	}
	if err := maps.Map(MapRetired).Lookup(again, &stamp); err == nil {
		t.Fatalf("backend %d, in service again, still in lb_retired", again)
	}
	expire(100, 0)
	if !sameSet(c.Backends(tcp), three) {
		t.Fatalf("the TCP Service serves %v, want %v", c.Backends(tcp), three)
	}
	checkMaps(t, c)

	// A restart: retired backends are unclaimed, and retire afresh.
	if err := c.Upsert(tcp, three[:2]); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.EnableRetiring(); err != nil {
		t.Fatal(err)
	}
	if err := r.Upsert(tcp, three[:2]); err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseUnclaimed(); err != nil {
		t.Fatal(err)
	}
	if r.Retired() != 1 {
		t.Fatalf("after a restart, %d retired; want the one removed before it", r.Retired())
	}
	checkMaps(t, r)

	// Without retiring, a backend nobody holds goes at once.
	plain := New(newMaps(t, nil))
	if err := plain.Upsert(tcp, three); err != nil {
		t.Fatal(err)
	}
	if err := plain.Upsert(tcp, three[:2]); err != nil {
		t.Fatal(err)
	}
	if n := len(backendIDs(t, plain.maps)); n != 2 || plain.Retired() != 0 {
		t.Fatalf("without retiring: %d backends, %d retired; want 2 and none", n, plain.Retired())
	}
}

// TestConntrackSweepStampsRetiredBackends: the real conntrack sweep
// (ct_gc.c) over the real maps counts its sweeps and stamps a retired
// backend that a live flow uses, so that it stays, while one without a
// flow expires after two sweeps; once its flow has timed out, the other
// goes too.
func TestConntrackSweepStampsRetiredBackends(t *testing.T) {
	testenv.RequireRoot(t)
	cfg := ct.Defaults()
	cfg.TCPEstablished.Duration = 200 * time.Second
	for ct.Now() < uint64(220*time.Second) { // just booted: a flow cannot be older than the clock
		time.Sleep(time.Second)
	}
	vars, err := cfg.Variables()
	if err != nil {
		t.Fatal(err)
	}
	dp, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{ct.MapFlows: 64}, Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	maps := dp.Maps()
	gc, err := ct.NewGC(dp.Program("ct_gc"), maps.Map(ct.MapFlows), maps.Map(ct.MapStats))
	if err != nil {
		t.Fatal(err)
	}
	c := New(maps)
	if err := c.EnableRetiring(); err != nil {
		t.Fatal(err)
	}
	fe := testFrontend(1)
	two := backendsN(2, 0)
	if err := c.Upsert(fe, two); err != nil {
		t.Fatal(err)
	}
	ids := backendIDs(t, maps)
	used, unused := ids[two[0]], ids[two[1]]
	flow := datapath.CTKey{Saddr: datapath.AddrFrom(netip.MustParseAddr("10.244.1.1")), Daddr: datapath.AddrFrom(fe.Addr),
		Sport: datapath.Port(40000), Dport: datapath.Port(fe.Port), Proto: 6, Dir: datapath.CTService}
	entry := datapath.CTEntry{BackendId: used, RevNatId: 1, LastNs: ct.Now(), State: datapath.CTReplied}
	if err := maps.Map(ct.MapFlows).Update(&flow, &entry); err != nil {
		t.Fatal(err)
	}
	if err := c.Upsert(fe, nil); err != nil {
		t.Fatal(err)
	}
	if c.Retired() != 2 {
		t.Fatalf("%d retired, want both backends", c.Retired())
	}
	sweep := func(n int) {
		t.Helper()
		for range n {
			if _, err := gc.Sweep(); err != nil {
				t.Fatal(err)
			}
		}
	}
	sweep(3)
	if n, _ := c.sweeps(); n != 3 {
		t.Fatalf("sweep counter %d after 3 sweeps", n)
	}
	var stamp uint32
	if err := maps.Map(MapRetired).Lookup(used, &stamp); err != nil || stamp != 3 {
		t.Fatalf("lb_retired[%d], with a live flow on it: %d, %v; want the last sweep's stamp, 3", used, stamp, err)
	}
	if n, err := c.ExpireRetired(); err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want the backend without a flow", n, err)
	}
	var b datapath.Backend
	if err := maps.Map(MapBackends).Lookup(used, &b); err != nil {
		t.Fatalf("the backend a live flow runs on left lb_backends: %v", err)
	}
	if err := maps.Map(MapBackends).Lookup(unused, &b); err == nil {
		t.Fatal("the backend without a flow is still in lb_backends")
	}

	// The flow times out (idle past the established timeout): the sweep
	// removes it, and two more find the backend unused.
	entry.LastNs = ct.Now() - uint64(210*time.Second)
	if err := maps.Map(ct.MapFlows).Update(&flow, &entry); err != nil {
		t.Fatal(err)
	}
	sweep(3)
	if n, err := c.ExpireRetired(); err != nil || n != 1 {
		t.Fatalf("after the flow timed out: expired %d, %v; want its backend", n, err)
	}
	if len(backendIDs(t, maps)) != 0 || c.Retired() != 0 {
		t.Fatalf("lb_backends %v, %d retired; want both empty", backendIDs(t, maps), c.Retired())
	}
}
