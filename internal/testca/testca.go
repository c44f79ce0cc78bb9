// Package testca makes throwaway certificate authorities and the
// certificates they sign, for tests of mutual TLS (the Hubble server's
// TCP listener and hubble-relay): ECDSA P-256 keys, PEM files in a
// directory the test owns.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority whose certificate is in CertFile.
type CA struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
	CertFile string
}

// Pair is a certificate and its key, as PEM files.
type Pair struct{ CertFile, KeyFile string }

// New makes a CA named name, writing its certificate into dir.
func New(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, name+"-ca.crt")}
	return ca, writePEM(ca.CertFile, "CERTIFICATE", der)
}

// Server signs a certificate for a server named dnsNames (the first is
// its common name), files <name>.crt and <name>.key.
func (ca *CA) Server(name string, dnsNames ...string) (Pair, error) {
	return ca.sign(name, x509.ExtKeyUsageServerAuth, dnsNames)
}

// Client signs a certificate for a client named name.
func (ca *CA) Client(name string) (Pair, error) {
	return ca.sign(name, x509.ExtKeyUsageClientAuth, nil)
}

func (ca *CA) sign(name string, usage x509.ExtKeyUsage, dnsNames []string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	cn := name
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".crt"), KeyFile: filepath.Join(ca.dir, name+".key")}
	if err := writePEM(p.CertFile, "CERTIFICATE", der); err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.KeyFile, "EC PRIVATE KEY", kder)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("testca: no randomness: %v", err))
	}
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
