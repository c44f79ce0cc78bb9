package k8s

import (
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netcube/netcube/pkg/model"
)

// ServiceNameLabel links an EndpointSlice to its Service.
const ServiceNameLabel = discoveryv1.LabelServiceName

// ServiceOf returns the Service an EndpointSlice belongs to, if any.
func ServiceOf(s *discoveryv1.EndpointSlice) (model.ServiceID, bool) {
	name := s.Labels[ServiceNameLabel]
	return model.ServiceID{Namespace: s.Namespace, Name: name}, name != ""
}

// Proxied says whether netcube programs a Service at all: headless and
// ExternalName Services have no virtual IP to load-balance.
func Proxied(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// ValidateService reports what makes a Service unusable, naming the field.
func ValidateService(svc *corev1.Service) error {
	var errs []error
	if svc.Name == "" {
		errs = append(errs, errors.New("metadata.name is empty"))
	}
	if !Proxied(svc) {
		return errors.Join(errs...)
	}
	for _, ip := range clusterIPs(svc) {
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, fmt.Errorf("spec.clusterIPs: %q is not an IP address", ip))
		}
	}
	for i, p := range svc.Spec.Ports {
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, fmt.Errorf("spec.ports[%d].port: %d is not in 1-65535", i, p.Port))
		}
		if _, ok := protocol(p.Protocol); !ok {
			errs = append(errs, fmt.Errorf("spec.ports[%d].protocol: %q is not supported (TCP, UDP)", i, p.Protocol))
		}
		if len(svc.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, fmt.Errorf("spec.ports[%d].name: required when a Service has several ports", i))
		}
	}
	return errors.Join(errs...)
}

// ValidateEndpointSlice reports what makes an EndpointSlice unusable.
func ValidateEndpointSlice(s *discoveryv1.EndpointSlice) error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("metadata.name is empty"))
	}
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		errs = append(errs, fmt.Errorf("addressType: %q is not IPv4, IPv6 or FQDN", s.AddressType))
	}
	for i, p := range s.Ports {
		if p.Port != nil && (*p.Port < 1 || *p.Port > 65535) {
			errs = append(errs, fmt.Errorf("ports[%d].port: %d is not in 1-65535", i, *p.Port))
		}
	}
	if s.AddressType == discoveryv1.AddressTypeFQDN {
		return errors.Join(errs...)
	}
	for i, ep := range s.Endpoints {
		for _, a := range ep.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil || ip.Is4() != (s.AddressType == discoveryv1.AddressTypeIPv4) {
				errs = append(errs, fmt.Errorf("endpoints[%d].addresses: %q is not an %s address", i, a, s.AddressType))
			}
		}
	}
	return errors.Join(errs...)
}

// Frontends computes a Service's frontends (each ClusterIP x port) and the
// backends of each from the Service's EndpointSlices, as kube-proxy does:
// slices of the frontend's address family only; endpoint ports matched by
// the Service port's name (which also resolves named targetPorts); the ready
// endpoints, or, when none is ready, the serving ones that are terminating
// (so a Service being rolled keeps answering). Unset conditions mean ready,
// serving = ready, not terminating.
func Frontends(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) model.Frontends {
	out := model.Frontends{}
	if !Proxied(svc) {
		return out
	}
	for _, ipStr := range clusterIPs(svc) {
		ip, err := netip.ParseAddr(ipStr)
		if err != nil {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			proto, ok := protocol(sp.Protocol)
			if !ok {
				continue
			}
			fe := model.Frontend{Addr: ip, Port: uint16(sp.Port), Proto: proto}
			out[fe] = readyBackends(ip.Is4(), sp, slices)
		}
	}
	return out
}

func readyBackends(v4 bool, sp corev1.ServicePort, slices []*discoveryv1.EndpointSlice) []model.Backend {
	if bs := backendsWhere(v4, sp, slices, isReady); len(bs) > 0 {
		return bs
	}
	return backendsWhere(v4, sp, slices, isServingTerminating)
}

func isReady(c discoveryv1.EndpointConditions) bool { return c.Ready == nil || *c.Ready }

func isServingTerminating(c discoveryv1.EndpointConditions) bool {
	serving := isReady(c)
	if c.Serving != nil {
		serving = *c.Serving
	}
	return serving && c.Terminating != nil && *c.Terminating
}

func backendsWhere(v4 bool, sp corev1.ServicePort, slices []*discoveryv1.EndpointSlice,
	usable func(discoveryv1.EndpointConditions) bool) []model.Backend {
	family := discoveryv1.AddressTypeIPv6
	if v4 {
		family = discoveryv1.AddressTypeIPv4
	}
	var bs []model.Backend
	seen := map[model.Backend]bool{}
	for _, s := range slices {
		if s.AddressType != family {
			continue
		}
		port, ok := slicePort(s, sp)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			if !usable(ep.Conditions) {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Is4() != v4 {
					continue
				}
				b := model.Backend{Addr: ip, Port: port}
				if !seen[b] {
					seen[b] = true
					bs = append(bs, b)
				}
			}
		}
	}
	return bs
}

// slicePort finds the slice port serving Service port sp: same name and
// protocol (kube-proxy matches by name; an unnamed port matches "").
func slicePort(s *discoveryv1.EndpointSlice, sp corev1.ServicePort) (uint16, bool) {
	for _, p := range s.Ports {
		name, proto := "", corev1.ProtocolTCP
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		spProto := sp.Protocol
		if spProto == "" {
			spProto = corev1.ProtocolTCP
		}
		if name == sp.Name && proto == spProto && p.Port != nil {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

func clusterIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	return []string{svc.Spec.ClusterIP}
}

func protocol(p corev1.Protocol) (model.Proto, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return model.TCP, true
	case corev1.ProtocolUDP:
		return model.UDP, true
	}
	return 0, false
}
