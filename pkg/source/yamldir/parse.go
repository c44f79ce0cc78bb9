package yamldir

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/pkg/k8s"
)

// objKey identifies an object across files.
type objKey struct {
	kind string // "Service" or "EndpointSlice"
	types.NamespacedName
}

func (k objKey) String() string { return k.kind + " " + k.NamespacedName.String() }

// object is one decoded, valid document.
type object struct {
	svc   *corev1.Service
	slice *discoveryv1.EndpointSlice
}

// parseFile decodes the documents of one file. A syntax error fails the
// whole file (nothing in it can be trusted); an invalid object is returned
// in invalid with its error, the others in objs.
func parseFile(data []byte) (objs map[objKey]object, invalid map[objKey]error, err error) {
	objs, invalid = map[objKey]object{}, map[objKey]error{}
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 0; ; i++ {
		var raw map[string]any
		if err := r.Decode(&raw); errors.Is(err, io.EOF) {
			return objs, invalid, nil
		} else if err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if raw == nil {
			continue // empty document
		}
		doc, _ := yaml.Marshal(raw)
		var tm metav1.TypeMeta
		_ = yaml.Unmarshal(doc, &tm)
		key, obj, err := decode(tm, doc)
		switch {
		case key.kind == "":
			continue // a kind netcube does not read (Deployment, ...)
		case err != nil:
			invalid[key] = err
		default:
			objs[key] = obj
		}
	}
}

func decode(tm metav1.TypeMeta, doc []byte) (objKey, object, error) {
	switch {
	case tm.Kind == "Service" && tm.APIVersion == "v1":
		var s corev1.Service
		err := yaml.UnmarshalStrict(doc, &s)
		key := objKey{"Service", nsName(s.ObjectMeta)}
		if err == nil {
			err = k8s.ValidateService(&s)
		}
		return key, object{svc: &s}, err
	case tm.Kind == "EndpointSlice" && tm.APIVersion == "discovery.k8s.io/v1":
		var s discoveryv1.EndpointSlice
		err := yaml.UnmarshalStrict(doc, &s)
		key := objKey{"EndpointSlice", nsName(s.ObjectMeta)}
		if err == nil {
			err = k8s.ValidateEndpointSlice(&s)
		}
		return key, object{slice: &s}, err
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
	objs, invalid, err := parseFile(data)
	if err != nil {
		return nil, nil, err
	}
	for k, err := range invalid {
		return nil, nil, fmt.Errorf("%s: %w", k, err)
	}
	var svcs []*corev1.Service
	var slices []*discoveryv1.EndpointSlice
	for _, o := range objs {
		if o.svc != nil {
			svcs = append(svcs, o.svc)
		} else {
			slices = append(slices, o.slice)
		}
	}
	return svcs, slices, nil
}
