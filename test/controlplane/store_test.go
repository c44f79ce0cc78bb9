package controlplane

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/model"
)

// TestStoreDirect: objects the sync benchmark bulk-loads straight into etcd
// are served by the API server like created ones, and reach the agent.
func TestStoreDirect(t *testing.T) {
	a := startAgent(t, pinDir(t))
	single := corev1.IPFamilyPolicySingleStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.200.7", ClusterIPs: []string{"10.96.200.7"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single, SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	port, name := int32(8080), "http"
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "direct"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.7.7"}}},
	}
	err := env.StoreDirect(ctx(t), []kubeenv.StoredObject{
		{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc},
		{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: sl},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "the API server to serve the stored Service", func() bool {
		got, err := env.Client.CoreV1().Services("default").Get(ctx(t), "direct", metav1.GetOptions{})
		return err == nil && got.Spec.ClusterIP == "10.96.200.7" && got.UID != ""
	})
	fe := model.Frontend{Addr: netip.MustParseAddr("10.96.200.7"), Port: 80, Proto: model.TCP}
	want := model.Backend{Addr: netip.MustParseAddr("10.244.7.7"), Port: 8080}
	testenv.WaitFor(t, bound, "the agent to program the stored Service", func() bool {
		bs := programmed(t, a.pins)[fe]
		return len(bs) == 1 && bs[0] == want
	})
	if err := env.Client.CoreV1().Services("default").Delete(ctx(t), "direct", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting the stored Service through the API: %v", err)
	}
}
