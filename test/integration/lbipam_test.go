package integration

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/lbipam"
	"github.com/netcube/netcube/pkg/report"
)

// lbIPs waits until Service name's status has one address per family
// and returns them (IPv4, IPv6).
func lbIPs(t *testing.T, c kubernetes.Interface, name string) (netip.Addr, netip.Addr) {
	t.Helper()
	var v4, v6 netip.Addr
	testenv.WaitFor(t, 20*time.Second, "Service "+name+" given LoadBalancer IPs", func() bool {
		s, err := c.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		v4, v6 = netip.Addr{}, netip.Addr{}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && a.Is4() {
				v4 = a
			} else if err == nil {
				v6 = a
			}
		}
		return v4.IsValid() && v6.IsValid()
	})
	return v4, v6
}

func lbService(name string, extra func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicyRequireDualStack),
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if extra != nil {
		extra(s)
	}
	return s
}

// TestLoadBalancerIPsFromAPool: with the sandbox's NetworkLoadBalancerPool
// (the top of the nodes' subnets), a LoadBalancer Service gets an IPv4
// and an IPv6 address from netcube-operator, and a client outside the
// cluster, on the nodes' link and with no route to them, reaches it on
// both (the nodes answer its ARP and neighbour solicitations);
// loadBalancerSourceRanges that leave the client out stop it, ones that
// let it in let it through again; a Service asking for an address outside
// the pool gets none, and an Event saying why; a Service no longer a
// LoadBalancer gives its addresses back, and they are no longer answered.
func TestLoadBalancerIPsFromAPool(t *testing.T) {
	sb := upWith(t, "lb", sandbox.Config{APIServer: true})
	top := sb.Topology
	c, err := sb.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := top.EchoBackends()
	if err := sandbox.CreateFromYAML(c, sandbox.SliceYAML("web", false, sandbox.EndpointPorts, pods)+"\n---\n"+
		sandbox.SliceYAML("web", true, sandbox.EndpointPorts, pods)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services("default").Create(ctx, lbService("web", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v4, v6 := lbIPs(t, c, "web")
	for _, p := range sandbox.DefaultLBPoolCIDRs {
		pr := netip.MustParsePrefix(p)
		if a := map[bool]netip.Addr{false: v4, true: v6}[pr.Addr().Is6()]; !pr.Contains(a) {
			t.Fatalf("LoadBalancer IP %s is not in the pool's %s", a, pr)
		}
	}
	t.Logf("LoadBalancer IPs %s, %s", v4, v6)
	hasFinalizer := func(name string) func() bool {
		return func() bool {
			s, err := c.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && slices.Contains(s.Finalizers, lbipam.CleanupFinalizer)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the cleanup finalizer on Service web", hasFinalizer("web"))

	reach := func(a netip.Addr) string {
		r := fromOutside(t, sb, "tcp", net.JoinHostPort(a.String(), "80"), 1, "--timeout", "500ms")[0]
		return r.Err
	}
	reached := func(a netip.Addr) func() bool { return func() bool { return reach(a) == "" } }
	for _, a := range []netip.Addr{v4, v6} {
		testenv.WaitFor(t, 10*time.Second, "the external client reaches "+a.String(), reached(a))
		for _, r := range fromOutside(t, sb, "tcp", net.JoinHostPort(a.String(), "80"), 20) {
			if r.Err != "" || !slices.ContainsFunc(pods, func(p sandbox.Pod) bool { return p.Name == r.Backend }) {
				t.Fatalf("%s: %+v", a, r)
			}
		}
	}
	// The client found the addresses on its link: it has no route for
	// them but its subnet's, and a neighbour entry for each.
	out, err := sb.Output(top.External.Name, "ip", "neigh", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{v4, v6} {
		if !strings.Contains(string(out), a.String()+" ") {
			t.Errorf("no neighbour entry for %s on the external client:\n%s", a, out)
		}
	}

	setRanges := func(ranges ...string) {
		t.Helper()
		s, err := c.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.LoadBalancerSourceRanges = ranges
		if _, err := c.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setRanges("192.0.2.0/24", "2001:db8::/64")
	for _, a := range []netip.Addr{v4, v6} {
		testenv.WaitFor(t, 10*time.Second, "source ranges without the client stop it at "+a.String(), func() bool { return reach(a) != "" })
	}
	setRanges("192.0.2.0/24", top.External.IP4.String()+"/32", top.External.IP6.String()+"/128")
	for _, a := range []netip.Addr{v4, v6} {
		testenv.WaitFor(t, 10*time.Second, "source ranges with the client let it reach "+a.String(), reached(a))
	}

	t.Run("an address outside every pool: none assigned, an Event says why", func(t *testing.T) {
		ask := lbService("outside", func(s *corev1.Service) {
			s.Annotations = map[string]string{k8s.LoadBalancerIPsAnnotation: "203.0.113.7,2001:db8::7"}
		})
		if _, err := c.CoreV1().Services("default").Create(ctx, ask, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 20*time.Second, "a LoadBalancerIPNotAssigned Event on Service outside", func() bool {
			evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=outside"})
			if err != nil {
				return false
			}
			return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
				return e.Reason == string(report.LoadBalancerIPNotAssigned) && strings.Contains(e.Message, "203.0.113.7 is in no NetworkLoadBalancerPool")
			})
		})
		s, err := c.CoreV1().Services("default").Get(ctx, "outside", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("Service outside got %v", s.Status.LoadBalancer.Ingress)
		}
	})

	t.Run("type ClusterIP: the addresses given back, no longer answered", func(t *testing.T) {
		s, err := c.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Type, s.Spec.LoadBalancerSourceRanges = corev1.ServiceTypeClusterIP, nil
		s.Spec.ExternalTrafficPolicy, s.Spec.AllocateLoadBalancerNodePorts = "", nil
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
		if _, err := c.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 20*time.Second, "status.loadBalancer emptied and the finalizer gone", func() bool {
			s, err := c.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && len(s.Status.LoadBalancer.Ingress) == 0 && !slices.Contains(s.Finalizers, lbipam.CleanupFinalizer)
		})
		// A client that never asked before gets no answer: the node
		// that served the address forgets it.
		if _, err := sb.Output(top.External.Name, "ip", "neigh", "flush", "all"); err != nil {
			t.Fatal(err)
		}
		for _, a := range []netip.Addr{v4, v6} {
			testenv.WaitFor(t, 10*time.Second, a.String()+" no longer reached", func() bool { return reach(a) != "" })
		}
	})

	t.Run("a LoadBalancer deleted: its addresses given back, then it is gone", func(t *testing.T) {
		if _, err := c.CoreV1().Services("default").Create(ctx, lbService("brief", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lbIPs(t, c, "brief")
		testenv.WaitFor(t, 10*time.Second, "the cleanup finalizer on Service brief", hasFinalizer("brief"))
		if err := c.CoreV1().Services("default").Delete(ctx, "brief", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 20*time.Second, "Service brief deleted", func() bool {
			_, err := c.CoreV1().Services("default").Get(ctx, "brief", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
}
