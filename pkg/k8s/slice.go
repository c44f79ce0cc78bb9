package k8s

import (
	"errors"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// The pod annotations for a pod's egress and ingress rates (the CNI
// bandwidth plugin's; Cilium's Bandwidth Manager honours the first):
// bits per second, a Kubernetes quantity ("10M").
const (
	EgressBandwidthAnnotation  = "kubernetes.io/egress-bandwidth"
	IngressBandwidthAnnotation = "kubernetes.io/ingress-bandwidth"
)

// ParseBandwidth reads a rate in bits per second ("100M", "1G"): a
// positive whole number of at most 100 Tbit/s.
func ParseBandwidth(s string) (uint64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a quantity (bits per second, e.g. 10M)", s)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 || v > 100e12 {
		return 0, fmt.Errorf("%q is not a rate netcube can enforce (a positive whole number of bits per second, at most 100T)", s)
	}
	return uint64(v), nil
}

// NetworkSliceGroupVersion is the API group and version of NetworkSlice.
const NetworkSliceGroupVersion = "netcube.io/v1alpha1"

// NetworkSlice is a network slice as the API serves it (the CRD in
// deploy/crds, cluster-scoped): its class, what its packets leave with,
// an optional egress rate per node, and the pods it selects.
type NetworkSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NetworkSliceSpec `json:"spec"`
}

// NetworkSliceSpec is a NetworkSlice's spec.
type NetworkSliceSpec struct {
	// Class: latency, throughput or best-effort.
	Class string `json:"class"`
	// DSCP its packets leave with, 0..63 (default: the class's: EF 46
	// for latency, AF11 10 for throughput, 0 for best effort).
	DSCP *int32 `json:"dscp,omitempty"`
	// EgressRate per node, in bits per second ("100M"); Burst, in
	// bytes ("64Ki"), what may leave at once after idling.
	EgressRate string `json:"egressRate,omitempty"`
	Burst      string `json:"burst,omitempty"`
	// Precedence decides for a pod two slices select: the higher wins.
	Precedence int32 `json:"precedence,omitempty"`
	// NamespaceSelector and PodSelector select its pods (absent: every
	// namespace; every pod).
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	PodSelector       *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// defaultDSCP is each class's DSCP when the slice names none (RFC 4594:
// expedited forwarding for the latency class, high-throughput data
// AF11 for bulk).
var defaultDSCP = map[model.SliceClass]uint8{model.Latency: 46, model.Throughput: 10, model.BestEffort: 0}

// ToSlice converts and validates a NetworkSlice. An error names the
// field; the slice is then not applied (its pods keep their slice until
// it is fixed, or go to best effort if it is new).
func ToSlice(s *NetworkSlice) (*model.Slice, error) {
	if s.Name == "" {
		return nil, errors.New("metadata.name is empty")
	}
	out := &model.Slice{Name: s.Name, Precedence: s.Spec.Precedence}
	var errs []error
	switch s.Spec.Class {
	case "latency":
		out.Class = model.Latency
	case "throughput":
		out.Class = model.Throughput
	case "best-effort", "":
		out.Class = model.BestEffort
	default:
		errs = append(errs, fmt.Errorf("spec.class: %q is not latency, throughput or best-effort", s.Spec.Class))
	}
	out.DSCP = defaultDSCP[out.Class]
	if d := s.Spec.DSCP; d != nil {
		if *d < 0 || *d > 63 {
			errs = append(errs, fmt.Errorf("spec.dscp: %d is not 0..63", *d))
		} else {
			out.DSCP = uint8(*d)
		}
	}
	if s.Spec.EgressRate != "" {
		r, err := ParseBandwidth(s.Spec.EgressRate)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.egressRate: %w", err))
		}
		out.Rate = r
	}
	if s.Spec.Burst != "" {
		q, err := resource.ParseQuantity(s.Spec.Burst)
		v, ok := q.AsInt64()
		switch {
		case err != nil || !ok || v <= 0 || v > math.MaxUint32:
			errs = append(errs, fmt.Errorf("spec.burst: %q is not a positive number of bytes (at most 4Gi)", s.Spec.Burst))
		case out.Rate == 0:
			errs = append(errs, errors.New("spec.burst: given without spec.egressRate"))
		default:
			out.Burst = uint64(v)
		}
	}
	var err error
	if out.Namespaces, err = selector(s.Spec.NamespaceSelector); err != nil {
		errs = append(errs, fmt.Errorf("spec.namespaceSelector: %w", err))
	}
	if out.Pods, err = selector(s.Spec.PodSelector); err != nil {
		errs = append(errs, fmt.Errorf("spec.podSelector: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// selector converts a label selector; absent selects everything (nil).
func selector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}
