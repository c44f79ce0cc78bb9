package hubble

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// DefaultListenAddress is where Cilium's agents serve Hubble over TCP
// (--hubble-listen-address), and where hubble-relay looks by default.
const DefaultListenAddress = ":4244"

// TCP is the Hubble server's TCP listener: mutual TLS, or plain TCP
// only when DisableTLS says so.
type TCP struct {
	Address string // host:port; "": no TCP listener
	// CertFile and KeyFile are the server's certificate (it must name
	// TLSServerName of this node, or *.<cluster>.hubble-grpc.cilium.io)
	// and its key, PEM.
	CertFile, KeyFile string
	// ClientCAFiles are the CAs a client's certificate must be signed by
	// (PEM, one or more certificates each). A client without one is
	// refused.
	ClientCAFiles []string
	// DisableTLS serves plain TCP: anyone who reaches the port reads
	// every flow of the node. Only when asked for.
	DisableTLS bool
}

// Enabled: there is a TCP listener to start. The default address alone
// does not make one: a listener needs certificates or an explicit
// DisableTLS, so that an agent given neither serves as before.
func (c TCP) Enabled() bool {
	return c.Address != "" && (c.DisableTLS || c.CertFile != "" || c.KeyFile != "" || len(c.ClientCAFiles) > 0 || c.Address != DefaultListenAddress)
}

// Check says what is wrong with c, naming the agent's flags: TLS half
// configured, or an address given with neither certificates nor
// --hubble-disable-tls (fail closed: flows are not served in the clear
// because certificates were forgotten).
func (c TCP) Check() error {
	if !c.Enabled() {
		return nil
	}
	tlsSet := c.CertFile != "" || c.KeyFile != "" || len(c.ClientCAFiles) > 0
	switch {
	case c.DisableTLS && tlsSet:
		return errors.New("--hubble-disable-tls with --hubble-tls-cert-file, --hubble-tls-key-file or --hubble-tls-client-ca-files: choose one")
	case c.DisableTLS:
		return nil
	case !tlsSet:
		return fmt.Errorf("--hubble-listen-address %s: needs --hubble-tls-cert-file, --hubble-tls-key-file and --hubble-tls-client-ca-files (mutual TLS), or --hubble-disable-tls to serve flows in the clear", c.Address)
	case c.CertFile == "":
		return errors.New("--hubble-tls-cert-file: not set (--hubble-tls-key-file is)")
	case c.KeyFile == "":
		return errors.New("--hubble-tls-key-file: not set (--hubble-tls-cert-file is)")
	case len(c.ClientCAFiles) == 0:
		return errors.New("--hubble-tls-client-ca-files: not set: clients' certificates must be verified (mutual TLS)")
	}
	return nil
}

// TLSConfig reads the certificates: TLS 1.3 at least, and a client
// certificate signed by one of the client CAs required. The server's key
// pair is read again at each handshake when its files changed (a
// certificate renewed in its Secret needs no restart).
func (c TCP) TLSConfig() (*tls.Config, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, f := range c.ClientCAFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--hubble-tls-client-ca-files: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--hubble-tls-client-ca-files: %s holds no PEM certificate", f)
		}
	}
	kp := &keyPair{certFile: c.CertFile, keyFile: c.KeyFile}
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return kp.get()
		},
	}, nil
}

// keyPair is the server's certificate, read again when its files change.
type keyPair struct {
	certFile, keyFile string
	mu                sync.Mutex // handshakes ask at once
	stamp             string
	cert              *tls.Certificate
}

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	stamp := fileStamp(k.certFile) + "|" + fileStamp(k.keyFile)
	if k.cert != nil && stamp == k.stamp {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // mid-rewrite: the last good one
		}
		return nil, fmt.Errorf("--hubble-tls-cert-file %s, --hubble-tls-key-file %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.stamp = &c, stamp
	return k.cert, nil
}

func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return strings.Join([]string{st.ModTime().String(), fmt.Sprint(st.Size())}, "/")
}
