package k8s

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netcube/netcube/pkg/model"
)

// The agent never trusts that the API server validated a field it relies
// on: ToService and ToEndpointSlice check every field the datapath uses,
// convert what is valid, and return one error naming each invalid field.
// An invalid field is left out (an external IP, a NodePort, a port), never
// guessed at; what guards access fails closed: invalid
// loadBalancerSourceRanges let no client reach the LoadBalancer IPs.

// ServiceNameLabel links an EndpointSlice to its Service.
const ServiceNameLabel = discoveryv1.LabelServiceName

// MaxAffinitySeconds is the API's upper bound of
// sessionAffinityConfig.clientIP.timeoutSeconds (one day).
const MaxAffinitySeconds = 86400

// DefaultAffinitySeconds is sessionAffinityConfig.clientIP.timeoutSeconds
// when unset (the API's default: 3 hours).
const DefaultAffinitySeconds = 10800

// FailsClosed says whether err (from ToService) made netcube restrict
// access: an invalid loadBalancerSourceRanges entry. A source that would
// otherwise keep an object's previous version must deliver this one.
func FailsClosed(err error) bool {
	var fc failClosed
	return errors.As(err, &fc)
}

type failClosed struct{ error }

func (f failClosed) Unwrap() error { return f.error }

// Proxied says whether netcube programs a Service at all: headless and
// ExternalName Services have no virtual IP to load-balance.
func Proxied(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// ToService converts a Service to what netcube programs: nil for headless
// and ExternalName Services (and for one with no valid ClusterIP). err names
// every field netcube could not use, each left out of the result.
func ToService(svc *corev1.Service) (*model.Service, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if svc.Name == "" {
		bad("metadata.name is empty")
	}
	switch svc.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	case corev1.ServiceTypeExternalName:
		return nil, errors.Join(errs...)
	default:
		bad("spec.type: %q is not a type netcube programs (ClusterIP, NodePort, LoadBalancer, ExternalName); programmed as ClusterIP", svc.Spec.Type)
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, errors.Join(errs...) // headless: DNS only
	}
	out := &model.Service{ID: model.ServiceID{Namespace: namespace(svc.Namespace), Name: svc.Name},
		Created: svc.CreationTimestamp.Unix()}
	if svc.CreationTimestamp.IsZero() {
		out.Created = 0
	}
	var ips []netip.Addr
	for i, s := range clusterIPs(svc) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			bad("spec.clusterIPs[%d]: %q is not an IP address", i, s)
			continue
		}
		ips = append(ips, ip.Unmap())
	}
	if kept := out.SetClusterIPs(ips); kept < len(ips) {
		bad("spec.clusterIPs: %d addresses, at most %d (one per family); %v ignored", len(ips), model.MaxClusterIPs, ips[kept:])
	}
	if len(out.ClusterIPs()) == 0 {
		bad("spec.clusterIP: no valid cluster IP (and not headless): netcube programs nothing for this Service")
		return nil, errors.Join(errs...)
	}
	external := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	var ports []model.ServicePort
	for i, p := range svc.Spec.Ports {
		proto, ok := protocol(p.Protocol)
		switch {
		case p.Port < 1 || p.Port > 65535:
			bad("spec.ports[%d].port: %d is not in 1-65535", i, p.Port)
			continue
		case !ok:
			bad("spec.ports[%d].protocol: %q is not supported (TCP, UDP, SCTP)", i, p.Protocol)
			continue
		}
		if len(svc.Spec.Ports) > 1 && p.Name == "" {
			bad("spec.ports[%d].name: required when a Service has several ports", i)
		}
		sp := model.ServicePort{Name: p.Name, Port: uint16(p.Port), Proto: proto}
		switch {
		case p.NodePort == 0:
		case p.NodePort < 1 || p.NodePort > 65535:
			bad("spec.ports[%d].nodePort: %d is not in 1-65535", i, p.NodePort)
		case !external:
			bad("spec.ports[%d].nodePort: %d on a Service of type %s, which has no NodePorts; ignored", i, p.NodePort, typeName(svc))
		default:
			sp.NodePort = uint16(p.NodePort)
		}
		ports = append(ports, sp)
	}
	out.SetPorts(ports)
	out.External = externalAccess(svc, bad)
	out.Affinity = affinity(svc, bad)
	out.InternalLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	algo, err := ParseAlgorithm(svc.Annotations[AnnotationAlgorithm])
	if err != nil {
		bad("metadata.annotations[%s]: %w", AnnotationAlgorithm, err)
	}
	out.Algorithm = algo
	out.PreferClose = preferClose(svc)
	out.PreferSameNode = svc.Spec.TrafficDistribution != nil && *svc.Spec.TrafficDistribution == corev1.ServiceTrafficDistributionPreferSameNode
	return out, errors.Join(errs...)
}

