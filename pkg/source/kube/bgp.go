package kube

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// NetworkBGPPeerings is the resource of the NetworkBGPPeering CRD
// (deploy/helm/netcube/crds).
var NetworkBGPPeerings = schema.GroupVersionResource{Group: "netcube.io", Version: "v1alpha1", Resource: "networkbgppeerings"}

// bgpStream delivers the NetworkBGPPeerings. The CRD is optional, as the
// slices' is: while it is not installed there are none.
func (s *Source) bgpStream(c *client, h source.BGPHandler) *stream[*model.BGPPeering] {
	return &stream[*model.BGPPeering]{
		streamOptions: s.streamOptions(),
		name:          "networkbgppeerings",
		optional:      true,
		api:           dynamicResource{c.dynamic.Resource(NetworkBGPPeerings)},
		convert: func(o runtime.Object) *model.BGPPeering {
			u := o.(*unstructured.Unstructured)
			obj := report.Object{Kind: "NetworkBGPPeering", Name: u.GetName()}
			var api k8s.NetworkBGPPeering
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &api); err != nil {
				s.Report.SetErr(obj, report.InvalidField, fmt.Errorf("not a NetworkBGPPeering: %w", err))
				return nil
			}
			p, err := k8s.ToBGPPeering(&api)
			s.Report.SetErr(obj, report.InvalidField, err)
			return p
		},
		deliver: func(k types.NamespacedName, p *model.BGPPeering) { h.OnBGPPeering(k.Name, p) },
		forget:  s.forget("NetworkBGPPeering"),
		known: func() []types.NamespacedName {
			var out []types.NamespacedName
			for _, n := range slices.Sorted(slices.Values(h.BGPPeeringKeys())) {
				out = append(out, types.NamespacedName{Name: n})
			}
			return out
		},
	}
}

// runBGP delivers every NetworkBGPPeering to h, then tells it they are
// synced (at once when the CRD is not installed).
func (s *Source) runBGP(ctx context.Context, c *client, h source.BGPHandler) {
	st := s.bgpStream(c, h)
	go st.run(ctx)
	if waitSynced(ctx, st.synced.Load) {
		h.OnBGPPeeringsSynced()
	}
}
