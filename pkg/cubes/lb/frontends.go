package lb

import (
	"net/netip"
	"slices"

	"github.com/netcube/netcube/pkg/model"
)

// LocalEndpoints counts the ready endpoints on node among a Service's
// slices (its health check's answer), each address once, in the family
// that has more: a dual-stack pod is one endpoint, as in kube-proxy, whose
// proxier of each family reports its own count.
func LocalEndpoints(slices []*model.EndpointSlice, node string) int {
	seen := map[netip.Addr]bool{}
	v4, v6 := 0, 0
	for _, s := range slices {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			addr := s.Addr(e)
			if e.NodeName() != node || !e.Ready || seen[addr] {
				continue
			}
			seen[addr] = true
			if addr.Is4() {
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
//
// A LoadBalancer IP's frontends are flagged Announce (this node answers
// ARP and NDP for the address) on every eligible node: with Cluster, every
// node; with Local, those with an endpoint here. ElectedFrontends narrows
// that to the one node an Elector picks.
func Frontends(svc *model.Service, slices []*model.EndpointSlice, node model.Node) model.Frontends {
	return ElectedFrontends(svc, slices, node, nil)
}

// Elector picks the one node that answers ARP and NDP for each
// LoadBalancer IP (pkg/l2announce), so that a client's switch learns one
// MAC for it, and a new one at once when that node dies.
type Elector interface {
	// Elected says whether this node announces ip, the eligible nodes
	// being every node (everyNode: externalTrafficPolicy Cluster) or
	// those of withEndpoints (Local: the nodes with a ready endpoint of
	// the Service in ip's family, or, when none has one, a serving
	// terminating one), of those alive. Called under the reconciler's
	// lock: it must not block.
	Elected(ip netip.Addr, everyNode bool, withEndpoints []string) bool
}

// ElectedFrontends is Frontends with the Announce flag only where el
// elects this node (nil el: on every eligible node, as Frontends).
func ElectedFrontends(svc *model.Service, slices []*model.EndpointSlice, node model.Node, el Elector) model.Frontends {
	if svc == nil {
		return nil
	}
	return appendElectedFrontends(nil, make(model.Frontends, 0, len(svc.ClusterIPs())*len(svc.Ports())), svc, slices, node, el)
}

// appendFrontends appends svc's frontends (Frontends) to out: a full sync
// computes them into buffers it reuses from one Service to the next.
func appendFrontends(a *backendArena, out model.Frontends, svc *model.Service, slices []*model.EndpointSlice, node model.Node) model.Frontends {
	return appendElectedFrontends(a, out, svc, slices, node, nil)
}

// appendElectedFrontends is appendFrontends with an elector (nil: none).
func appendElectedFrontends(a *backendArena, out model.Frontends, svc *model.Service, slices []*model.EndpointSlice, node model.Node, el Elector) model.Frontends {
	if svc == nil {
		return out
	}
	algo := model.FrontendFlags(0)
	if svc.Algorithm == model.AlgorithmMaglev || svc.Algorithm == model.AlgorithmDefault && node.Algorithm == model.AlgorithmMaglev {
		algo = model.Maglev
	}
	internalFlags, internalNode := algo, ""
	if svc.InternalLocal {
		internalFlags, internalNode = algo|model.Local, node.Name
	}
	for _, ip := range svc.ClusterIPs() {
		for _, sp := range svc.Ports() {
			fe := model.Frontend{Addr: ip, Port: sp.Port, Proto: sp.Proto}
			bs := clusterBackends(a, svc, ip.Is6(), sp, slices, node, internalNode)
			out = append(out, model.FrontendBackends{Frontend: fe, Flags: internalFlags, Affinity: svc.Affinity,
				Backends: bs, Draining: draining(a, ip.Is6(), sp, slices, bs)})
		}
	}
	if svc.External == nil {
		return out
	}
	flags, local := algo|model.External, ""
	if svc.External.LocalOnly {
		flags, local = flags|model.Local, node.Name
	}
	for _, family := range svc.ClusterIPs() {
		v6 := family.Is6()
		var candidates []string // Local, elected: the nodes that may announce this family's addresses
		candidatesKnown := false
		for _, sp := range svc.Ports() {
			bs := clusterBackends(a, svc, v6, sp, slices, node, local)
			drain := draining(a, v6, sp, slices, bs)
			// With Local, clients inside the cluster (pods, the node) reach
			// an in-cluster twin with every endpoint, as kube-proxy's
			// "short-circuit" sends them: Local keeps an outside client's
			// address, which an inside one keeps anyway.
			var everyBackend, everyDraining []model.Backend
			if svc.External.LocalOnly {
				everyBackend = clusterBackends(a, svc, v6, sp, slices, node, "")
				everyDraining = draining(a, v6, sp, slices, everyBackend)
			}
			add := func(addr netip.Addr, port uint16, extra model.FrontendFlags, ranges []netip.Prefix) {
				if addr.Is6() != v6 {
					return
				}
				fe := model.Frontend{Addr: addr, Port: port, Proto: sp.Proto}
				fb := model.FrontendBackends{Frontend: fe, Flags: flags | extra, Affinity: svc.Affinity, Backends: bs, Draining: drain, SourceRanges: ranges}
				if !svc.External.LocalOnly {
					out = append(out, fb)
					return
				}
				fb.Flags |= model.TwoScopes
				twin := fe
				twin.Internal = true
				out = append(out, fb, model.FrontendBackends{Frontend: twin, Flags: algo | model.External | extra&model.SourceRanges,
					Affinity: svc.Affinity, Backends: everyBackend, Draining: everyDraining, SourceRanges: ranges})
			}
			if sp.NodePort != 0 {
				for _, a := range node.Addrs {
					add(a, sp.NodePort, 0, nil)
				}
			}
			for _, ip := range svc.External.IPs {
				add(ip, sp.Port, 0, nil)
			}
			// loadBalancerSourceRanges restrict the LoadBalancer IPs, with
			// the ranges of their family: a Service with ranges of one
			// family only lets no client of the other in (fail closed;
			// kube-proxy leaves that family open).
			var ranges []netip.Prefix
			for _, r := range svc.External.SourceRanges {
				if r.Addr().Is6() == v6 {
					ranges = append(ranges, r)
				}
			}
			if el != nil && svc.External.LocalOnly && len(bs) > 0 && len(svc.External.LoadBalancerIPs) > 0 && !candidatesKnown {
				candidates, candidatesKnown = endpointNodes(v6, slices), true
			}
			for _, ip := range svc.External.LoadBalancerIPs {
				if ip.Is6() != v6 {
					continue // the other family's pass (and its elector's candidates)
				}
				var extra model.FrontendFlags
				if (!svc.External.LocalOnly || len(bs) > 0) && (el == nil || el.Elected(ip, !svc.External.LocalOnly, candidates)) {
					extra |= model.Announce
				}
				if svc.External.Restricted {
					add(ip, sp.Port, extra|model.SourceRanges, ranges)
				} else {
					add(ip, sp.Port, extra, nil)
				}
			}
		}
	}
	return out
}

// endpointNodes are the nodes with a ready endpoint of the family, or,
// if none has one, with a serving terminating one (whose backends a Local
// frontend then has, readyBackends): the nodes eligible to announce a
// Local Service's LoadBalancer IPs. Every node computes the same list.
func endpointNodes(v6 bool, from []*model.EndpointSlice) []string {
	for _, usable := range []func(*model.Endpoint) bool{isReady, isServingTerminating} {
		var out []string
		seen := map[string]bool{}
		for _, s := range from {
			if s.IPv6() != v6 {
				continue
			}
			for i := range s.Endpoints {
				e := &s.Endpoints[i]
				if n := e.NodeName(); n != "" && usable(e) && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// clusterBackends are a frontend's backends: this node's (onNode, for a
// Local policy), else, for a Service preferring close endpoints whose
// endpoints are all hinted and some for this node's zone, those; else all.
// The conditions are kube-proxy's: hints are all or nothing.
func clusterBackends(a *backendArena, svc *model.Service, v6 bool, sp model.ServicePort, slices []*model.EndpointSlice, node model.Node, onNode string) []model.Backend {
	if onNode != "" || !svc.PreferClose {
		return readyBackends(a, v6, sp, slices, onNode)
	}
	if svc.PreferSameNode && node.Name != "" && allReady(v6, slices, func(e *model.Endpoint) bool { return e.HintedForNode("") }) {
		if bs := backendsWhere(a, v6, sp, slices, func(e *model.Endpoint) bool { return e.Ready && e.HintedForNode(node.Name) }); len(bs) > 0 {
			return bs
		}
	}
	if node.Zone == "" {
		return readyBackends(a, v6, sp, slices, "")
	}
	inZone, hinted := 0, true
	for _, s := range slices {
		if s.IPv6() != v6 {
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
		return readyBackends(a, v6, sp, slices, "")
	}
	return backendsWhere(a, v6, sp, slices, func(e *model.Endpoint) bool { return e.Ready && e.HintedFor(node.Zone) })
}

// allReady says whether every ready endpoint of the family satisfies ok.
func allReady(v6 bool, slices []*model.EndpointSlice, ok func(*model.Endpoint) bool) bool {
	for _, s := range slices {
		if s.IPv6() != v6 {
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
func readyBackends(a *backendArena, v6 bool, sp model.ServicePort, slices []*model.EndpointSlice, onNode string) []model.Backend {
	ready, terminating := isReady, isServingTerminating
	if onNode != "" {
		ready = func(e *model.Endpoint) bool { return e.NodeName() == onNode && isReady(e) }
		terminating = func(e *model.Endpoint) bool { return e.NodeName() == onNode && isServingTerminating(e) }
	}
	if bs := backendsWhere(a, v6, sp, slices, ready); len(bs) > 0 {
		return bs
	}
	return backendsWhere(a, v6, sp, slices, terminating)
}

// draining: the terminating endpoints not among selected, whose
// established flows are kept.
func draining(a *backendArena, v6 bool, sp model.ServicePort, from []*model.EndpointSlice, selected []model.Backend) []model.Backend {
	var out []model.Backend
	for _, b := range backendsWhere(a, v6, sp, from, func(e *model.Endpoint) bool { return e.Terminating }) {
		if !slices.Contains(selected, b) {
			out = append(out, b)
		}
	}
	return out
}

func isReady(e *model.Endpoint) bool { return e.Ready }

func isServingTerminating(e *model.Endpoint) bool { return e.Serving && e.Terminating }

func backendsWhere(a *backendArena, v6 bool, sp model.ServicePort, from []*model.EndpointSlice, usable func(*model.Endpoint) bool) []model.Backend {
	// Sized once, for the usable endpoints: a full sync computes this for
	// every frontend, and growing it by appending made a quarter of that
	// sync's garbage (which, at GOGC=50, sets the agent's peak memory).
	n := 0
	for _, s := range from {
		if s.IPv6() == v6 {
			for i := range s.Endpoints {
				if usable(&s.Endpoints[i]) {
					n++
				}
			}
		}
	}
	if n == 0 {
		return nil
	}
	bs := a.take(n)
	var seen map[model.Backend]bool // an endpoint may be in two slices while it moves between them
	for n, s := range from {
		if s.IPv6() != v6 {
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
				b := model.Backend{Addr: s.Addr(e), Port: port}
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

// backendArena hands out the backend lists of a batch of frontends from
// one buffer, reused from batch to batch: the initial sync computes them
// for every frontend, only to pass them to the LB, which keeps none. A nil
// arena allocates each list.
type backendArena struct {
	buf  []model.Backend
	used int // taken since reset: the buffer's size for the next batch
}

// take returns an empty list with room for n backends (exactly: an
// append beyond reallocates, never overwriting the next list).
func (a *backendArena) take(n int) []model.Backend {
	if a == nil {
		return make([]model.Backend, 0, n)
	}
	a.used += n
	if cap(a.buf)-len(a.buf) < n {
		// The lists already taken keep the full buffer alive.
		a.buf = make([]model.Backend, 0, max(n, 2*cap(a.buf), 1024))
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l : l+n]
}

// reset reuses the buffer: the lists taken so far must no longer be used.
func (a *backendArena) reset() {
	if a.used > cap(a.buf) {
		a.buf = make([]model.Backend, 0, a.used)
	}
	a.buf, a.used = a.buf[:0], 0
}

// slicePort finds the slice port serving Service port sp: same name and
// protocol (kube-proxy matches by name; an unnamed port matches "").
func slicePort(s *model.EndpointSlice, sp model.ServicePort) (uint16, bool) {
	for _, p := range s.Ports() {
		if p.Name == sp.Name && p.Proto == sp.Proto {
			return p.Port, true
		}
	}
	return 0, false
}
