package k8s

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

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
	if _, err := ParseAlgorithm(svc.Annotations[AnnotationAlgorithm]); err != nil {
		errs = append(errs, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationAlgorithm, err))
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

// ToService converts a Service to what netcube programs, or nil when netcube
// does not program it (headless and ExternalName Services). Ports of
// protocols netcube does not handle (SCTP) are left out; ValidateService is
// the strict check for hand-written input.
func ToService(svc *corev1.Service) *model.Service {
	if !Proxied(svc) {
		return nil
	}
	out := &model.Service{ID: model.ServiceID{Namespace: svc.Namespace, Name: svc.Name}}
	for _, s := range clusterIPs(svc) {
		if ip, err := netip.ParseAddr(s); err == nil {
			out.ClusterIPs = append(out.ClusterIPs, ip.Unmap())
		}
	}
	for _, p := range svc.Spec.Ports {
		proto, ok := protocol(p.Protocol)
		if !ok || p.Port < 1 || p.Port > 65535 {
			continue
		}
		sp := model.ServicePort{Name: p.Name, Port: uint16(p.Port), Proto: proto}
		if p.NodePort > 0 && p.NodePort <= 65535 {
			sp.NodePort = uint16(p.NodePort)
		}
		out.Ports = append(out.Ports, sp)
	}
	out.External = externalAccess(svc)
	out.Affinity = affinity(svc)
	out.InternalLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	out.Algorithm, _ = ParseAlgorithm(svc.Annotations[AnnotationAlgorithm])
	out.PreferClose = preferClose(svc)
	out.PreferSameNode = svc.Spec.TrafficDistribution != nil && *svc.Spec.TrafficDistribution == corev1.ServiceTrafficDistributionPreferSameNode
	return out
}

// placements interns endpoint placements: there are a handful per node,
// shared by all the endpoints of every Service (their strings too).
var placements struct {
	sync.Mutex
	m map[model.Placement]*model.Placement
}

func placement(k model.Placement) *model.Placement {
	placements.Lock()
	defer placements.Unlock()
	if p := placements.m[k]; p != nil {
		return p
	}
	if placements.m == nil {
		placements.m = map[model.Placement]*model.Placement{}
	}
	p := &k
	placements.m[k] = p
	return p
}

