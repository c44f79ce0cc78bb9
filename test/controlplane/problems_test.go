package controlplane

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// runningPod makes namespace ns and a pod of node1 in it, running at ip
// with labels (as kubelet would report it).
func runningPod(t *testing.T, ns, name string, labels map[string]string, ip string) {
	t.Helper()
	testNamespace(t, ns)
	runningPodOn(t, ns, name, "node1", labels, ip)
}

// testNamespace makes namespace ns for the test, with its default
// service account (no controller manager runs here to make it).
func testNamespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx(t), ns, metav1.DeleteOptions{}) })
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPodOn makes a pod of node in namespace ns, running at ip with
// labels (as kubelet would report it), and returns it as stored.
func runningPodOn(t *testing.T, ns, name, node string, labels map[string]string, ip string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	created, err := env.Client.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if created, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created
}

// eventFor waits for a Warning Event with reason on the object, naming it
// by UID (as kubectl describe looks it up), and returns its message.
func eventFor(t *testing.T, ns, kind, name, reason string) string {
	t.Helper()
	var msg string
	testenv.WaitFor(t, 20*time.Second, reason+" Event on "+kind+" "+ns+"/"+name, func() bool {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason}.String()})
		if err != nil || len(evs.Items) == 0 {
			return false
		}
		ev := evs.Items[0]
		msg = ev.Message
		return ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.UID != "" && ev.Source.Component == "netcube-agent"
	})
	return msg
}

