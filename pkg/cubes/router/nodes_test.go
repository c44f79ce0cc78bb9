package router

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// fakeTable is a route table in memory, with a fault to inject.
type fakeTable struct {
	routes map[netip.Prefix]route
	fail   error
	// offLink: gateways on none of the node's networks (the kernel
	// refuses a route through them, ENETUNREACH).
	offLink map[netip.Addr]bool
}

func (f *fakeTable) Replace(r route) error {
	if f.fail != nil {
		return f.fail
	}
	if f.offLink[r.Via] {
		return fmt.Errorf("route %s via %s: %w", r.Dst, r.Via, syscall.ENETUNREACH)
	}
	f.routes[r.Dst] = r
	return nil
}
func (f *fakeTable) Delete(p netip.Prefix) error {
	if f.fail != nil {
		return f.fail
	}
	delete(f.routes, p)
	return nil
}
func (f *fakeTable) List() ([]route, error) {
	var out []route
	for _, r := range f.routes {
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeTable) String() string {
	var s []string
	for _, r := range f.routes {
		if r.Via.IsValid() {
			s = append(s, fmt.Sprintf("%s via %s", r.Dst, r.Via))
		} else {
			s = append(s, fmt.Sprintf("%s dev %d", r.Dst, r.Dev))
		}
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// problems lists the standing problems by "object reason".
type problems struct{ r *report.Reporter }

func (p problems) get(key string) string {
	for _, pr := range p.r.Standing() {
		if pr.Object.String()+" "+string(pr.Reason) == key {
			return pr.Message
		}
	}
	return ""
}

func node(name string, addrs []string, cidrs ...string) *model.NodeInfo {
	n := &model.NodeInfo{Name: name}
	for _, a := range addrs {
		n.Addresses = append(n.Addresses, netip.MustParseAddr(a))
	}
	for _, c := range cidrs {
		n.PodCIDRs = append(n.PodCIDRs, netip.MustParsePrefix(c))
	}
	return n
}

var addrs2 = []string{"172.30.0.12", "fd00:172:30::12"}

func setup(t *testing.T, mode string) (*nodes, *fakeTable, *cubetest.Fake, problems) {
	f := cubetest.New(t, nil, Cube{})
	tbl := &fakeTable{routes: map[netip.Prefix]route{}}
	probs := problems{&report.Reporter{}}
	env := cube.Env{Maps: f.Maps, Node: model.Node{Name: "node1"}, Report: probs.r}
	n := newNodes(env, mode, 7, tbl)
	n.OnNode("node1", node("node1", []string{"172.30.0.11"}, "10.244.1.0/24", "fd00:10:244:1::/64"))
	return n, tbl, f, probs
}

// entries lists router_nodes as "prefix -> underlay".
func entries(t *testing.T, f *cubetest.Fake) string {
	var s []string
	if err := cube.Each(f.Maps, MapNodes, func(k datapath.Prefix, v datapath.RouterNode) bool {
		s = append(s, fmt.Sprintf("%s -> %s", k.Prefix(), v.Underlay.IP()))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

func TestNativeRoutesFollowNodes(t *testing.T) {
	n, tbl, f, _ := setup(t, Native)
	if len(tbl.routes) != 0 {
		t.Fatalf("this node's own CIDRs routed: %s", tbl)
	}
	n.OnNode("node2", node("node2", addrs2, "10.244.2.0/24", "fd00:10:244:2::/64"))
	if want := "10.244.2.0/24 via 172.30.0.12, fd00:10:244:2::/64 via fd00:172:30::12"; tbl.String() != want {
		t.Fatalf("routes %s, want %s", tbl, want)
	}
	if want := "10.244.2.0/24 -> 172.30.0.12, fd00:10:244:2::/64 -> fd00:172:30::12"; entries(t, f) != want {
		t.Fatalf("router_nodes %s", entries(t, f))
	}
	// Changed: the new CIDR replaces the old.
	n.OnNode("node2", node("node2", addrs2, "10.244.9.0/24"))
	if want := "10.244.9.0/24 via 172.30.0.12"; tbl.String() != want {
		t.Fatalf("routes after a change %s", tbl)
	}
	// Deleted: everything goes.
	n.OnNode("node2", nil)
	if len(tbl.routes) != 0 || f.Len(MapNodes) != 0 {
		t.Fatalf("after deletion: routes %s, %d entries", tbl, f.Len(MapNodes))
	}
}

// TestNodeInAnotherRackIsReachedByTheDefaultRoute: in native routing, a
// node on none of this node's networks (another rack, behind a router)
// gets no route of ours (the kernel would refuse it): its pods go by the
// default route, which the routers make right by BGP; its entry is still
// written (the datapath knows its pods are a node's), and a route of
// ours left from when it was on-link goes. A node on-link (positive
// control) is routed as before.
func TestNodeInAnotherRackIsReachedByTheDefaultRoute(t *testing.T) {
	n, tbl, f, _ := setup(t, Native)
	tbl.offLink = map[netip.Addr]bool{netip.MustParseAddr("172.30.12.13"): true}
	n.OnNode("node2", node("node2", addrs2, "10.244.2.0/24"))
	tbl.routes[netip.MustParsePrefix("10.244.3.0/24")] = route{Dst: netip.MustParsePrefix("10.244.3.0/24"), Via: netip.MustParseAddr("172.30.0.13")}
	n.OnNode("node3", node("node3", []string{"172.30.12.13"}, "10.244.3.0/24"))
	if want := "10.244.2.0/24 via 172.30.0.12"; tbl.String() != want {
		t.Fatalf("routes %s, want %s", tbl, want)
	}
	if want := "10.244.2.0/24 -> 172.30.0.12, 10.244.3.0/24 -> 172.30.12.13"; entries(t, f) != want {
		t.Fatalf("router_nodes %s, want %s", entries(t, f), want)
	}
}

func TestVXLANRoutesThroughTheOverlay(t *testing.T) {
	n, tbl, f, _ := setup(t, VXLAN)
	n.OnNode("node2", node("node2", addrs2, "10.244.2.0/24", "fd00:10:244:2::/64"))
	if want := "10.244.2.0/24 dev 7, fd00:10:244:2::/64 dev 7"; tbl.String() != want {
		t.Fatalf("routes %s, want %s", tbl, want)
	}
	// Both families tunnel to the node's IPv4 address.
	if want := "10.244.2.0/24 -> 172.30.0.12, fd00:10:244:2::/64 -> 172.30.0.12"; entries(t, f) != want {
		t.Fatalf("router_nodes %s", entries(t, f))
	}
}

func TestOverlappingPodCIDRsAreRefused(t *testing.T) {
	n, tbl, _, probs := setup(t, Native)
	n.OnNode("node2", node("node2", addrs2, "10.244.1.128/25")) // overlaps node1 (this node)
	n.OnNode("node3", node("node3", []string{"172.30.0.13"}, "10.244.3.0/24"))
	n.OnNode("node4", node("node4", []string{"172.30.0.14"}, "10.244.3.0/25")) // overlaps node3: later by name
	if want := "10.244.3.0/24 via 172.30.0.13"; tbl.String() != want {
		t.Fatalf("routes %s, want %s", tbl, want)
	}
	for obj, says := range map[string]string{
		"Node node2 PodCIDRConflict": "spec.podCIDRs[0]: 10.244.1.128/25 overlaps node node1's 10.244.1.0/24; not routed",
		"Node node4 PodCIDRConflict": "spec.podCIDRs[0]: 10.244.3.0/25 overlaps node node3's 10.244.3.0/24; not routed",
	} {
		if probs.get(obj) != says {
			t.Errorf("%s: reported %q, want %q", obj, probs.get(obj), says)
		}
	}
	// Fixed: routed, and the report cleared.
	n.OnNode("node2", node("node2", addrs2, "10.244.2.0/24"))
	if !strings.Contains(tbl.String(), "10.244.2.0/24 via 172.30.0.12") || probs.get("Node node2 PodCIDRConflict") != "" {
		t.Fatalf("after the fix: routes %s, report %q", tbl, probs.get("Node node2 PodCIDRConflict"))
	}
}

func TestNodeWithoutAnAddressIsReported(t *testing.T) {
	n, tbl, _, probs := setup(t, Native)
	n.OnNode("node2", node("node2", []string{"172.30.0.12"}, "10.244.2.0/24", "fd00:10:244:2::/64"))
	if want := "10.244.2.0/24 via 172.30.0.12"; tbl.String() != want {
		t.Fatalf("routes %s", tbl)
	}
	if !strings.Contains(probs.get("Node node2 PodCIDRConflict"), "fd00:10:244:2::/64: the node has no address to route it to") {
		t.Fatalf("reported %q", probs.get("Node node2 PodCIDRConflict"))
	}
}

// TestRestartRemovesStaleOnlyAfterSync: routes an earlier agent left stay
// until every Node has been delivered, then only those no node claims go.
func TestRestartRemovesStaleOnlyAfterSync(t *testing.T) {
	n, tbl, f, _ := setup(t, Native)
	left := map[string]string{"10.244.2.0/24": "172.30.0.12", "10.244.5.0/24": "172.30.0.15"}
	for p, via := range left {
		pp := netip.MustParsePrefix(p)
		tbl.routes[pp] = route{Dst: pp, Via: netip.MustParseAddr(via)}
		if err := cube.Put(f.Maps, MapNodes, datapath.PrefixFrom(pp), datapath.RouterNode{Underlay: datapath.AddrFrom(netip.MustParseAddr(via))}); err != nil {
			t.Fatal(err)
		}
	}
	n.OnNode("node2", node("node2", addrs2, "10.244.2.0/24"))
	if len(tbl.routes) != 2 {
		t.Fatalf("before the sync, routes %s", tbl)
	}
	n.OnNodesSynced()
	if want := "10.244.2.0/24 via 172.30.0.12"; tbl.String() != want || entries(t, f) != "10.244.2.0/24 -> 172.30.0.12" {
		t.Fatalf("after the sync: routes %s, entries %s", tbl, entries(t, f))
	}
}

// TestFailedWriteIsRetried: a route that could not be written is written
// at the next change.
func TestFailedWriteIsRetried(t *testing.T) {
	n, tbl, _, _ := setup(t, Native)
	tbl.fail = errors.New("netlink: no buffer space")
	n.OnNode("node2", node("node2", addrs2, "10.244.2.0/24"))
	if len(tbl.routes) != 0 {
		t.Fatal("a failed write left a route")
	}
	tbl.fail = nil
	n.OnNode("node3", node("node3", []string{"172.30.0.13"}, "10.244.3.0/24"))
	if want := "10.244.2.0/24 via 172.30.0.12, 10.244.3.0/24 via 172.30.0.13"; tbl.String() != want {
		t.Fatalf("routes %s, want %s", tbl, want)
	}
}