func typeName(svc *corev1.Service) corev1.ServiceType {
	if svc.Spec.Type == "" {
		return corev1.ServiceTypeClusterIP
	}
	return svc.Spec.Type
}

func affinity(svc *corev1.Service, bad func(string, ...any)) uint32 {
	switch svc.Spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
		return 0
	case corev1.ServiceAffinityClientIP:
	default:
		bad("spec.sessionAffinity: %q is not None or ClientIP; no affinity", svc.Spec.SessionAffinity)
		return 0
	}
	c := svc.Spec.SessionAffinityConfig
	if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
		return DefaultAffinitySeconds
	}
	if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > MaxAffinitySeconds {
		bad("spec.sessionAffinityConfig.clientIP.timeoutSeconds: %d is not in 1-%d; using the default %d", t, MaxAffinitySeconds, DefaultAffinitySeconds)
		return DefaultAffinitySeconds
	}
	return uint32(*c.ClientIP.TimeoutSeconds)
}

// externalAccess reads how a Service is reached from outside the cluster,
// or nil when it is not.
func externalAccess(svc *corev1.Service, bad func(string, ...any)) *model.ExternalAccess {
	var ext model.ExternalAccess
	for i, s := range svc.Spec.ExternalIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			bad("spec.externalIPs[%d]: %q is not an IP address", i, s)
			continue
		}
		ext.IPs = append(ext.IPs, ip.Unmap())
	}
	lb := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	ext.ForeignLoadBalancer = lb && svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass != LoadBalancerClass
	if lb {
		for i, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP == "" {
				continue // a hostname only: nothing for this node to serve
			}
			ip, err := netip.ParseAddr(in.IP)
			if err != nil {
				bad("status.loadBalancer.ingress[%d].ip: %q is not an IP address", i, in.IP)
				continue
			}
			ext.LoadBalancerIPs = append(ext.LoadBalancerIPs, ip.Unmap())
		}
		ext.Restricted = len(svc.Spec.LoadBalancerSourceRanges) > 0
		for i, s := range svc.Spec.LoadBalancerSourceRanges {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err == nil {
				p, err = unmapPrefix(p)
			}
			if err != nil {
				// Fail closed: the ranges meant to restrict access; with one
				// unreadable, which clients may connect is unknown.
				err = failClosed{fmt.Errorf("spec.loadBalancerSourceRanges[%d]: %q is not a CIDR: %w; no client may reach the LoadBalancer IPs until it is fixed", i, s, err)}
				bad("%w", err)
				ext.Walled = true
				continue
			}
			ext.SourceRanges = append(ext.SourceRanges, p)
		}
		if ext.Walled {
			ext.SourceRanges = nil
		}
	} else if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		bad("spec.loadBalancerSourceRanges: set on a Service of type %s, which has no LoadBalancer IPs; ignored", typeName(svc))
	}
	nodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort || lb
	if len(ext.IPs) == 0 && len(ext.LoadBalancerIPs) == 0 && !nodePorts {
		return nil
	}
	ext.LocalOnly = svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	if len(svc.Labels) > 0 {
		ext.Labels = maps.Clone(svc.Labels)
	}
	switch hc := svc.Spec.HealthCheckNodePort; {
	case hc == 0:
	case hc < 1 || hc > 65535:
		bad("spec.healthCheckNodePort: %d is not in 1-65535", hc)
	case !ext.LocalOnly || !lb:
		bad("spec.healthCheckNodePort: %d needs type LoadBalancer with externalTrafficPolicy Local; ignored", hc)
	default:
		ext.HealthCheckNodePort = uint16(hc)
	}
	return &ext
}

func clusterIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	if svc.Spec.ClusterIP == "" {
		return nil
	}
	return []string{svc.Spec.ClusterIP}
}

func protocol(p corev1.Protocol) (model.Proto, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return model.TCP, true
	case corev1.ProtocolUDP:
		return model.UDP, true
	case corev1.ProtocolSCTP:
		// Any port to any targetPort, NodePorts and SNAT included: the
		// datapath updates SCTP's CRC32c when a port changes.
		return model.SCTP, true
	}
	return 0, false
}

// ServiceOf returns the Service an EndpointSlice belongs to, if any.
func ServiceOf(s *discoveryv1.EndpointSlice) (model.ServiceID, bool) {
	name := s.Labels[ServiceNameLabel]
	return model.ServiceID{Namespace: namespace(s.Namespace), Name: name}, name != ""
}

// namespace is ns, as one string shared by every object of the namespace
// that keeps it: each decoded object brings its own copy, and a cluster
// has few namespaces and many objects in each (100,000 Services kept 100,000
// copies: 1.6 MB).
func namespace(ns string) string { return unique.Make(ns).Value() }

