package flows

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// observer is netcube's own Hubble server (pkg/hubble) of a hub the test
// publishes datapath events to, on a unix socket, and on TCP with TLS
// that asks for a client certificate (as a Hubble Relay's does).
type observer struct {
	hub       *events.Hub
	unix      string
	tlsAddr   string
	ca        string // the CA's certificate (PEM file), which signed the server's and client's
	otherCA   string // a CA that signed neither
	cert, key string
}

func startObserver(t *testing.T) observer {
	t.Helper()
	dir := t.TempDir()
	o := observer{hub: events.NewHub(), unix: filepath.Join(dir, "hubble.sock")}
	srv := hubble.New(hubble.Config{Node: "node1", Hub: o.hub})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := srv.Serve(ctx, o.unix, hubble.TCP{}); err != nil {
		t.Fatal(err)
	}
	caCert, caKey := newCert(t, nil, nil, "test CA")
	serverCert, serverKey := newCert(t, caCert, caKey, "127.0.0.1")
	clientCert, clientKey := newCert(t, caCert, caKey, "client")
	other, _ := newCert(t, nil, nil, "another CA")
	o.ca, o.otherCA = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw), writePEM(t, dir, "other.pem", "CERTIFICATE", other.Raw)
	o.cert, o.key = writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Raw), writeKey(t, dir, "client-key.pem", clientKey)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{serverCert.Raw}, PrivateKey: serverKey}},
		ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	gs := grpc.NewServer(grpc.Creds(creds))
	observerpb.RegisterObserverServer(gs, srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	o.tlsAddr = l.Addr().String()
	return o
}

// drop publishes a policy drop from src to dst, as the datapath reports one.
func (o observer) drop(src, dst string) {
	o.hub.Publish(events.Event{Time: time.Now(), Type: "drop", Cube: "policy", Point: "to-pod", Family: 4, Proto: "TCP",
		Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst), TCPFlags: "SYN", Drop: "policy-denied-ingress"})
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func writeKey(t *testing.T, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name, "EC PRIVATE KEY", der)
}

// mapOf runs the verb and reads its JSON graph.
func mapOf(t *testing.T, args ...string) (Graph, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(append([]string{"map", "-o", "json"}, args...), &out, &errb)
	var g Graph
	if code == 0 {
		if err := json.Unmarshal(out.Bytes(), &g); err != nil {
			t.Fatalf("netcube flows map printed %q: %v", out.String(), err)
		}
	}
	return g, code, errb.String()
}

// TestMapOverTLS: through TLS with the right CA and a client
// certificate, the map has the server's drop; a CA that did not sign
// the server's certificate, or no client certificate, gets no map.
func TestMapOverTLS(t *testing.T) {
	o := startObserver(t)
	o.drop("198.18.0.1:40000", "10.244.1.5:8080")
	time.Sleep(100 * time.Millisecond) // the hub hands it to the server's ring
	g, code, stderr := mapOf(t, "--server", o.tlsAddr, "--tls", "--tls-ca-cert-files", o.ca,
		"--tls-client-cert-file", o.cert, "--tls-client-key-file", o.key)
	if code != 0 || len(g.Edges) != 1 || g.Edges[0].DropReasons["POLICY_DENIED"] != 1 || g.Edges[0].From != "world" {
		t.Fatalf("over TLS: exit %d, %s, graph %+v; want the one POLICY_DENIED drop from the world", code, stderr, g)
	}
	for name, args := range map[string][]string{
		"another CA":            {"--tls-ca-cert-files", o.otherCA, "--tls-client-cert-file", o.cert, "--tls-client-key-file", o.key},
		"no client certificate": {"--tls-ca-cert-files", o.ca},
		"no TLS":                {},
	} {
		tls := []string{"--tls"}
		if name == "no TLS" {
			tls = nil
		}
		_, code, stderr := mapOf(t, append(append([]string{"--server", o.tlsAddr}, tls...), args...)...)
		if code != 1 || !strings.Contains(stderr, "--server "+o.tlsAddr) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 naming --server", name, code, stderr)
		}
	}
	if _, code, stderr := mapOf(t, "--server", o.tlsAddr, "--tls", "--tls-client-cert-file", o.cert); code != 2 || !strings.Contains(stderr, "go together") {
		t.Errorf("a certificate without its key: exit %d, %q", code, stderr)
	}
}

// TestMapFollows: --follow --duration draws what comes in the while, and
// not what came before it.
func TestMapFollows(t *testing.T) {
	o := startObserver(t)
	o.drop("198.18.0.1:40000", "10.244.1.5:8080") // before: not in the map
	time.Sleep(100 * time.Millisecond)
	go func() {
		time.Sleep(700 * time.Millisecond)
		o.drop("198.18.0.2:40000", "10.244.1.6:8080")
		o.drop("198.18.0.2:40001", "10.244.1.6:8080")
	}()
	start := time.Now()
	g, code, stderr := mapOf(t, "--server", "unix://"+o.unix, "--follow", "--duration", "2s")
	if code != 0 || g.Flows != 2 || len(g.Nodes) != 1 || !strings.Contains(strings.Join(g.Nodes[0].IPs, " "), "198.18.0.2") ||
		strings.Contains(strings.Join(g.Nodes[0].IPs, " "), "198.18.0.1") {
		t.Errorf("--follow --duration 2s: exit %d, %s, graph %+v; want the 2 drops that came while it followed", code, stderr, g)
	}
	if took := time.Since(start); took < 2*time.Second || took > 5*time.Second {
		t.Errorf("--duration 2s took %s", took)
	}
	// The positive control of the window: --last has the one before too.
	if g, _, _ := mapOf(t, "--server", "unix://"+o.unix, "--last", "10"); g.Flows != 3 {
		t.Errorf("--last 10: %d flows, want 3", g.Flows)
	}
}
