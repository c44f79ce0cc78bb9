package hubble

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/netcube/netcube/internal/testca"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
	"github.com/netcube/netcube/pkg/hubble/peerpb"
)

// TestTCPCheck: a listener asked for without certificates or an explicit
// --hubble-disable-tls is refused, naming the flags; the default address
// alone asks for none; half a TLS configuration is refused.
func TestTCPCheck(t *testing.T) {
	if c := (TCP{Address: DefaultListenAddress}); c.Enabled() || c.Check() != nil {
		t.Errorf("the default address alone: enabled %v, %v; want off, no error", c.Enabled(), c.Check())
	}
	if err := (TCP{Address: ":4245", DisableTLS: true}).Check(); err != nil {
		t.Errorf("plain TCP asked for: %v", err)
	}
	for _, c := range []struct {
		tcp  TCP
		want []string
	}{
		{TCP{Address: ":4245"}, []string{"--hubble-listen-address :4245", "--hubble-tls-cert-file", "--hubble-disable-tls"}},
		{TCP{Address: DefaultListenAddress, CertFile: "c", KeyFile: "k"}, []string{"--hubble-tls-client-ca-files"}},
		{TCP{Address: DefaultListenAddress, CertFile: "c", ClientCAFiles: []string{"ca"}}, []string{"--hubble-tls-key-file"}},
		{TCP{Address: DefaultListenAddress, KeyFile: "k", ClientCAFiles: []string{"ca"}}, []string{"--hubble-tls-cert-file"}},
		{TCP{Address: DefaultListenAddress, DisableTLS: true, CertFile: "c"}, []string{"--hubble-disable-tls", "choose one"}},
	} {
		err := c.tcp.Check()
		if err == nil {
			t.Errorf("%+v: no error", c.tcp)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v; want it to say %q", c.tcp, err, w)
			}
		}
	}
}

// TestTCPMutualTLS: over TCP a client with a certificate of the client CA
// reads the Observer and the Peer service, verifying the server's
// certificate by the name the Peer service tells; a client without a
// certificate, with one of another CA, or speaking TLS 1.2 is refused.
func TestTCPMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, err := testca.New(dir, "hubble")
	if err != nil {
		t.Fatal(err)
	}
	server, err := serverCA.Server("server", "*.default.hubble-grpc.cilium.io")
	if err != nil {
		t.Fatal(err)
	}
	client, err := serverCA.Client("relay")
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := testca.New(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := otherCA.Client("stranger")
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	tcp := TCP{Address: addr, CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFiles: []string{serverCA.CertFile}}
	peers := NewPeers(PeersConfig{Port: 4244, TLS: true})
	peers.OnNode("node1", node("node1", "10.0.0.1"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := New(Config{Node: "node1", Hub: events.NewHub(), Names: names(), Peers: peers}).Serve(ctx, "", tcp); err != nil {
		t.Fatal(err)
	}
	pemCA, err := os.ReadFile(serverCA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemCA)
	dial := func(pair *testca.Pair, maxVersion uint16) *grpc.ClientConn {
		t.Helper()
		tc := &tls.Config{RootCAs: roots, ServerName: TLSServerName("node1", ""), MaxVersion: maxVersion}
		if pair != nil {
			c, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	status := func(conn *grpc.ClientConn) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := observerpb.NewObserverClient(conn).ServerStatus(cctx, &observerpb.ServerStatusRequest{})
		return err
	}

	good := dial(&client, 0)
	if err := status(good); err != nil {
		t.Fatalf("with the client CA's certificate: %v", err)
	}
	stream, err := peerpb.NewPeerClient(good).Notify(ctx, &peerpb.NotifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := stream.Recv(); err != nil || cn.GetTls().GetServerName() != "node1.default.hubble-grpc.cilium.io" {
		t.Errorf("Peer over TLS: %v, %v", cn, err)
	}
	if err := status(dial(nil, 0)); err == nil {
		t.Error("a client without a certificate was served")
	}
	if err := status(dial(&stranger, 0)); err == nil {
		t.Error("a client with another CA's certificate was served")
	}
	if err := status(dial(&client, tls.VersionTLS12)); err == nil {
		t.Error("a TLS 1.2 client was served")
	}
	plain, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := status(plain); err == nil {
		t.Error("a plain-text client was served")
	}
}
