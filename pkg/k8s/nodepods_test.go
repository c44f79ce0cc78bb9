package k8s

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/pkg/model"
)

// TestNodePodsRoundTrip: what a node's agent writes of its pods is read
// back by another agent as the same pods, on that node; host-network pods
// and pods without an address are not written, and the order of the pods
// does not change the object.
func TestNodePodsRoundTrip(t *testing.T) {
	web := &model.Pod{ID: model.PodID{Namespace: "shop", Name: "web-1"}, Labels: map[string]string{"app": "web"}, Node: "n1",
		IPs:   []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")},
		Ports: []model.NamedPort{{Name: "http", Port: 8080, Proto: model.TCP}, {Name: "dns", Port: 53, Proto: model.UDP}}}
	db := &model.Pod{ID: model.PodID{Namespace: "data", Name: "db-0"}, Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.6")}}
	host := &model.Pod{ID: model.PodID{Namespace: "kube-system", Name: "proxy"}, Node: "n1", HostNetwork: true, IPs: []netip.Addr{netip.MustParseAddr("192.168.0.1")}}
	pending := &model.Pod{ID: model.PodID{Namespace: "shop", Name: "web-2"}, Node: "n1"}

	spec := ToNodePodsSpec([]*model.Pod{web, host, db, pending})
	if again := ToNodePodsSpec([]*model.Pod{db, pending, web, host}); !reflect.DeepEqual(spec, again) {
		t.Errorf("the same pods in another order give another object:\n%+v\n%+v", spec, again)
	}
	got, err := FromNodePods(&NodePods{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if want := []*model.Pod{db, web}; !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if spec.Pods[1].Ports[0].Protocol != "" || spec.Pods[1].Ports[1].Protocol != "UDP" {
		t.Errorf("protocols written %+v, want TCP left out and UDP named", spec.Pods[1].Ports)
	}
}

// TestFromNodePodsRefusesBadPods: each invalid pod is left out, named by
// its index and field, and the valid ones beside it are used.
func TestFromNodePodsRefusesBadPods(t *testing.T) {
	good := NodePod{Namespace: "ns", Name: "good", IPs: []string{"10.244.2.7"}, Labels: map[string]string{"app": "a"}}
	if pods, err := FromNodePods(&NodePods{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: NodePodsSpec{Pods: []NodePod{good}}}); err != nil || len(pods) != 1 || pods[0].Node != "n2" {
		t.Fatalf("a valid pod: %+v, %v", pods, err) // the positive control
	}
	for _, c := range []struct {
		pod   NodePod
		field string
	}{
		{NodePod{Name: "p", IPs: []string{"10.0.0.1"}}, "spec.pods[1]: namespace"},
		{NodePod{Namespace: "ns", Name: "Bad_Name", IPs: []string{"10.0.0.1"}}, "spec.pods[1]: name"},
		{NodePod{Namespace: "ns", Name: "p"}, "spec.pods[1]: ips: empty"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.1", "fd00::1", "10.0.0.2"}}, "spec.pods[1]: ips: 3"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.300"}}, "spec.pods[1]: ips[0]"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"0.0.0.0"}}, "spec.pods[1]: ips[0]"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"127.0.0.1"}}, "spec.pods[1]: ips[0]"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.1"}, Labels: map[string]string{"bad key!": "v"}}, "spec.pods[1]: labels"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.1"}, Labels: map[string]string{"k": "bad value!"}}, "spec.pods[1]: labels[k]"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.1"}, Ports: []NodePodPort{{Name: "http", Port: 0}}}, "spec.pods[1]: ports[0]"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.1"}, Ports: []NodePodPort{{Name: "http", Port: 80, Protocol: "ICMP"}}}, "spec.pods[1]: ports[0]"},
		{NodePod{Namespace: "ns", Name: "p", IPs: []string{"10.0.0.1"}, Ports: []NodePodPort{{Port: 80}}}, "spec.pods[1]: ports[0]"},
		{NodePod{Namespace: "ns", Name: "good", IPs: []string{"10.0.0.1"}}, "spec.pods[1]: ns/good is listed twice"},
	} {
		pods, err := FromNodePods(&NodePods{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: NodePodsSpec{Pods: []NodePod{good, c.pod}}})
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v, want one naming %s", c.pod, err, c.field)
		}
		if len(pods) != 1 || pods[0].ID.Name != "good" {
			t.Errorf("%+v: pods used %+v, want the valid one alone", c.pod, pods)
		}
	}
	if _, err := FromNodePods(&NodePods{Spec: NodePodsSpec{Pods: []NodePod{good}}}); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("no name: error %v, want one naming metadata.name", err)
	}
}
