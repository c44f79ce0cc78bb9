package integration

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
)

const apiBound = 2 * time.Second // API write -> traffic follows

func ptr[T any](v T) *T { return &v }

// TestTrafficFollowsTheAPI: in a sandbox whose agents watch a real
// kube-apiserver, Services and EndpointSlices created, changed and deleted
// with client-go take effect on real traffic from a pod within a bound.
func TestTrafficFollowsTheAPI(t *testing.T) {
	sb := upWith(t, "a", sandbox.Config{SocketLB: true, APIServer: true})
	c, err := sb.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The example Services were created through the API.
	for _, r := range requests(t, sb, "tcp", "10.96.0.10:80", 10) {
		if r.Err != "" {
			t.Fatalf("echo Service: %s", r.Err)
		}
	}

	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "late"},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicyRequireDualStack),
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	backendSlice := func(p sandbox.Pod) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "late-1", Labels: map[string]string{discoveryv1.LabelServiceName: "late"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](sandbox.PodPort)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{p.IP4.String()}, NodeName: ptr(p.Node)}},
		}
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIPs[0], "80")
	answeredBy := func(want string) func() bool {
		return func() bool {
			rs := requests(t, sb, "tcp", addr, 1, "--timeout", "300ms")
			if want == "refused" {
				return strings.Contains(rs[0].Err, "connection refused")
			}
			return rs[0].Backend == want
		}
	}

	pods := sb.Topology.EchoBackends()
	steps := []struct {
		name  string
		write func() error
		want  string
	}{
		{"new Service without endpoints refuses", func() error { return nil }, "refused"},
		{"EndpointSlice created", func() error {
			_, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, backendSlice(pods[1]), metav1.CreateOptions{})
			return err
		}, pods[1].Name},
		{"endpoint moved to another pod", func() error {
			_, err := c.DiscoveryV1().EndpointSlices("default").Update(ctx, backendSlice(pods[0]), metav1.UpdateOptions{})
			return err
		}, pods[0].Name},
		{"EndpointSlice deleted", func() error {
			return c.DiscoveryV1().EndpointSlices("default").Delete(ctx, "late-1", metav1.DeleteOptions{})
		}, "refused"},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		took := testenv.WaitFor(t, apiBound, s.name, answeredBy(s.want))
		t.Logf("%s: traffic followed within %s", s.name, took.Round(time.Millisecond))
	}
	if err := c.CoreV1().Services("default").Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, apiBound, "deleted Service no longer refused by netcube", func() bool {
		rs := requests(t, sb, "tcp", addr, 1, "--timeout", "200ms")
		return !strings.Contains(rs[0].Err, "connection refused") && rs[0].Backend == ""
	})

	t.Run("topology hints: a PreferClose Service answers from the client's zone", func(t *testing.T) {
		client := sb.Topology.ClientPod()
		var near, far sandbox.Pod
		for _, p := range pods {
			if p.Node == client.Node {
				near = p
			} else {
				far = p
			}
		}
		// The agents learn their zone from their Node object.
		for _, n := range sb.Topology.Nodes {
			node, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			node.Labels = map[string]string{corev1.LabelTopologyZone: "zone-" + n.Name}
			if _, err := c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "close"},
			Spec: corev1.ServiceSpec{
				TrafficDistribution: ptr(corev1.ServiceTrafficDistributionPreferClose),
				Ports:               []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ep := func(p sandbox.Pod) discoveryv1.Endpoint {
			return discoveryv1.Endpoint{Addresses: []string{p.IP4.String()}, NodeName: ptr(p.Node),
				Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-" + p.Node}}}}
		}
		if _, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "close-1", Labels: map[string]string{discoveryv1.LabelServiceName: "close"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](sandbox.PodPort)}},
			Endpoints:   []discoveryv1.Endpoint{ep(near), ep(far)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort(svc.Spec.ClusterIPs[0], "80")
		testenv.WaitFor(t, apiBound, "the close Service", func() bool {
			return requests(t, sb, "tcp", addr, 1, "--timeout", "300ms")[0].Backend == near.Name
		})
		for _, r := range requests(t, sb, "tcp", addr, 20) {
			if r.Err != "" || r.Backend != near.Name {
				t.Fatalf("%+v, want %s (in the client's zone), never %s", r, near.Name, far.Name)
			}
		}
	})
}
