package kubeenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issue creates a certificate signed by ca (self-signed when ca is nil).
func issue(ca *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert, key}, err
}

func (k *keyPair) write(dir, name string) error {
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.cert.Raw})
	der, err := x509.MarshalECPrivateKey(k.key)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600)
}

// writeCerts creates a CA, the API server's serving certificate (for ip),
// an admin client certificate (system:masters) and the service-account
// signing key.
func writeCerts(dir string, ip net.IP) error {
	ca, err := issue(nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "netcube-test-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return err
	}
	server, err := issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		IPAddresses: []net.IP{ip, net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return err
	}
	admin, err := issue(ca, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "netcube-admin", Organization: []string{"system:masters"}},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	sa, err := issue(ca, &x509.Certificate{Subject: pkix.Name{CommonName: "service-accounts"}})
	if err != nil {
		return err
	}
	for name, kp := range map[string]*keyPair{"ca": ca, "apiserver": server, "admin": admin, "sa": sa} {
		if err := kp.write(dir, name); err != nil {
			return err
		}
	}
	return nil
}

// loadKeyPair reads a certificate and its EC key written by write.
func loadKeyPair(dir, name string) (*keyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s: not PEM", filepath.Join(dir, name))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert, key}, nil
}

// WriteUserKubeconfig writes a kubeconfig for the control plane in dir
// that authenticates as user in groups with a client certificate signed
// by its CA, all inline (a kubelet is "system:node:<node>" in "system:nodes": the Node
// authorizer then limits it to its own node's objects).
func WriteUserKubeconfig(dir, server, user string, groups []string, file string) error {
	ca, err := loadKeyPair(dir, "ca")
	if err != nil {
		return fmt.Errorf("the control plane's CA: %w", err)
	}
	kp, err := issue(ca, &x509.Certificate{
		Subject:  pkix.Name{CommonName: user, Organization: groups},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(kp.key)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	cfg.Clusters["netcube"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
	}
	cfg.Contexts["netcube"] = &clientcmdapi.Context{Cluster: "netcube", AuthInfo: user}
	cfg.CurrentContext = "netcube"
	return clientcmd.WriteToFile(*cfg, file)
}