// ToEndpointSlice converts an EndpointSlice, or returns nil when it serves
// no Service netcube programs (no service-name label, or FQDN addresses).
// An endpoint's first address is its address, as in kube-proxy (the API
// says the others are fungible).
func ToEndpointSlice(s *discoveryv1.EndpointSlice) *model.EndpointSlice {
	id, ok := ServiceOf(s)
	if !ok || (s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) {
		return nil
	}
	v6 := s.AddressType == discoveryv1.AddressTypeIPv6
	out := &model.EndpointSlice{Name: s.Name, Service: id, IPv6: v6}
	for _, p := range s.Ports {
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			continue // a port without a number: no target for this name
		}
		proto, ok := model.TCP, true
		if p.Protocol != nil {
			proto, ok = protocol(*p.Protocol)
		}
		if !ok {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		out.Ports = append(out.Ports, model.EndpointPort{Name: name, Port: uint16(*p.Port), Proto: proto})
	}
	out.Endpoints = make([]model.Endpoint, 0, len(s.Endpoints))
	for _, ep := range s.Endpoints {
		if len(ep.Addresses) == 0 {
			continue
		}
		ip, err := netip.ParseAddr(ep.Addresses[0])
		if err != nil || ip.Is4() == v6 {
			continue
		}
		c := ep.Conditions
		ready := c.Ready == nil || *c.Ready
		serving := ready
		if c.Serving != nil {
			serving = *c.Serving
		}
		e := model.Endpoint{Addr: ip, Ready: ready, Serving: serving, Terminating: c.Terminating != nil && *c.Terminating}
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
		if node != "" || zones != "" || nodes != "" {
			e.Placement = placement(model.Placement{NodeName: node, ForZones: zones, ForNodes: nodes})
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return out
}

// AnnotationAlgorithm picks a Service's load-balancing algorithm: "maglev"
// or "random"; absent, the agent's --lb-algorithm.
const AnnotationAlgorithm = "netcube.io/lb-algorithm"

// ParseAlgorithm reads an algorithm's name ("" is the default).
func ParseAlgorithm(s string) (model.Algorithm, error) {
	switch s {
	case "":
		return model.AlgorithmDefault, nil
	case "random":
		return model.AlgorithmRandom, nil
	case "maglev":
		return model.AlgorithmMaglev, nil
	}
	return model.AlgorithmDefault, fmt.Errorf("load-balancing algorithm %q: want random or maglev", s)
}

// preferClose: topology-aware routing asked for, by trafficDistribution or
// by the older annotation (as kube-proxy reads them).
func preferClose(svc *corev1.Service) bool {
	if td := svc.Spec.TrafficDistribution; td != nil && (*td == corev1.ServiceTrafficDistributionPreferClose ||
		*td == corev1.ServiceTrafficDistributionPreferSameZone || *td == corev1.ServiceTrafficDistributionPreferSameNode) {
		return true
	}
	mode := svc.Annotations[corev1.AnnotationTopologyMode]
	if mode == "" {
		mode = svc.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	}
	return mode == "Auto" || mode == "auto"
}

// DefaultAffinitySeconds is sessionAffinityConfig.clientIP.timeoutSeconds
// when unset (the API's default: 3 hours).
const DefaultAffinitySeconds = 10800

func affinity(svc *corev1.Service) uint32 {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
		return uint32(*c.ClientIP.TimeoutSeconds)
	}
	return DefaultAffinitySeconds
}

// externalAccess reads how a Service is reached from outside the cluster,
// or nil when it is not.
func externalAccess(svc *corev1.Service) *model.ExternalAccess {
	var ips, lbIPs []netip.Addr
	var ranges []netip.Prefix
	for _, s := range svc.Spec.ExternalIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			ips = append(ips, ip.Unmap())
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil {
				lbIPs = append(lbIPs, ip.Unmap())
			}
		}
		for _, s := range svc.Spec.LoadBalancerSourceRanges {
			if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
				ranges = append(ranges, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmappedBits(p)).Masked())
			}
		}
	}
	nodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if len(ips) == 0 && len(lbIPs) == 0 && !nodePorts {
		return nil
	}
	ext := &model.ExternalAccess{IPs: ips, LoadBalancerIPs: lbIPs, SourceRanges: ranges,
		LocalOnly: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal}
	if hc := svc.Spec.HealthCheckNodePort; ext.LocalOnly && hc > 0 && hc <= 65535 {
		ext.HealthCheckNodePort = uint16(hc)
	}
	return ext
}

// LocalEndpoints counts the ready endpoints on node among a Service's
// slices (its health check's answer), each address once, in the family
// that has more: a dual-stack pod is one endpoint, as in kube-proxy, whose
// proxier of each family reports its own count.
func LocalEndpoints(slices []*model.EndpointSlice, node string) int {
	seen := map[netip.Addr]bool{}
	v4, v6 := 0, 0
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.NodeName() != node || !e.Ready || seen[e.Addr] {
				continue
			}
			seen[e.Addr] = true
			if e.Addr.Is4() {
				v4++
			} else {
				v6++
			}
		}
	}
	return max(v4, v6)
}

