package k8s

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// LoadBalancerClass is the spec.loadBalancerClass netcube answers for
// (besides none).
const LoadBalancerClass = "netcube.io/lb"

// LoadBalancerIPsAnnotation asks for given LoadBalancer IPs, one per
// family, comma-separated (spec.loadBalancerIP is deprecated and holds
// one).
const LoadBalancerIPsAnnotation = "netcube.io/load-balancer-ips"

// NetworkLoadBalancerPool is a pool of LoadBalancer IPs as the API serves
// it (the CRD in deploy/helm/netcube/crds).
type NetworkLoadBalancerPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NetworkLoadBalancerPoolSpec `json:"spec"`
}

// NetworkLoadBalancerPoolSpec is a pool's spec.
type NetworkLoadBalancerPoolSpec struct {
	CIDRs           []string              `json:"cidrs"`
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`
}

// ToLBPool converts a pool. A CIDR that cannot be read is left out, with
// an error naming it; a selector that cannot be read makes the pool serve
// no Service (an error too), never every one.
func ToLBPool(p *NetworkLoadBalancerPool) (*model.LBPool, error) {
	if p.Name == "" {
		return nil, errors.New("metadata.name is empty")
	}
	out := &model.LBPool{Name: p.Name, Created: p.CreationTimestamp.Unix(), Services: labels.Everything()}
	if p.CreationTimestamp.IsZero() {
		out.Created = 0
	}
	var errs []error
	for i, c := range p.Spec.CIDRs {
		pr, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.cidrs[%d]: %q is not a CIDR; left out", i, c))
			continue
		}
		out.CIDRs = append(out.CIDRs, pr.Masked())
	}
	if len(p.Spec.CIDRs) == 0 {
		errs = append(errs, errors.New("spec.cidrs: empty; the pool has no address"))
	}
	if p.Spec.ServiceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.ServiceSelector)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.serviceSelector: %w; the pool serves no Service until it is fixed", err))
			sel = labels.Nothing()
		}
		out.Services = sel
	}
	return out, errors.Join(errs...)
}

// ToLBService reads what LoadBalancer IP assignment needs of a Service.
// A requested address that cannot be read is an error naming its field.
func ToLBService(svc *corev1.Service) (*model.LBService, error) {
	out := &model.LBService{
		ID:      model.ServiceID{Namespace: svc.Namespace, Name: svc.Name},
		Created: svc.CreationTimestamp.Unix(),
		Labels:  labels.Set(svc.Labels),
		Ours:    svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == LoadBalancerClass,
	}
	// A Service being deleted gives its addresses back (then its
	// cleanup finalizer goes, and with it the Service).
	out.Wants = out.Ours && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.DeletionTimestamp == nil
	if svc.CreationTimestamp.IsZero() {
		out.Created = 0
	}
	for _, f := range svc.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			out.Families = append(out.Families, model.IPv6)
		} else {
			out.Families = append(out.Families, model.IPv4)
		}
	}
	if len(out.Families) == 0 {
		out.Families = []model.Family{model.IPv4}
	}
	var errs []error
	if ip := svc.Spec.LoadBalancerIP; ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.loadBalancerIP: %q is not an IP address", ip))
		} else {
			out.Requested = append(out.Requested, a.Unmap())
		}
	}
	if v, ok := svc.Annotations[LoadBalancerIPsAnnotation]; ok {
		for i, s := range strings.Split(v, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				errs = append(errs, fmt.Errorf("metadata.annotations[%s][%d]: %q is not an IP address", LoadBalancerIPsAnnotation, i, s))
				continue
			}
			out.Requested = append(out.Requested, a.Unmap())
		}
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out.Current = append(out.Current, a.Unmap())
		}
	}
	out.Hold = len(errs) > 0
	return out, errors.Join(errs...)
}
