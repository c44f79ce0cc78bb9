package k8s

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netcube/netcube/pkg/model"
)

// NodePods is what NetworkPolicy on other nodes needs of one node's pods,
// as the API serves it (the CRD in deploy/helm/netcube/crds,
// cluster-scoped, named after its Node). The agent of that node writes it
// from its own node's Pod objects; the other agents read it instead of
// every Pod of the cluster (--pod-source=nodepods), so a pod's status
// changes (readiness, restarts) reach one agent, and only its address,
// labels and named ports reach all.
type NodePods struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePodsSpec `json:"spec"`
}

// NodePodsSpec lists the node's pods that have an address of their own
// (host-network pods are the node's, no policy selects them).
type NodePodsSpec struct {
	Pods []NodePod `json:"pods"`
}

// NodePod is one pod: its name, addresses, labels and named container
// ports (an egress rule may allow a peer's port by name).
type NodePod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	IPs       []string          `json:"ips"`
	Labels    map[string]string `json:"labels,omitempty"`
	Ports     []NodePodPort     `json:"ports,omitempty"`
}

// NodePodPort is a named container port.
type NodePodPort struct {
	Name     string `json:"name"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"` // TCP (default), UDP or SCTP
}

// NodePodsGroupVersion is the API group and version of NodePods.
const NodePodsGroupVersion = "netcube.io/v1alpha1"

// FromNodePods converts and validates a node's NodePods: the pods it
// holds, each on the object's node. A pod with an invalid field is left
// out and named in the error (spec.pods[i].field): failing closed, its
// address matches no pod selector on other nodes until the object is
// right, while every valid pod is used.
func FromNodePods(np *NodePods) ([]*model.Pod, error) {
	if np.Name == "" {
		return nil, errors.New("metadata.name is empty: it names no node")
	}
	var errs []error
	out := make([]*model.Pod, 0, len(np.Spec.Pods))
	seen := make(map[model.PodID]int, len(np.Spec.Pods))
	for i, p := range np.Spec.Pods {
		pod, err := fromNodePod(np.Name, p)
		if err == nil {
			if j, dup := seen[pod.ID]; dup {
				err = fmt.Errorf("%s is listed twice (also spec.pods[%d])", pod.ID, j)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.pods[%d]: %w (the pod is not used)", i, err))
			continue
		}
		seen[pod.ID] = i
		out = append(out, pod)
	}
	return out, errors.Join(errs...)
}

func fromNodePod(node string, p NodePod) (*model.Pod, error) {
	if msgs := validation.IsDNS1123Label(p.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("namespace: %q: %s", p.Namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(p.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("name: %q: %s", p.Name, strings.Join(msgs, "; "))
	}
	if len(p.IPs) == 0 {
		return nil, errors.New("ips: empty")
	}
	if len(p.IPs) > 2 {
		return nil, fmt.Errorf("ips: %d addresses (a pod has one per family)", len(p.IPs))
	}
	out := &model.Pod{ID: model.PodID{Namespace: p.Namespace, Name: p.Name}, Labels: p.Labels, Node: node}
	for j, s := range p.IPs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() {
			return nil, fmt.Errorf("ips[%d]: %q is not a pod's address", j, s)
		}
		out.IPs = append(out.IPs, a.Unmap())
	}
	for k, v := range p.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("labels: key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return nil, fmt.Errorf("labels[%s]: %q: %s", k, v, strings.Join(msgs, "; "))
		}
	}
	for j, port := range p.Ports {
		proto, ok := model.TCP, true
		if port.Protocol != "" {
			proto, ok = policyProtocol((*corev1.Protocol)(&port.Protocol))
		}
		if !ok || port.Name == "" || port.Port < 1 || port.Port > 65535 {
			return nil, fmt.Errorf("ports[%d]: %s %s/%d is not a valid named port", j, port.Name, port.Protocol, port.Port)
		}
		out.Ports = append(out.Ports, model.NamedPort{Name: port.Name, Port: uint16(port.Port), Proto: proto})
	}
	return out, nil
}

// ToNodePodsSpec is what a node's agent writes for its pods: each one with
// an address of its own, sorted by namespace and name so that the same
// pods always give the same object (an unchanged set is not written again).
func ToNodePodsSpec(pods []*model.Pod) NodePodsSpec {
	out := NodePodsSpec{Pods: make([]NodePod, 0, len(pods))}
	for _, p := range pods {
		if p == nil || p.HostNetwork || len(p.IPs) == 0 {
			continue
		}
		np := NodePod{Namespace: p.ID.Namespace, Name: p.ID.Name, Labels: p.Labels}
		for _, a := range p.IPs {
			np.IPs = append(np.IPs, a.String())
		}
		for _, port := range p.Ports {
			np.Ports = append(np.Ports, NodePodPort{Name: port.Name, Port: int32(port.Port), Protocol: protocolName(port.Proto)})
		}
		out.Pods = append(out.Pods, np)
	}
	slices.SortFunc(out.Pods, func(a, b NodePod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// protocolName is a port's protocol as the API writes it ("" for TCP, the
// default, to keep the object small).
func protocolName(p model.Proto) string {
	if p == model.TCP {
		return ""
	}
	return p.String()
}
