package nat

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

func snatAddr(t *testing.T, maps *cube.Maps, i datapath.NodeAddrIndex) netip.Addr {
	t.Helper()
	a, ok, err := cube.Get[datapath.NodeAddrIndex, datapath.Addr](maps, MapNodeAddrs, i)
	if err != nil || !ok {
		t.Fatalf("node_addrs[%d]: %v %v", i, ok, err)
	}
	if a == (datapath.Addr{}) {
		return netip.Addr{}
	}
	return a.IP()
}

// TestStartWritesSNATAddresses: the node's first address of each family
// is its SNAT address; a family it lacks is written empty (external
// Services of that family with externalTrafficPolicy Cluster stop), and a
// failed write fails the start, naming the map.
func TestStartWritesSNATAddresses(t *testing.T) {
	f := cubetest.New(t, nil, Cube{})
	node := model.Node{Addrs: []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("192.168.1.2")}}
	if _, err := (Cube{}).Start(context.Background(), cube.Env{Maps: f.Maps, Node: node}); err != nil {
		t.Fatal(err)
	}
	if got := snatAddr(t, f.Maps, datapath.NodeAddrV4); got != netip.MustParseAddr("192.168.1.1") {
		t.Errorf("IPv4 SNAT address %s", got)
	}
	if got := snatAddr(t, f.Maps, datapath.NodeAddrV6); got != netip.MustParseAddr("fd00::1") {
		t.Errorf("IPv6 SNAT address %s", got)
	}

	node.Addrs = node.Addrs[1:] // no IPv6 address any more
	if _, err := (Cube{}).Start(context.Background(), cube.Env{Maps: f.Maps, Node: node}); err != nil {
		t.Fatal(err)
	}
	if got := snatAddr(t, f.Maps, datapath.NodeAddrV6); got.IsValid() {
		t.Errorf("IPv6 SNAT address %s left behind", got)
	}

	injected := errors.New("injected")
	f.FailWhen(func(cubetest.Op) error { return injected })
	_, err := (Cube{}).Start(context.Background(), cube.Env{Maps: f.Maps, Node: node})
	if !errors.Is(err, injected) || !strings.Contains(err.Error(), MapNodeAddrs) {
		t.Errorf("start with failing writes: %v, want the failure naming %s", err, MapNodeAddrs)
	}
}
