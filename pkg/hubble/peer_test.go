package hubble

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble/peerpb"
	"github.com/netcube/netcube/pkg/model"
)

func node(name string, addrs ...string) *model.NodeInfo {
	n := &model.NodeInfo{Name: name, Labels: map[string]string{}}
	for _, a := range addrs {
		n.Addresses = append(n.Addresses, netip.MustParseAddr(a))
	}
	return n
}

// servePeers serves peers (and an Observer) on a unix socket and returns
// a Peer client over real gRPC.
func servePeers(t *testing.T, peers *Peers) peerpb.PeerClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	socket := filepath.Join(t.TempDir(), "hubble.sock")
	if err := New(Config{Node: "node1", Hub: events.NewHub(), Names: names(), Peers: peers}).Serve(ctx, socket, TCP{}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return peerpb.NewPeerClient(conn)
}

// TestPeersNotify: a Notify client is told every node known (PEER_ADDED,
// address <InternalIP>:<port>, the TLS server name) and then each node
// that joins, changes address or leaves, and not of a change that moves
// no address.
func TestPeersNotify(t *testing.T) {
	peers := NewPeers(PeersConfig{Port: 4244, TLS: true})
	peers.OnNode("node1", node("node1", "fd00::1", "10.0.0.1")) // IPv4 preferred
	peers.OnNode("node2.example", node("node2.example", "10.0.0.2"))
	peers.OnNode("bare", node("bare")) // no address: no peer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := servePeers(t, peers).Notify(ctx, &peerpb.NotifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *peerpb.ChangeNotification {
		t.Helper()
		cn, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return cn
	}
	got := map[string]*peerpb.ChangeNotification{}
	for range 2 {
		cn := recv()
		got[cn.GetName()] = cn
	}
	for name, want := range map[string][2]string{
		"node1":         {"10.0.0.1:4244", "node1.default.hubble-grpc.cilium.io"},
		"node2.example": {"10.0.0.2:4244", "node2-example.default.hubble-grpc.cilium.io"},
	} {
		cn := got[name]
		if cn.GetType() != peerpb.ChangeNotificationType_PEER_ADDED || cn.GetAddress() != want[0] || cn.GetTls().GetServerName() != want[1] {
			t.Errorf("%s at start: %v, want PEER_ADDED %s %s", name, cn, want[0], want[1])
		}
	}
	expect := func(step string, typ peerpb.ChangeNotificationType, name, addr string) {
		t.Helper()
		cn := recv()
		if cn.GetType() != typ || cn.GetName() != name || cn.GetAddress() != addr {
			t.Errorf("%s: told %v, want %v %s %s", step, cn, typ, name, addr)
		}
	}
	peers.OnNode("node3", node("node3", "10.0.0.3"))
	expect("node3 joins", peerpb.ChangeNotificationType_PEER_ADDED, "node3", "10.0.0.3:4244")
	relabelled := node("node1", "fd00::1", "10.0.0.1")
	relabelled.Labels["rack"] = "b"
	peers.OnNode("node1", relabelled) // same address: nothing to tell
	peers.OnNode("node2.example", node("node2.example", "10.0.0.22"))
	expect("node2's address changes", peerpb.ChangeNotificationType_PEER_UPDATED, "node2.example", "10.0.0.22:4244")
	peers.OnNode("node3", nil)
	expect("node3 leaves", peerpb.ChangeNotificationType_PEER_DELETED, "node3", "10.0.0.3:4244")
	peers.OnNode("never-seen", nil) // nothing to tell
	peers.OnNode("bare", node("bare", "10.0.0.9"))
	expect("an address comes", peerpb.ChangeNotificationType_PEER_ADDED, "bare", "10.0.0.9:4244")

	// A second client, later, is told the nodes as they are now.
	again, err := servePeers(t, peers).Notify(ctx, &peerpb.NotifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	now := map[string]string{}
	for range 3 {
		cn, err := again.Recv()
		if err != nil {
			t.Fatal(err)
		}
		now[cn.GetName()] = cn.GetAddress()
	}
	if len(now) != 3 || now["node2.example"] != "10.0.0.22:4244" || now["bare"] != "10.0.0.9:4244" || now["node1"] != "10.0.0.1:4244" {
		t.Errorf("a later client was told %v", now)
	}
}

// TestPeersNames: outside the default cluster the name is cluster/node and
// the TLS server name carries the cluster; without TLS none is told;
// without a TCP port the address is the node's IP alone.
func TestPeersNames(t *testing.T) {
	p := NewPeers(PeersConfig{Port: 4244, TLS: true, Cluster: "east.prod"})
	cn := p.notification("n1", node("n1", "10.0.0.1"))
	if cn.GetName() != "east.prod/n1" || cn.GetTls().GetServerName() != "n1.east-prod.hubble-grpc.cilium.io" {
		t.Errorf("in cluster east.prod: %v", cn)
	}
	cn = NewPeers(PeersConfig{}).notification("n1", node("n1", "fd00::1"))
	if cn.GetName() != "n1" || cn.GetTls() != nil || cn.GetAddress() != "fd00::1" {
		t.Errorf("without TLS or port: %v", cn)
	}
	if got := TLSServerName("", "x"); got != "" {
		t.Errorf("TLSServerName of no node: %q", got)
	}
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
