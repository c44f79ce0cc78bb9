package kube

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// NetworkSlices is the resource of the NetworkSlice CRD
// (deploy/helm/netcube/crds).
var NetworkSlices = schema.GroupVersionResource{Group: "netcube.io", Version: "v1alpha1", Resource: "networkslices"}

// dynamicResource lists and watches a resource the agent has no Go client
// for (a CRD), as unstructured objects.
type dynamicResource struct{ r dynamic.ResourceInterface }

func (d dynamicResource) List(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return d.r.List(ctx, o)
}

func (d dynamicResource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return d.r.Watch(ctx, o)
}

// sliceStream delivers the NetworkSlices. The CRD is optional: while it is
// not installed the API server answers 404, which means "no slices" (any
// delivered before are deleted), not an unreachable API server, and the
// list is tried again now and then.
func (s *Source) sliceStream(c *client, h source.SliceHandler) *stream[*model.Slice] {
	return &stream[*model.Slice]{
		streamOptions: s.streamOptions(),
		name:          "networkslices",
		optional:      true,
		api:           dynamicResource{c.dynamic.Resource(NetworkSlices)},
		convert: func(o runtime.Object) *model.Slice {
			u := o.(*unstructured.Unstructured)
			obj := report.Object{Kind: "NetworkSlice", Name: u.GetName()}
			var api k8s.NetworkSlice
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &api); err != nil {
				s.Report.SetErr(obj, report.InvalidField, fmt.Errorf("not a NetworkSlice: %w", err))
				return nil
			}
			sl, err := k8s.ToSlice(&api)
			s.Report.SetErr(obj, report.InvalidField, err)
			return sl
		},
		deliver: func(k types.NamespacedName, sl *model.Slice) { h.OnSlice(k.Name, sl) },
		forget:  s.forget("NetworkSlice"),
		known: func() []types.NamespacedName {
			var out []types.NamespacedName
			for _, n := range slices.Sorted(slices.Values(h.SliceKeys())) {
				out = append(out, types.NamespacedName{Name: n})
			}
			return out
		},
	}
}