// TestInvalidFieldsFromTheAPI: the agent does not trust that the API server
// validated what it relies on. A Service stored past validation with an
// unreadable loadBalancerSourceRanges entry and an invalid external IP has
// its valid parts programmed, its LoadBalancer IP walled (no client), and
// both fields named in a Warning Event; an EndpointSlice without the
// service-name label is reported rather than silently dropped.
//
// The Service's LoadBalancer IP was assigned by another controller (its
// class is not netcube's): with netcube's own class, or none, the agent
// that leads LoadBalancer IP assignment takes the Service as its own and
// clears an address no pool of its gave (CI saw that race, once an
// earlier test had installed the pool CRD). The CRD is installed here, so
// that the leader assigns throughout and the test checks it leaves a
// Service of another class alone.
func TestInvalidFieldsFromTheAPI(t *testing.T) {
	installPoolCRD(t)
	a := startAgent(t, pinDir(t))
	single := corev1.IPFamilyPolicySingleStack
	otherClass := "example.com/cloud-lb"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "unvalidated", Namespace: "default", UID: "4f6c1a7e-0000-4000-8000-000000000001"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.201.1", ClusterIPs: []string{"10.96.201.1"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single, SessionAffinity: corev1.ServiceAffinityNone,
			ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyCluster,
			LoadBalancerClass:        &otherClass,
			ExternalIPs:              []string{"not-an-ip", "192.0.2.202"},
			LoadBalancerSourceRanges: []string{"10.0.0.0/8", "bad-range"},
			Ports:                    []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30201, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.201"}}}},
	}
	if err := env.StoreDirect(ctx(t), []kubeenv.StoredObject{
		{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Services("default").Delete(ctx(t), "unvalidated", metav1.DeleteOptions{})
	})

	fe := func(ip string) model.Frontend {
		return model.Frontend{Addr: netip.MustParseAddr(ip), Port: 80, Proto: model.TCP}
	}
	flags := func(ip string) (model.FrontendFlags, bool) {
		maps, closeMaps, err := datapath.OpenPinned(a.pins)
		if err != nil {
			t.Fatal(err)
		}
		defer closeMaps()
		return lb.Flags(maps, fe(ip))
	}
	testenv.WaitFor(t, bound, "the valid external IP and the walled LoadBalancer IP programmed", func() bool {
		_, ext := flags("192.0.2.202")
		lbFlags, lbIP := flags("192.0.2.201")
		return ext && lbIP && lbFlags&model.SourceRanges != 0
	})
	if f, _ := flags("192.0.2.202"); f&model.SourceRanges != 0 {
		t.Errorf("external IP restricted (flags %b): source ranges apply to LoadBalancer IPs only", f)
	}
	msg := eventFor(t, "default", "Service", "unvalidated", "InvalidField")
	for _, want := range []string{`spec.loadBalancerSourceRanges[1]: "bad-range" is not a CIDR`, "no client may reach", `spec.externalIPs[0]: "not-an-ip"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q does not say %q", msg, want)
		}
	}

	port, name := int32(8080), "http"
	orphan := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "orphan", Namespace: "default"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.7.8"}}},
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices("default").Create(ctx(t), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.DiscoveryV1().EndpointSlices("default").Delete(ctx(t), "orphan", metav1.DeleteOptions{})
	})
	if msg := eventFor(t, "default", "EndpointSlice", "orphan", "InvalidField"); !strings.Contains(msg, "metadata.labels[kubernetes.io/service-name]: missing") {
		t.Errorf("event %q does not name the missing label", msg)
	}
	m := a.get("/metrics", a.metrics)
	var n float64
	if _, err := fmt.Sscanf(grep(m, `netcube_config_problems{reason="InvalidField"}`), `netcube_config_problems{reason="InvalidField"} %g`, &n); err != nil || n < 2 {
		t.Errorf("metrics do not count the 2 invalid objects (%v):\n%s", err, grep(m, "netcube_config_problems"))
	}
}

// TestFrontendConflictFromTheAPI: two Services with the same external IP and
// port (which the API server allows): the older one is programmed even
// though its name sorts last, the newer one gets a Warning Event naming
// it, and when the older one is deleted the newer one takes the frontend
// over instead of it vanishing.
func TestFrontendConflictFromTheAPI(t *testing.T) {
	a := startAgent(t, pinDir(t))
	c, ns := env.Client, "default"
	shared := model.Frontend{Addr: netip.MustParseAddr("192.0.2.210"), Port: 80, Proto: model.TCP}
	create := func(name, backend string) {
		t.Helper()
		s := service(ns, name, nil)
		s.Spec.ExternalIPs = []string{"192.0.2.210"}
		if _, err := c.CoreV1().Services(ns).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), slice(ns, name, name+"-v4", false, ready(backend)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), name, metav1.DeleteOptions{}) })
	}
	backendIs := func(want string) func() bool {
		return func() bool {
			bs := programmed(t, a.pins)[shared]
			return len(bs) == 1 && bs[0].Addr.String() == want
		}
	}
	create("z-older", "10.244.8.1")
	testenv.WaitFor(t, bound, "the older Service on the shared frontend", backendIs("10.244.8.1"))
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has a resolution of one second
	create("a-newer", "10.244.8.2")
	msg := eventFor(t, ns, "Service", "a-newer", "FrontendConflict")
	if !strings.Contains(msg, "192.0.2.210:80/TCP is also claimed by Service default/z-older") {
		t.Errorf("event %q does not name the frontend and the Service programmed", msg)
	}
	if !backendIs("10.244.8.1")() {
		t.Fatalf("shared frontend has %v, want z-older's 10.244.8.1", programmed(t, a.pins)[shared])
	}
	if err := c.CoreV1().Services(ns).Delete(ctx(t), "z-older", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "the newer Service taking the frontend over", backendIs("10.244.8.2"))
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestInvalidPolicyFromTheAPI: a NetworkPolicy stored past validation with
// an unreadable ipBlock fails closed (the peer allows nothing, the policy
// still isolates its pod: an endpoint is written), and the field is named
// in a Warning Event and counted; a policy naming a port no pod has is
// reported on the policy too.
func TestInvalidPolicyFromTheAPI(t *testing.T) {
	a := startAgent(t, pinDir(t))
	ns := "np-invalid"
	runningPod(t, ns, "web", map[string]string{"app": "web"}, "10.244.0.77")
	endpoints := func() float64 {
		var n float64
		_, _ = fmt.Sscanf(grep(a.get("/metrics", a.metrics), `netcube_policy_entries{table="endpoints"}`), `netcube_policy_entries{table="endpoints"} %g`, &n)
		return n
	}
	if n := endpoints(); n != 0 {
		t.Fatalf("%v policy endpoints before any policy", n)
	}
	bad := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-cidr", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}},
		},
	}
	if err := env.StoreDirect(ctx(t), []kubeenv.StoredObject{
		{Resource: networkingv1.Resource("networkpolicies"), Version: networkingv1.SchemeGroupVersion, Object: bad},
	}); err != nil {
		t.Fatal(err)
	}
	if msg := eventFor(t, ns, "NetworkPolicy", "bad-cidr", "InvalidField"); !strings.Contains(msg, "spec.ingress[0].from[0].ipBlock.cidr") {
		t.Errorf("event %q does not name the field", msg)
	}
	testenv.WaitFor(t, 10*time.Second, "the pod isolated (fail closed)", func() bool { return endpoints() == 1 })

	http := intstr.FromString("http")
	named := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "named", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}},
		},
	}
	if _, err := env.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx(t), named, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if msg := eventFor(t, ns, "NetworkPolicy", "named", "UnmatchedPort"); !strings.Contains(msg, `port "http"`) {
		t.Errorf("event %q does not name the port", msg)
	}
	m := a.get("/metrics", a.metrics)
	for _, want := range []string{`netcube_config_problems{reason="InvalidField"} 1`, `netcube_config_problems{reason="UnmatchedPort"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "netcube_config_problems"))
		}
	}
}
