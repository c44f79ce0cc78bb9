package yamldir

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// objKey identifies an object across files.
type objKey struct {
	kind string // "Service", "EndpointSlice", "Node", "Pod", "Namespace", "NetworkPolicy", "ClusterNetworkPolicy", "NetworkSlice" or "NetworkBGPPeering"
	types.NamespacedName
}

func (k objKey) String() string { return k.kind + " " + k.NamespacedName.String() }

func (k objKey) object() report.Object {
	return report.Object{Kind: k.kind, Namespace: k.Namespace, Name: k.Name}
}

// object is one decoded, valid document, converted.
type object struct {
	svc      *model.Service
	slice    *model.EndpointSlice
	node     *model.NodeInfo
	pod      *model.Pod
	ns       *model.Namespace
	policy   *model.Policy
	netSlice *model.Slice
	peering  *model.BGPPeering
	cnp      *model.ClusterPolicy
	// partial: the object is invalid, and applies without the fields err
	// names (a NetworkPolicy fails closed: what it cannot read allows
	// nothing; a pod's unreadable address or port is left out).
	partial bool
}

// parsed is what one file holds.
type parsed struct {
	objs map[objKey]object
	// invalid: objects whose documents decode but are not valid, with why;
	// each keeps its last valid version (unless it fails closed, and is
	// then in objs too, restricted).
	invalid map[objKey]error
	// unread: documents netcube does not read (another kind or
	// apiVersion), one line each.
	unread []string
}

// parseFile decodes the documents of one file. A syntax error fails the
// whole file (nothing in it can be trusted).
func parseFile(data []byte) (parsed, error) {
	p := parsed{objs: map[objKey]object{}, invalid: map[objKey]error{}}
	err := eachDocument(data, func(i int, tm metav1.TypeMeta, doc []byte) error {
		key, obj, err := decode(tm, doc)
		switch {
		case key.kind == "":
			p.unread = append(p.unread, fmt.Sprintf("document %d: kind %q apiVersion %q is not read by netcube (v1 Service, discovery.k8s.io/v1 EndpointSlice, v1 Node, v1 Pod, v1 Namespace, networking.k8s.io/v1 NetworkPolicy, policy.networking.k8s.io/v1beta1 ClusterNetworkPolicy, netcube.io/v1alpha1 NetworkSlice, netcube.io/v1alpha1 NetworkBGPPeering)", i, tm.Kind, tm.APIVersion))
		case key.Name == "":
			// Nothing can refer to a nameless object, nor replace or
			// delete it later: refused whole, whatever else it holds.
			p.invalid[key] = errors.Join(errors.New("metadata.name is empty"), err)
		case err != nil:
			p.invalid[key] = err
			if k8s.FailsClosed(err) || obj.partial {
				p.objs[key] = obj
			}
		default:
			p.objs[key] = obj
		}
		return nil
	})
	if err != nil {
		return parsed{}, err
	}
	return p, nil
}

// eachDocument calls fn with each non-empty document of a YAML (or JSON)
// stream, numbered from 1, and its type.
func eachDocument(data []byte, fn func(i int, tm metav1.TypeMeta, doc []byte) error) error {
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 1; ; i++ {
		var raw map[string]any
		if err := r.Decode(&raw); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if raw == nil {
			continue // empty document
		}
		doc, _ := yaml.Marshal(raw)
		var tm metav1.TypeMeta
		_ = yaml.Unmarshal(doc, &tm)
		if err := fn(i, tm, doc); err != nil {
			return err
		}
	}
}

