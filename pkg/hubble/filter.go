package hubble

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netcube/netcube/pkg/hubble/flowpb"
)

// filter is one compiled FlowFilter: every set field must match (any of
// its values).
type filter []func(*flowpb.Flow) bool

func (f filter) match(fl *flowpb.Flow) bool {
	for _, m := range f {
		if !m(fl) {
			return false
		}
	}
	return true
}

// filters are a request's whitelist or blacklist: a flow matches if one
// filter does.
type filters []filter

func (fs filters) any(fl *flowpb.Flow) bool {
	for _, f := range fs {
		if f.match(fl) {
			return true
		}
	}
	return false
}

// compile checks and compiles a request's filters. A field this server
// does not declare (a newer client's) is refused, never ignored: the
// answer would be wrong.
func compile(ffs []*flowpb.FlowFilter) (filters, error) {
	var out filters
	for i, ff := range ffs {
		if unknown := ff.ProtoReflect().GetUnknown(); len(unknown) > 0 {
			num, _, _ := protowire.ConsumeTag(unknown)
			return nil, fmt.Errorf("filter %d: FlowFilter field number %d is not supported by netcube's Hubble server", i, num)
		}
		f, err := compileOne(ff)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func compileOne(ff *flowpb.FlowFilter) (filter, error) {
	var f filter
	add := func(m func(*flowpb.Flow) bool) { f = append(f, m) }
	for _, side := range []struct {
		ips, pods, labels, services, ports []string
		identities                         []uint32
		ep                                 func(*flowpb.Flow) *flowpb.Endpoint
		ip                                 func(*flowpb.Flow) string
		svc                                func(*flowpb.Flow) *flowpb.Service
		port                               func(*flowpb.Flow) uint32
	}{
		{ff.SourceIp, ff.SourcePod, ff.SourceLabel, ff.SourceService, ff.SourcePort, ff.SourceIdentity,
			(*flowpb.Flow).GetSource, func(f *flowpb.Flow) string { return f.GetIP().GetSource() },
			(*flowpb.Flow).GetSourceService, func(f *flowpb.Flow) uint32 { s, _ := ports(f); return s }},
		{ff.DestinationIp, ff.DestinationPod, ff.DestinationLabel, ff.DestinationService, ff.DestinationPort, ff.DestinationIdentity,
			(*flowpb.Flow).GetDestination, func(f *flowpb.Flow) string { return f.GetIP().GetDestination() },
			(*flowpb.Flow).GetDestinationService, func(f *flowpb.Flow) uint32 { _, d := ports(f); return d }},
	} {
		if len(side.ips) > 0 {
			m, err := ipMatcher(side.ips)
			if err != nil {
				return nil, err
			}
			ip := side.ip
			add(func(fl *flowpb.Flow) bool { return m(ip(fl)) })
		}
		if len(side.pods) > 0 {
			pods, ep := side.pods, side.ep
			add(func(fl *flowpb.Flow) bool {
				e := ep(fl)
				return slices.ContainsFunc(pods, func(p string) bool { return nameMatches(p, e.GetNamespace(), e.GetPodName()) })
			})
		}
		if len(side.services) > 0 {
			svcs, svc := side.services, side.svc
			add(func(fl *flowpb.Flow) bool {
				s := svc(fl)
				return s != nil && slices.ContainsFunc(svcs, func(p string) bool { return nameMatches(p, s.GetNamespace(), s.GetName()) })
			})
		}
		if len(side.labels) > 0 {
			sels, ep := side.labels, side.ep
			add(func(fl *flowpb.Flow) bool {
				return slices.ContainsFunc(sels, func(sel string) bool { return labelsMatch(sel, ep(fl).GetLabels()) })
			})
		}
		if len(side.ports) > 0 {
			want := map[uint32]bool{}
			for _, p := range side.ports {
				n, err := strconv.ParseUint(p, 10, 16)
				if err != nil {
					return nil, fmt.Errorf("port %q is not a port number", p)
				}
				want[uint32(n)] = true
			}
			port := side.port
			add(func(fl *flowpb.Flow) bool { return want[port(fl)] })
		}
		if len(side.identities) > 0 {
			ids, ep := side.identities, side.ep
			add(func(fl *flowpb.Flow) bool { return slices.Contains(ids, ep(fl).GetIdentity()) })
		}
	}
	if len(ff.Verdict) > 0 {
		vs := ff.Verdict
		add(func(fl *flowpb.Flow) bool { return slices.Contains(vs, fl.GetVerdict()) })
	}
	if len(ff.DropReasonDesc) > 0 {
		rs := ff.DropReasonDesc
		add(func(fl *flowpb.Flow) bool { return slices.Contains(rs, fl.GetDropReasonDesc()) })
	}
	if len(ff.TrafficDirection) > 0 {
		ds := ff.TrafficDirection
		add(func(fl *flowpb.Flow) bool { return slices.Contains(ds, fl.GetTrafficDirection()) })
	}
	if len(ff.IpVersion) > 0 {
		vs := ff.IpVersion
		add(func(fl *flowpb.Flow) bool { return slices.Contains(vs, fl.GetIP().GetIpVersion()) })
	}
	if len(ff.EventType) > 0 {
		ets := ff.EventType
		add(func(fl *flowpb.Flow) bool {
			return slices.ContainsFunc(ets, func(et *flowpb.EventTypeFilter) bool {
				return fl.GetEventType().GetType() == et.GetType() && (!et.GetMatchSubType() || fl.GetEventType().GetSubType() == et.GetSubType())
			})
		})
	}
	if len(ff.Protocol) > 0 {
		for _, p := range ff.Protocol {
			switch strings.ToLower(p) {
			case "tcp", "udp", "sctp", "icmp", "icmpv4", "icmpv6":
			default:
				return nil, fmt.Errorf("protocol %q: netcube's Hubble server sees tcp, udp, sctp, icmp, icmpv4 and icmpv6 only", p)
			}
		}
		protos := ff.Protocol
		add(func(fl *flowpb.Flow) bool {
			return slices.ContainsFunc(protos, func(p string) bool { return protoMatches(strings.ToLower(p), fl.GetL4()) })
		})
	}
	if len(ff.Reply) > 0 {
		rs := ff.Reply
		add(func(fl *flowpb.Flow) bool { return slices.Contains(rs, fl.GetIsReply().GetValue()) })
	}
	if len(ff.NodeName) > 0 {
		nodes := ff.NodeName
		add(func(fl *flowpb.Flow) bool {
			return slices.ContainsFunc(nodes, func(n string) bool {
				// "cluster/node" names a node of a cluster: netcube's are one cluster's.
				_, node, found := strings.Cut(n, "/")
				if !found {
					node = n
				}
				return node == fl.GetNodeName()
			})
		})
	}
	if len(ff.TcpFlags) > 0 {
		sets := ff.TcpFlags
		add(func(fl *flowpb.Flow) bool {
			have := fl.GetL4().GetTCP().GetFlags()
			if have == nil {
				return false
			}
			return slices.ContainsFunc(sets, func(w *flowpb.TCPFlags) bool {
				return (!w.SYN || have.SYN) && (!w.ACK || have.ACK) && (!w.FIN || have.FIN) && (!w.RST || have.RST) &&
					(!w.PSH || have.PSH) && (!w.URG || have.URG) && (!w.ECE || have.ECE) && (!w.CWR || have.CWR) && (!w.NS || have.NS)
			})
		})
	}
	return f, nil
}

func ports(f *flowpb.Flow) (src, dst uint32) {
	switch p := f.GetL4().GetProtocol().(type) {
	case *flowpb.Layer4_TCP:
		return p.TCP.SourcePort, p.TCP.DestinationPort
	case *flowpb.Layer4_UDP:
		return p.UDP.SourcePort, p.UDP.DestinationPort
	case *flowpb.Layer4_SCTP:
		return p.SCTP.SourcePort, p.SCTP.DestinationPort
	}
	return 0, 0
}

func protoMatches(p string, l4 *flowpb.Layer4) bool {
	switch p {
	case "tcp":
		return l4.GetTCP() != nil
	case "udp":
		return l4.GetUDP() != nil
	case "sctp":
		return l4.GetSCTP() != nil
	case "icmp":
		return l4.GetICMPv4() != nil || l4.GetICMPv6() != nil
	case "icmpv4":
		return l4.GetICMPv4() != nil
	case "icmpv6":
		return l4.GetICMPv6() != nil
	}
	return false
}

// ipMatcher matches addresses and CIDRs.
func ipMatcher(values []string) (func(string) bool, error) {
	var prefixes []netip.Prefix
	for _, v := range values {
		if strings.Contains(v, "/") {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("IP filter %q is not an address or CIDR", v)
			}
			prefixes = append(prefixes, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("IP filter %q is not an address or CIDR", v)
		}
		prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return func(s string) bool {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
	}, nil
}

// nameMatches matches "namespace/name-prefix" (a bare name is in the
// default namespace; "namespace/" is any in it), as Hubble's pod and
// Service filters do.
func nameMatches(pattern, namespace, name string) bool {
	ns, prefix, found := strings.Cut(pattern, "/")
	if !found {
		ns, prefix = "default", pattern
	}
	if name == "" || ns != namespace {
		return false
	}
	return strings.HasPrefix(name, prefix)
}

// labelsMatch matches a label selector of key=value and key (existence)
// terms, comma-separated, each with or without a "k8s:" source prefix.
func labelsMatch(selector string, labels []string) bool {
	have := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(strings.TrimPrefix(l, "k8s:"), "=")
		have[k] = v
	}
	for _, term := range strings.Split(selector, ",") {
		term = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(term), "k8s:"))
		if k, v, ok := strings.Cut(term, "="); ok {
			if got, exists := have[k]; !exists || got != v {
				return false
			}
		} else if _, exists := have[term]; !exists {
			return false
		}
	}
	return true
}
