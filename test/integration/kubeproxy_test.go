package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/kubeenv"
	"github.com/netcube/netcube/pkg/sandbox"
)

// kubeProxyModes are the benchmark's baselines: kube-proxy's iptables mode
// with each iptables backend, and its nftables mode.
var kubeProxyModes = []struct {
	name, mode, backend string // backend: the iptables binaries kube-proxy finds first in PATH
	rules               []string
}{
	{"iptables-nft", "iptables", "nft", []string{"iptables-nft-save"}},
	{"iptables-legacy", "iptables", "legacy", []string{"iptables-legacy-save"}},
	{"nftables", "nftables", "", []string{"nft", "list", "table", "ip", "kube-proxy"}},
}

// TestKubeProxyBaseline: the real kube-proxy, built from the Go module
// proxy like the API server, runs on a sandbox node in place of netcube
// (iptables mode with the nft and the legacy backend, and nftables mode)
// and serves a Service to a pod on that node through its own rules,
// which its cleanup removes. This is the peer the benchmark (issue 5)
// compares netcube with.
func TestKubeProxyBaseline(t *testing.T) {
	testenv.RequireRoot(t)
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	sb := upWith(t, "k", sandbox.Config{APIServer: true})
	// Node 2 without netcube: agent stopped, programs detached.
	node := sb.Topology.Nodes[1]
	if err := sb.StopAgent(node.Name, false); err != nil {
		t.Fatal(err)
	}
	if err := datapath.Unpin(node.PinDir); err != nil {
		t.Fatal(err)
	}
	// What kube-proxy reads on a cluster: Node objects with addresses, and
	// a Service whose endpoints are not the client itself (hairpin is
	// another matter).
	c, err := sb.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range sb.Topology.Nodes {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		created, err := c.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP4.String()}, {Type: corev1.NodeInternalIP, Address: n.IP6.String()}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clientPod, far := node.Pods[0], sb.Topology.Nodes[0].Pods[1]
	backends := []sandbox.Pod{far, node.Pods[1]}
	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "baseline"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "baseline-1", Labels: map[string]string{discoveryv1.LabelServiceName: "baseline"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](sandbox.PodPort)}},
	}
	for _, p := range backends {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.IP4.String()}, NodeName: ptr(p.Node)})
	}
	if _, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	addr := net.JoinHostPort(vip, "80")
	client := clientPod.Name
	inNode := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--net=/run/netns/" + node.Netns, "--"}, args...)...)
	}

	for _, m := range kubeProxyModes {
		t.Run(m.name, func(t *testing.T) {
			path := os.Getenv("PATH")
			if m.backend != "" { // iptables, ip6tables and their save/restore from the wanted backend
				dir := t.TempDir()
				for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
					target, err := exec.LookPath(strings.Replace(tool, "tables", "tables-"+m.backend, 1))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(target, filepath.Join(dir, tool)); err != nil {
						t.Fatal(err)
					}
				}
				path = dir + ":" + path
			}
			kp := inNode(filepath.Join(tools, "kube-proxy"), "--kubeconfig", sb.Topology.Kubeconfig(),
				"--hostname-override", node.Name, "--proxy-mode", m.mode, "--conntrack-max-per-core", "0",
				"--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56", "--v", "1")
			kp.Env = append(os.Environ(), "PATH="+path)
			logf, err := os.Create(filepath.Join(t.TempDir(), "kube-proxy.log"))
			if err != nil {
				t.Fatal(err)
			}
			kp.Stdout, kp.Stderr = logf, logf
			if err := kp.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					_ = kp.Process.Kill()
					_ = kp.Wait()
				}
			}
			defer stop()
			defer func() {
				if t.Failed() {
					b, _ := os.ReadFile(logf.Name())
					t.Logf("kube-proxy log:\n%s", b)
				}
			}()

			testenv.WaitFor(t, 30*time.Second, "the Service through kube-proxy", func() bool {
				return requestsFrom(t, sb, client, "tcp", addr, 1, "--timeout", "300ms")[0].Err == ""
			})
			seen := map[string]bool{}
			for _, r := range requestsFrom(t, sb, client, "tcp", addr, 20) {
				if r.Err != "" {
					t.Fatalf("request %d through kube-proxy: %s", r.Seq, r.Err)
				}
				seen[r.Backend] = true
			}
			if len(seen) != len(backends) {
				t.Errorf("answered by %v, want both %s and %s", seen, backends[0].Name, backends[1].Name)
			}
			rules, err := inNode(m.rules...).CombinedOutput()
			if err != nil || !strings.Contains(string(rules), vip) {
				t.Fatalf("%s in %s: %v\n%.2000s", m.rules[0], node.Name, err, rules)
			}

			// The harness removes each peer's rules before the next starts.
			stop()
			cleanup := inNode(filepath.Join(tools, "kube-proxy"), "--cleanup", "--proxy-mode", m.mode)
			cleanup.Env = append(os.Environ(), "PATH="+path)
			if out, err := cleanup.CombinedOutput(); err != nil {
				t.Fatalf("kube-proxy --cleanup: %v\n%s", err, out)
			}
			if rules, _ := inNode(m.rules...).CombinedOutput(); strings.Contains(string(rules), vip) {
				t.Fatalf("rules left after kube-proxy --cleanup:\n%.2000s", rules)
			}
		})
	}
}