// ToEndpointSlice converts an EndpointSlice: nil when it serves no Service
// netcube programs (FQDN addresses; no service-name label, which err
// names). An endpoint's first address is its address, as in kube-proxy (the
// API says the others are fungible). err names every field netcube could
// not use (an endpoint with an invalid address is left out).
func ToEndpointSlice(s *discoveryv1.EndpointSlice) (*model.EndpointSlice, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Name == "" {
		bad("metadata.name is empty")
	}
	var v6 bool
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4:
	case discoveryv1.AddressTypeIPv6:
		v6 = true
	case discoveryv1.AddressTypeFQDN:
		return nil, errors.Join(errs...)
	default:
		bad("addressType: %q is not IPv4, IPv6 or FQDN", s.AddressType)
		return nil, errors.Join(errs...)
	}
	id, ok := ServiceOf(s)
	if !ok {
		bad("metadata.labels[%s]: missing, so the slice belongs to no Service; its endpoints are not used", ServiceNameLabel)
		return nil, errors.Join(errs...)
	}
	out := model.NewEndpointSlice(id.Name, v6)
	if t, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		if at, err := time.Parse(time.RFC3339Nano, t); err == nil {
			out.ChangeTriggered = at.UnixNano()
		} else {
			bad("metadata.annotations[%s]: %q is not an RFC 3339 time; the change is not counted in network programming latency",
				corev1.EndpointsLastChangeTriggerTime, t)
		}
	}
	var ports []model.EndpointPort
	for i, p := range s.Ports {
		if p.Port == nil {
			continue // a port without a number: no target for this name (the API allows it)
		}
		if *p.Port < 1 || *p.Port > 65535 {
			bad("ports[%d].port: %d is not in 1-65535", i, *p.Port)
			continue
		}
		proto, ok := model.TCP, true
		if p.Protocol != nil {
			proto, ok = protocol(*p.Protocol)
		}
		if !ok {
			bad("ports[%d].protocol: %q is not supported (TCP, UDP, SCTP)", i, *p.Protocol)
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		ports = append(ports, model.EndpointPort{Name: name, Port: uint16(*p.Port), Proto: proto})
	}
	out.SetPorts(ports)
	out.Reserve(len(s.Endpoints))
	for i, ep := range s.Endpoints {
		if len(ep.Addresses) == 0 {
			bad("endpoints[%d].addresses: empty", i)
			continue
		}
		ip, err := netip.ParseAddr(ep.Addresses[0])
		if err != nil || ip.Is4() == v6 {
			bad("endpoints[%d].addresses[0]: %q is not an %s address", i, ep.Addresses[0], s.AddressType)
			continue
		}
		addEndpoint(out, ip, ep)
	}
	return out, errors.Join(errs...)
}

func addEndpoint(to *model.EndpointSlice, ip netip.Addr, ep discoveryv1.Endpoint) {
	c := ep.Conditions
	ready := c.Ready == nil || *c.Ready
	serving := ready
	if c.Serving != nil {
		serving = *c.Serving
	}
	var node, zones, nodes string
	if ep.NodeName != nil {
		node = *ep.NodeName
	}
	if ep.Hints != nil {
		names := make([]string, 0, len(ep.Hints.ForZones))
		for _, z := range ep.Hints.ForZones {
			names = append(names, z.Name)
		}
		zones = strings.Join(names, ",")
		names = names[:0]
		for _, n := range ep.Hints.ForNodes {
			names = append(names, n.Name)
		}
		nodes = strings.Join(names, ",")
	}
	// Interned (EndpointSlice.Add): a handful per node, shared with their
	// strings by every endpoint of every Service.
	e := to.Add(ip, model.Placement{NodeName: node, ForZones: zones, ForNodes: nodes})
	e.Ready, e.Serving, e.Terminating = ready, serving, c.Terminating != nil && *c.Terminating
}

// ToNode converts a Node object (nil: deleted). An invalid pod CIDR is
// left out and named in the error; a second CIDR of one family too (pods
// get one address per family).
func ToNode(n *corev1.Node) (*model.NodeInfo, error) {
	if n == nil {
		return nil, nil
	}
	info := &model.NodeInfo{Name: n.Name, Zone: n.Labels[corev1.LabelTopologyZone], Labels: maps.Clone(n.Labels)}
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			info.Addresses = append(info.Addresses, ip.Unmap())
		}
	}
	var bad []string
	field, cidrs := "spec.podCIDRs", n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" { // set by older controllers only
		field, cidrs = "spec.podCIDR", []string{n.Spec.PodCIDR}
	}
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s[%d]: %q is not a CIDR; left out", field, i, c))
		case slices.ContainsFunc(info.PodCIDRs, func(q netip.Prefix) bool { return q.Addr().Is4() == p.Addr().Is4() }):
			bad = append(bad, fmt.Sprintf("%s[%d]: %s is a second CIDR of its family; left out", field, i, c))
		default:
			info.PodCIDRs = append(info.PodCIDRs, p.Masked())
		}
	}
	if len(bad) > 0 {
		return info, errors.New(strings.Join(bad, "; "))
	}
	return info, nil
}