// decode reads one document of a kind netcube reads, strictly (an unknown
// field is an error: a typo must not be silently ignored), and converts it.
func decode(tm metav1.TypeMeta, doc []byte) (objKey, object, error) {
	switch {
	case tm.Kind == "Service" && tm.APIVersion == "v1":
		var s corev1.Service
		err := yaml.UnmarshalStrict(doc, &s)
		key := objKey{"Service", nsName(s.ObjectMeta)}
		if err != nil {
			return key, object{}, err
		}
		s.Namespace = key.Namespace
		svc, err := k8s.ToService(&s)
		return key, object{svc: svc}, err
	case tm.Kind == "EndpointSlice" && tm.APIVersion == "discovery.k8s.io/v1":
		var s discoveryv1.EndpointSlice
		err := yaml.UnmarshalStrict(doc, &s)
		key := objKey{"EndpointSlice", nsName(s.ObjectMeta)}
		if err != nil {
			return key, object{}, err
		}
		s.Namespace = key.Namespace
		slice, err := k8s.ToEndpointSlice(&s)
		return key, object{slice: slice}, err
	case tm.Kind == "Node" && tm.APIVersion == "v1":
		var n corev1.Node
		err := yaml.UnmarshalStrict(doc, &n)
		key := objKey{"Node", types.NamespacedName{Name: n.Name}} // not namespaced
		if err != nil {
			return key, object{}, err
		}
		node, err := k8s.ToNode(&n)
		return key, object{node: node}, err
	case tm.Kind == "Pod" && tm.APIVersion == "v1":
		var p corev1.Pod
		err := yaml.UnmarshalStrict(doc, &p)
		key := objKey{"Pod", nsName(p.ObjectMeta)}
		if err != nil {
			return key, object{}, err
		}
		p.Namespace = key.Namespace
		pod, err := k8s.ToPod(&p)
		return key, object{pod: pod, partial: true}, err
	case tm.Kind == "Namespace" && tm.APIVersion == "v1":
		var n corev1.Namespace
		err := yaml.UnmarshalStrict(doc, &n)
		key := objKey{"Namespace", types.NamespacedName{Name: n.Name}} // not namespaced
		if err != nil {
			return key, object{}, err
		}
		return key, object{ns: k8s.ToNamespace(&n)}, nil
	case tm.Kind == "NetworkSlice" && tm.APIVersion == k8s.NetworkSliceGroupVersion:
		var ns k8s.NetworkSlice
		err := yaml.UnmarshalStrict(doc, &ns)
		key := objKey{"NetworkSlice", types.NamespacedName{Name: ns.Name}} // cluster-scoped
		if err != nil {
			return key, object{}, err
		}
		s, err := k8s.ToSlice(&ns)
		return key, object{netSlice: s}, err
	case tm.Kind == "NetworkBGPPeering" && tm.APIVersion == k8s.NetworkSliceGroupVersion:
		var bp k8s.NetworkBGPPeering
		err := yaml.UnmarshalStrict(doc, &bp)
		key := objKey{"NetworkBGPPeering", types.NamespacedName{Name: bp.Name}} // cluster-scoped
		if err != nil {
			return key, object{}, err
		}
		peering, err := k8s.ToBGPPeering(&bp)
		// A peer left out spoils only itself: the rest applies.
		return key, object{peering: peering, partial: peering != nil}, err
	case tm.Kind == "ClusterNetworkPolicy" && tm.APIVersion == cnpv1.SchemeGroupVersion.String():
		var cp cnpv1.ClusterNetworkPolicy
		err := yaml.UnmarshalStrict(doc, &cp)
		key := objKey{"ClusterNetworkPolicy", types.NamespacedName{Name: cp.Name}} // cluster-scoped
		if err != nil {
			return key, object{}, err
		}
		p, err := k8s.ToClusterPolicy(&cp)
		// One whose tier, priority or subject cannot be read keeps its
		// last version, as a NetworkPolicy whose pod selector cannot.
		return key, object{cnp: p, partial: p != nil}, err
	case tm.Kind == "NetworkPolicy" && tm.APIVersion == "networking.k8s.io/v1":
		var np networkingv1.NetworkPolicy
		err := yaml.UnmarshalStrict(doc, &np)
		key := objKey{"NetworkPolicy", nsName(np.ObjectMeta)}
		if err != nil {
			return key, object{}, err
		}
		np.Namespace = key.Namespace
		policy, err := k8s.ToPolicy(&np)
		// A policy whose pod selector cannot be read keeps its last
		// version: netcube cannot know which pods it meant to isolate.
		return key, object{policy: policy, partial: policy != nil}, err
	}
	return objKey{}, object{}, nil
}

func nsName(m metav1.ObjectMeta) types.NamespacedName {
	ns := m.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return types.NamespacedName{Namespace: ns, Name: m.Name}
}

// Parse decodes the Services and EndpointSlices of a YAML stream, failing
// on the first invalid one (for tests and tools sharing the sandbox's
// manifests).
func Parse(data []byte) ([]*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	var svcs []*corev1.Service
	var slices []*discoveryv1.EndpointSlice
	err := eachDocument(data, func(i int, tm metav1.TypeMeta, doc []byte) error {
		key, _, err := decode(tm, doc)
		if err != nil {
			return fmt.Errorf("document %d: %s: %w", i, key, err)
		}
		switch key.kind {
		case "Service":
			var s corev1.Service
			svcs = append(svcs, &s)
			return yaml.Unmarshal(doc, &s)
		case "EndpointSlice":
			var s discoveryv1.EndpointSlice
			slices = append(slices, &s)
			return yaml.Unmarshal(doc, &s)
		}
		return nil
	})
	return svcs, slices, err
}
