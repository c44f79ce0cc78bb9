package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/lab/kubeenv"
	agentcfg "github.com/netcube/netcube/pkg/agent"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// helmTemplate runs the real helm on the chart with args; it returns what
// helm printed and its error.
func helmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(filepath.Join(tools, "helm"), append([]string{"template", "netcube", chart}, args...)...).CombinedOutput()
}

// TestHubbleChart: with hubble.enabled and hubble.relay.enabled the chart
// renders the agents' mutual-TLS listener (config, the certificate
// Secret mounted where the config says), the hubble-peer Service, and
// hubble-relay with its Service, all of which the real API server
// admits; the certificates Helm made work for real: the agents' Hubble
// server with the agents' Secret serves a client holding the relay's
// Secret, under the name the Peer service tells. The defaults render
// none of it; a relay without hubble.enabled is refused.
func TestHubbleChart(t *testing.T) {
	plain, err := helmTemplate(t)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, plain)
	}
	if strings.Contains(string(plain), "hubble-peer") || strings.Contains(string(plain), "hubble-tls") {
		t.Error("the default values render Hubble's TCP listener")
	}
	// In a namespace of its own: the API server is shared with tests that
	// installed the chart, and a dry run of an object that exists says
	// nothing of the object.
	const ns = "hubble-chart-test"
	out, err := helmTemplate(t, "--set", "hubble.enabled=true,hubble.relay.enabled=true,namespace="+ns)
	if err != nil {
		t.Fatalf("helm template with hubble: %v\n%s", err, out)
	}
	c := env.Client
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	secrets := map[string]*corev1.Secret{}
	services := map[string]*corev1.Service{}
	var ds *appsv1.DaemonSet
	var relay *appsv1.Deployment
	var cfg agentcfg.Config
	for _, obj := range decode(t, out) {
		var err error
		switch o := obj.(type) {
		case *corev1.Secret:
			secrets[o.Name] = o
			_, err = c.CoreV1().Secrets(o.Namespace).Create(ctx, o, dry)
		case *corev1.Service:
			services[o.Name] = o
			_, err = c.CoreV1().Services(o.Namespace).Create(ctx, o, dry)
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, dry)
		case *corev1.ConfigMap:
			cfg = agentcfg.Defaults()
			if perr := yamlToConfig(o.Data["config.yaml"], &cfg); perr != nil {
				t.Errorf("ConfigMap config.yaml: %v", perr)
			}
		case *appsv1.DaemonSet:
			ds = o
			_, err = c.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, dry)
		case *appsv1.Deployment:
			if o.Name == "hubble-relay" {
				relay = o
				_, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, dry)
			}
		}
		if err != nil {
			t.Errorf("server-side dry run of %T: %v", obj, err)
		}
	}
	server, client := secrets["hubble-server-certs"], secrets["hubble-relay-client-certs"]
	if server == nil || client == nil || ds == nil || relay == nil || services["hubble-peer"] == nil || services["hubble-relay"] == nil {
		t.Fatalf("rendered: secrets %v, services %v, DaemonSet %v, relay %v", keys(secrets), keys(services), ds != nil, relay != nil)
	}

	// The agent's config: the listener, its files where the DaemonSet
	// mounts the server Secret.
	h := cfg.Hubble
	if h.ListenAddress != ":4244" || h.DisableTLS || h.TLSCertFile == "" || len(h.TLSClientCAFiles) != 1 || cfg.ClusterName != "default" {
		t.Fatalf("the agent's config: %+v, cluster %q", h, cfg.ClusterName)
	}
	agent := ds.Spec.Template.Spec.Containers[0]
	mount := slices.IndexFunc(agent.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "hubble-tls" })
	vol := slices.IndexFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "hubble-tls" })
	if mount < 0 || vol < 0 || filepath.Dir(h.TLSCertFile) != agent.VolumeMounts[mount].MountPath ||
		ds.Spec.Template.Spec.Volumes[vol].Secret.SecretName != server.Name {
		t.Errorf("the agent's certificate %s is not the mounted Secret %s", h.TLSCertFile, server.Name)
	}
	if p := services["hubble-peer"].Spec.Ports[0]; p.TargetPort.IntValue() != 4244 {
		t.Errorf("hubble-peer leads to port %v, the agents listen on 4244", p.TargetPort)
	}
	args := strings.Join(relay.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--peer-service=hubble-peer." + ns + ".svc:443", "--tls-hubble-client-cert-file=", "--tls-hubble-server-ca-files="} {
		if !strings.Contains(args, want) {
			t.Errorf("hubble-relay's args %q lack %q", args, want)
		}
	}

	// The certificates Helm made, used for real: the agents' server
	// (pkg/hubble over TCP) serves the relay's client certificate.
	dir := t.TempDir()
	write := func(s *corev1.Secret, prefix string) (ca, crt, key string) {
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if err := os.WriteFile(filepath.Join(dir, prefix+k), s.Data[k], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(dir, prefix+"ca.crt"), filepath.Join(dir, prefix+"tls.crt"), filepath.Join(dir, prefix+"tls.key")
	}
	sCA, sCrt, sKey := write(server, "server-")
	cCA, cCrt, cKey := write(client, "client-")
	addr := freeLoopback(t)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tcp := hubble.TCP{Address: addr, CertFile: sCrt, KeyFile: sKey, ClientCAFiles: []string{sCA}}
	if err := hubble.New(hubble.Config{Node: "node1", Hub: events.NewHub()}).Serve(sctx, "", tcp); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caPEM, _ := os.ReadFile(cCA)
	roots.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(cCrt, cKey)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: hubble.TLSServerName("node1", cfg.ClusterName)}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	if _, err := observerpb.NewObserverClient(conn).ServerStatus(cctx, &observerpb.ServerStatusRequest{}); err != nil {
		t.Errorf("the agents' Hubble server with the chart's certificates, the relay's client certificate: %v", err)
	}
	if b, _ := pem.Decode(server.Data["tls.crt"]); b != nil {
		if crt, err := x509.ParseCertificate(b.Bytes); err == nil && !slices.Contains(crt.DNSNames, "*.default.hubble-grpc.cilium.io") {
			t.Errorf("the agents' certificate names %v", crt.DNSNames)
		}
	}

	if out, err := helmTemplate(t, "--set", "hubble.relay.enabled=true"); err == nil || !strings.Contains(string(out), "hubble.relay.enabled needs hubble.enabled") {
		t.Errorf("a relay without hubble.enabled: %v\n%s", err, out)
	}
	if out, err := helmTemplate(t, "--set", "hubble.enabled=true,hubble.tls.auto.method=certmanager"); err == nil || !strings.Contains(string(out), "hubble.tls.auto.method") {
		t.Errorf("an unknown hubble.tls.auto.method: %v\n%s", err, out)
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// freeLoopback is a loopback address no one listens on now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