// Frontends computes a Service's frontends and the backends of each from
// the Service's EndpointSlices, as kube-proxy does: slices of the
// frontend's address family only; endpoint ports matched by the Service
// port's name and protocol (which also resolves named targetPorts); the
// ready endpoints, or, when none is ready, the serving ones that are
// terminating (so a Service being rolled keeps answering).
//
// The frontends are each ClusterIP x port (with internalTrafficPolicy
// Local: only the endpoints on node, flagged Local) and, for a Service reached from
// outside, each of node's addresses x NodePort and each external IP x port
// of the ClusterIPs' families, flagged External; with externalTrafficPolicy
// Local those have only the endpoints on node (and are flagged Local).
func Frontends(svc *model.Service, slices []*model.EndpointSlice, node model.Node) model.Frontends {
	if svc == nil {
		return nil
	}
	out := make(model.Frontends, 0, len(svc.ClusterIPs)*len(svc.Ports))
	algo := model.FrontendFlags(0)
	if svc.Algorithm == model.AlgorithmMaglev || svc.Algorithm == model.AlgorithmDefault && node.Algorithm == model.AlgorithmMaglev {
		algo = model.Maglev
	}
	internalFlags, internalNode := algo, ""
	if svc.InternalLocal {
		internalFlags, internalNode = algo|model.Local, node.Name
	}
	for _, ip := range svc.ClusterIPs {
		for _, sp := range svc.Ports {
			fe := model.Frontend{Addr: ip, Port: sp.Port, Proto: sp.Proto}
			bs := clusterBackends(svc, ip.Is6(), sp, slices, node, internalNode)
			out = append(out, model.FrontendBackends{Frontend: fe, Flags: internalFlags, Affinity: svc.Affinity,
				Backends: bs, Draining: draining(ip.Is6(), sp, slices, bs)})
		}
	}
	if svc.External == nil {
		return out
	}
	flags, local := algo|model.External, ""
	if svc.External.LocalOnly {
		flags, local = flags|model.Local, node.Name
	}
	for _, family := range svc.ClusterIPs {
		v6 := family.Is6()
		for _, sp := range svc.Ports {
			bs := clusterBackends(svc, v6, sp, slices, node, local)
			drain := draining(v6, sp, slices, bs)
			add := func(addr netip.Addr, port uint16) {
				if addr.Is6() == v6 {
					fe := model.Frontend{Addr: addr, Port: port, Proto: sp.Proto}
					out = append(out, model.FrontendBackends{Frontend: fe, Flags: flags, Affinity: svc.Affinity, Backends: bs, Draining: drain})
				}
			}
			if sp.NodePort != 0 {
				for _, a := range node.Addrs {
					add(a, sp.NodePort)
				}
			}
			for _, ip := range svc.External.IPs {
				add(ip, sp.Port)
			}
			// loadBalancerSourceRanges restrict the LoadBalancer IPs, with
			// the ranges of their family (none: no restriction).
			var ranges []netip.Prefix
			for _, r := range svc.External.SourceRanges {
				if r.Addr().Is6() == v6 {
					ranges = append(ranges, r)
				}
			}
			for _, ip := range svc.External.LoadBalancerIPs {
				add(ip, sp.Port)
				if len(ranges) > 0 && ip.Is6() == v6 {
					out[len(out)-1].Flags |= model.SourceRanges
					out[len(out)-1].SourceRanges = ranges
				}
			}
		}
	}
	return out
}

// unmappedBits: an IPv4-mapped IPv6 prefix (::ffff:a.b.c.d/n) loses 96
// bits when its address is unmapped.
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return 96
	}
	return 0
}

