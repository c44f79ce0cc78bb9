package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/source/kube"
)

const nodePodsCRD = chart + "/crds/nodepods.yaml"

// TestNodePodsSource: with --pod-source=nodepods each agent watches only
// its own node's Pod objects and learns the other nodes' pods from the
// NodePods their agents write. Two hollow agents on two nodes, each with
// a pod: each knows the other's pod, with its labels; the object is owned
// by its Node and lists that node's pods alone; a label change reaches the
// other agent as one request, while a pod's status change is not written
// at all; a
// deleted pod leaves; a NodePods deleted by hand is written again; and a
// NodePods with an invalid pod, or one at an address outside its Node's
// pod CIDRs, has its valid pods used and the others named in a Warning
// Event and left out (failing closed).
func TestNodePodsSource(t *testing.T) {
	installCRD(t, nodePodsCRD, kube.NodePodsResource)
	c, d, ns := env.Client, dynClient(t), "nodepods"
	dir, kubeconfig := hollowDir(t)
	uids := map[string]types.UID{}
	for i, name := range []string{"np-a", "np-b", "np-c"} { // np-c has no agent
		cidr := "10.251." + string(rune('1'+i)) + ".0/24"
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2." + string(rune('1'+i))}}}}
		created, err := c.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = created.UID
		t.Cleanup(func() {
			_ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
			// No garbage collector runs here to follow the owner reference.
			_ = d.Resource(kube.NodePodsResource).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	testNamespace(t, ns)
	runningPodOn(t, ns, "server", "np-a", map[string]string{"app": "server"}, "10.251.1.5")
	client := runningPodOn(t, ns, "client", "np-b", map[string]string{"app": "client"}, "10.251.2.5")
	sockets := map[string]string{}
	for _, n := range []string{"np-a", "np-b"} {
		sockets[n] = filepath.Join(dir, n+".sock")
		startHollow(t, dir, kubeconfig, n, nil, "--pod-source=nodepods", "--api-socket="+sockets[n])
	}
	// pods is what an agent's policy cube holds of the test's pods.
	pods := func(node string) map[string]policy.PodInfo {
		out := map[string]policy.PodInfo{}
		_ = json.Unmarshal([]byte(unixGet(sockets[node], policy.PodsPath)), &out)
		maps.DeleteFunc(out, func(k string, _ policy.PodInfo) bool { return !strings.HasPrefix(k, ns+"/") })
		return out
	}
	knows := func(node, pod, on, ip string, labels map[string]string) func() bool {
		return func() bool {
			p, ok := pods(node)[ns+"/"+pod]
			return ok && p.Node == on && len(p.IPs) == 1 && p.IPs[0].String() == ip && maps.Equal(p.Labels, labels)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "np-a knows np-b's pod, from np-b's NodePods", knows("np-a", "client", "np-b", "10.251.2.5", map[string]string{"app": "client"}))
	testenv.WaitFor(t, 10*time.Second, "np-b knows np-a's pod", knows("np-b", "server", "np-a", "10.251.1.5", map[string]string{"app": "server"}))
	testenv.WaitFor(t, bound, "np-a knows its own pod, from its Pod object", knows("np-a", "server", "np-a", "10.251.1.5", map[string]string{"app": "server"}))

	obj, err := d.Resource(kube.NodePodsResource).Get(ctx(t), "np-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owners := obj.GetOwnerReferences(); len(owners) != 1 || owners[0].Kind != "Node" || owners[0].UID != uids["np-b"] {
		t.Errorf("NodePods np-b owned by %+v, want Node np-b (%s)", owners, uids["np-b"])
	}
	listed, _, _ := unstructured.NestedSlice(obj.Object, "spec", "pods")
	if len(listed) != 1 || listed[0].(map[string]any)["name"] != "client" {
		t.Errorf("NodePods np-b lists %v, want its one pod", listed)
	}

	// A status change (readiness, as the kubelet writes it) leaves the
	// object as it was; the label change after it is the one write.
	gen := obj.GetGeneration()
	applies, nodeGets := apiRequests(t, "APPLY", "nodepods"), apiRequests(t, "GET", "nodes")
	client.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if client, err = c.CoreV1().Pods(ns).UpdateStatus(ctx(t), client, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // past the writer's debounce: a write now would be one of its own
	client.Labels["version"] = "2"
	if _, err = c.CoreV1().Pods(ns).Update(ctx(t), client, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "np-a sees the new label", knows("np-a", "client", "np-b", "10.251.2.5", map[string]string{"app": "client", "version": "2"}))
	if obj, err = d.Resource(kube.NodePodsResource).Get(ctx(t), "np-b", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if obj.GetGeneration() != gen+1 {
		t.Errorf("NodePods np-b went from generation %d to %d over a status change and a label change: want one write", gen, obj.GetGeneration())
	}
	// Each label change is one request: the writer's own write, coming
	// back to it through the watch, is not written again (nor its Node
	// read again).
	for v := 3; v <= 5; v++ {
		if client, err = c.CoreV1().Pods(ns).Get(ctx(t), "client", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		client.Labels["version"] = fmt.Sprint(v)
		if _, err = c.CoreV1().Pods(ns).Update(ctx(t), client, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, bound, "np-a sees the label change", knows("np-a", "client", "np-b", "10.251.2.5", map[string]string{"app": "client", "version": fmt.Sprint(v)}))
		time.Sleep(300 * time.Millisecond) // an echo's rewrite would come within the debounce
	}
	if a, g := apiRequests(t, "APPLY", "nodepods")-applies, apiRequests(t, "GET", "nodes")-nodeGets; a != 4 || g != 0 {
		t.Errorf("four label changes cost %g applies of NodePods and %g GETs of Nodes, want 4 and 0", a, g)
	}

	if err := c.CoreV1().Pods(ns).Delete(ctx(t), "client", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "np-a forgets the deleted pod", func() bool { _, ok := pods("np-a")["nodepods/client"]; return !ok })

	first, err := d.Resource(kube.NodePodsResource).Get(ctx(t), "np-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Resource(kube.NodePodsResource).Delete(ctx(t), "np-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "np-a's NodePods written again after its deletion", func() bool {
		again, err := d.Resource(kube.NodePodsResource).Get(ctx(t), "np-a", metav1.GetOptions{})
		return err == nil && again.GetUID() != first.GetUID()
	})
	testenv.WaitFor(t, bound, "np-b knows np-a's pod again", knows("np-b", "server", "np-a", "10.251.1.5", map[string]string{"app": "server"}))

	// Written by hand for a node with no agent: one valid pod, one whose
	// address is not one, one at an address of another node's pod CIDR.
	bad := &unstructured.Unstructured{}
	doc := `{"apiVersion": "netcube.io/v1alpha1", "kind": "NodePods", "metadata": {"name": "np-c"}, "spec": {"pods": [
		{"namespace": "nodepods", "name": "good", "ips": ["10.251.3.7"], "labels": {"app": "good"}},
		{"namespace": "nodepods", "name": "forged", "ips": ["10.251.3.300"], "labels": {"app": "admin"}},
		{"namespace": "nodepods", "name": "elsewhere", "ips": ["10.251.1.77"], "labels": {"app": "admin"}}]}}`
	if err := yaml.Unmarshal([]byte(doc), &bad.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Resource(kube.NodePodsResource).Create(ctx(t), bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Resource(kube.NodePodsResource).Delete(context.Background(), "np-c", metav1.DeleteOptions{})
	})
	testenv.WaitFor(t, bound, "np-a uses the valid pod of np-c's NodePods", knows("np-a", "good", "np-c", "10.251.3.7", map[string]string{"app": "good"}))
	for _, p := range []string{"forged", "elsewhere"} {
		if _, ok := pods("np-a")[ns+"/"+p]; ok {
			t.Errorf("np-a uses pod %s of np-c's NodePods", p)
		}
	}
	if msg := eventFor(t, "default", "NodePods", "np-c", "InvalidField"); !strings.Contains(msg, "spec.pods[1]: ips[0]") {
		t.Errorf("the Event says %q, want it to name spec.pods[1]: ips[0]", msg)
	}
	if msg := eventFor(t, "default", "NodePods", "np-c", "PodOutsideNode"); !strings.Contains(msg, "nodepods/elsewhere at [10.251.1.77]") {
		t.Errorf("the Event says %q, want it to name the pod outside np-c's pod CIDR", msg)
	}
}

// apiRequests is the API server's count of verb requests on resource
// (apiserver_request_total, every code and scope).
func apiRequests(t *testing.T, verb, resource string) float64 {
	t.Helper()
	b, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `verb="`+verb+`"`) || !strings.Contains(l, `resource="`+resource+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%g", &v); err == nil {
			n += v
		}
	}
	return n
}

// unixGet is the body of a GET of path on the agent's local API socket
// ("" on any error).
func unixGet(socket, path string) string {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	resp, err := hc.Get("http://agent" + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
