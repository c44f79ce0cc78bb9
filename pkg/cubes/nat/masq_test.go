package nat

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

func noMasq(t *testing.T, f *cubetest.Fake) string {
	var s []string
	if err := cube.Each(f.Maps, MapNoMasq, func(k datapath.Prefix, _ uint8) bool {
		s = append(s, k.Prefix().String())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func nodeInfo(name string, addrs []string, cidrs ...string) *model.NodeInfo {
	n := &model.NodeInfo{Name: name}
	for _, a := range addrs {
		n.Addresses = append(n.Addresses, netip.MustParseAddr(a))
	}
	for _, c := range cidrs {
		n.PodCIDRs = append(n.PodCIDRs, netip.MustParsePrefix(c))
	}
	return n
}

// TestNoMasqueradeIsTheCluster: pods keep their address towards every
// node's pod CIDRs and addresses and the configured ranges; a node's
// entries go with it once the nodes are synced (not before: a node not
// delivered yet must not have its pods' traffic masqueraded); off is ::/0.
func TestNoMasqueradeIsTheCluster(t *testing.T) {
	f := cubetest.New(t, nil, Cube{})
	extra := []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
	st, err := (Cube{}).Start(context.Background(), cube.Env{Maps: f.Maps,
		Settings: cube.Settings{Masquerade: true, NoMasquerade: extra}})
	if err != nil {
		t.Fatal(err)
	}
	if got := noMasq(t, f); got != "192.168.0.0/16" {
		t.Fatalf("at start: %s", got)
	}
	st.Nodes.OnNode("node1", nodeInfo("node1", []string{"172.30.0.11"}, "10.244.1.0/24", "fd00:10:244:1::/64"))
	st.Nodes.OnNode("node2", nodeInfo("node2", []string{"172.30.0.12", "fd00:172:30::12"}, "10.244.2.0/24"))
	want := "10.244.1.0/24 10.244.2.0/24 172.30.0.11/32 172.30.0.12/32 192.168.0.0/16 fd00:10:244:1::/64 fd00:172:30::12/128"
	if got := noMasq(t, f); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	st.Nodes.OnNode("node2", nil)
	if got := noMasq(t, f); got != want {
		t.Fatalf("a node removed before the sync: %s", got)
	}
	st.Nodes.OnNodesSynced()
	if got, want := noMasq(t, f), "10.244.1.0/24 172.30.0.11/32 192.168.0.0/16 fd00:10:244:1::/64"; got != want {
		t.Fatalf("after the sync: got %s, want %s", got, want)
	}

	off := cubetest.New(t, nil, Cube{})
	st, err = (Cube{}).Start(context.Background(), cube.Env{Maps: off.Maps, Settings: cube.Settings{Masquerade: false}})
	if err != nil {
		t.Fatal(err)
	}
	st.Nodes.OnNode("node1", nodeInfo("node1", []string{"172.30.0.11"}, "10.244.1.0/24"))
	if got := noMasq(t, off); got != "::/0" {
		t.Fatalf("masquerading off: %s", fmt.Sprint(got))
	}
}