// clusterBackends are a frontend's backends: this node's (onNode, for a
// Local policy), else, for a Service preferring close endpoints whose
// endpoints are all hinted and some for this node's zone, those; else all.
// The conditions are kube-proxy's: hints are all or nothing.
func clusterBackends(svc *model.Service, v6 bool, sp model.ServicePort, slices []*model.EndpointSlice, node model.Node, onNode string) []model.Backend {
	if onNode != "" || !svc.PreferClose {
		return readyBackends(v6, sp, slices, onNode)
	}
	if svc.PreferSameNode && node.Name != "" && allReady(v6, slices, func(e *model.Endpoint) bool { return e.HintedForNode("") }) {
		if bs := backendsWhere(v6, sp, slices, func(e *model.Endpoint) bool { return e.Ready && e.HintedForNode(node.Name) }); len(bs) > 0 {
			return bs
		}
	}
	if node.Zone == "" {
		return readyBackends(v6, sp, slices, "")
	}
	inZone, hinted := 0, true
	for _, s := range slices {
		if s.IPv6 != v6 {
			continue
		}
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			if !e.Ready {
				continue
			}
			if !e.Hinted() {
				hinted = false
			} else if e.HintedFor(node.Zone) {
				inZone++
			}
		}
	}
	if !hinted || inZone == 0 {
		return readyBackends(v6, sp, slices, "")
	}
	return backendsWhere(v6, sp, slices, func(e *model.Endpoint) bool { return e.Ready && e.HintedFor(node.Zone) })
}

// allReady says whether every ready endpoint of the family satisfies ok.
func allReady(v6 bool, slices []*model.EndpointSlice, ok func(*model.Endpoint) bool) bool {
	for _, s := range slices {
		if s.IPv6 != v6 {
			continue
		}
		for i := range s.Endpoints {
			if e := &s.Endpoints[i]; e.Ready && !ok(e) {
				return false
			}
		}
	}
	return true
}

// readyBackends: the ready endpoints, else the serving terminating ones;
// only those on node onNode unless it is "".
func readyBackends(v6 bool, sp model.ServicePort, slices []*model.EndpointSlice, onNode string) []model.Backend {
	ready, terminating := isReady, isServingTerminating
	if onNode != "" {
		ready = func(e *model.Endpoint) bool { return e.NodeName() == onNode && isReady(e) }
		terminating = func(e *model.Endpoint) bool { return e.NodeName() == onNode && isServingTerminating(e) }
	}
	if bs := backendsWhere(v6, sp, slices, ready); len(bs) > 0 {
		return bs
	}
	return backendsWhere(v6, sp, slices, terminating)
}

// draining: the terminating endpoints not among selected, whose
// established flows are kept.
func draining(v6 bool, sp model.ServicePort, from []*model.EndpointSlice, selected []model.Backend) []model.Backend {
	var out []model.Backend
	for _, b := range backendsWhere(v6, sp, from, func(e *model.Endpoint) bool { return e.Terminating }) {
		if !slices.Contains(selected, b) {
			out = append(out, b)
		}
	}
	return out
}

func isReady(e *model.Endpoint) bool { return e.Ready }

func isServingTerminating(e *model.Endpoint) bool { return e.Serving && e.Terminating }

func backendsWhere(v6 bool, sp model.ServicePort, from []*model.EndpointSlice, usable func(*model.Endpoint) bool) []model.Backend {
	var bs []model.Backend
	var seen map[model.Backend]bool // an endpoint may be in two slices while it moves between them
	for n, s := range from {
		if s.IPv6 != v6 {
			continue
		}
		port, ok := slicePort(s, sp)
		if !ok {
			continue
		}
		if n > 0 && seen == nil {
			seen = make(map[model.Backend]bool, len(bs))
			for _, b := range bs {
				seen[b] = true
			}
		}
		for i := range s.Endpoints {
			if e := &s.Endpoints[i]; usable(e) {
				b := model.Backend{Addr: e.Addr, Port: port}
				if seen != nil {
					if seen[b] {
						continue
					}
					seen[b] = true
				}
				bs = append(bs, b)
			}
		}
	}
	return bs
}

// slicePort finds the slice port serving Service port sp: same name and
// protocol (kube-proxy matches by name; an unnamed port matches "").
func slicePort(s *model.EndpointSlice, sp model.ServicePort) (uint16, bool) {
	for _, p := range s.Ports {
		if p.Name == sp.Name && p.Proto == sp.Proto {
			return p.Port, true
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
