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
	"github.com/netcube/netcube/lab/bench"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

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
	if err := sb.RemoveDatapath(node.Name); err != nil {
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
		created, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}) // the sandbox created it
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
	for _, m := range bench.KubeProxyModes {
		t.Run(m.Name, func(t *testing.T) {
			kp := &bench.KubeProxy{Mode: m, Node: node, Tools: tools, Config: sb.Topology.Kubeconfig(),
				LogFile: filepath.Join(t.TempDir(), "kube-proxy.log")}
			if err := kp.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if t.Failed() {
					b, _ := os.ReadFile(kp.LogFile)
					t.Logf("kube-proxy log:\n%s", b)
				}
				if !stopped {
					_ = kp.Stop()
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
			rules, err := kp.Rules()
			if err != nil || !strings.Contains(rules, vip) {
				t.Fatalf("kube-proxy's rules: %v\n%.2000s", err, rules)
			}
			if n, err := kp.Entries(); err != nil || n < 10 {
				t.Errorf("kube-proxy's rules count: %d, %v", n, err)
			}
			if m.Backend != "" {
				// The benchmark moves a Service's rule to either end of
				// KUBE-SERVICES; it still serves from there.
				for _, first := range []bool{true, false} {
					if err := kp.Place([]string{vip}, first); err != nil {
						t.Fatal(err)
					}
					chain := kubeServices(t, kp)
					at := 0
					if !first {
						at = len(chain) - 2 // before the KUBE-NODEPORTS jump
					}
					if !strings.Contains(chain[at], "-d "+vip+"/32 ") || !strings.Contains(chain[len(chain)-1], "KUBE-NODEPORTS") {
						t.Errorf("first=%v: KUBE-SERVICES is\n%s", first, strings.Join(chain, "\n"))
					}
					if r := requestsFrom(t, sb, client, "tcp", addr, 1)[0]; r.Err != "" {
						t.Errorf("first=%v: %s", first, r.Err)
					}
				}
			}

			// The harness removes each peer's rules before the next starts.
			stopped = true
			if err := kp.Stop(); err != nil {
				t.Fatal(err)
			}
			out, _ := exec.Command("nsenter", "--net=/run/netns/"+node.Netns, "--", "iptables-nft-save").CombinedOutput()
			legacy, _ := exec.Command("nsenter", "--net=/run/netns/"+node.Netns, "--", "iptables-legacy-save").CombinedOutput()
			nft, _ := exec.Command("nsenter", "--net=/run/netns/"+node.Netns, "--", "nft", "list", "ruleset").CombinedOutput()
			for _, left := range [][]byte{out, legacy, nft} {
				if strings.Contains(string(left), vip) {
					t.Fatalf("rules left after kube-proxy --cleanup:\n%.2000s", left)
				}
			}
		})
	}
}

// kubeServices lists the rules of the nat table's KUBE-SERVICES chain (IPv4).
func kubeServices(t *testing.T, kp *bench.KubeProxy) []string {
	t.Helper()
	rules, err := kp.Rules()
	if err != nil {
		t.Fatal(err)
	}
	var chain []string
	for _, l := range strings.Split(rules, "\n") {
		if strings.HasPrefix(l, "-A KUBE-SERVICES ") {
			chain = append(chain, l)
		}
		if strings.HasPrefix(l, "COMMIT") && len(chain) > 0 {
			break // the first table printed is IPv4's nat
		}
	}
	return chain
}
