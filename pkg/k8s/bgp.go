package k8s

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// NetworkBGPPeering is a node group's BGP sessions as the API serves it
// (the CRD in deploy/helm/netcube/crds, cluster-scoped).
type NetworkBGPPeering struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NetworkBGPPeeringSpec `json:"spec"`
}

// NetworkBGPPeeringSpec is a NetworkBGPPeering's spec.
type NetworkBGPPeeringSpec struct {
	// NodeSelector picks the nodes (absent: every node).
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	LocalASN     int64                 `json:"localASN"`
	// RouterID, an IPv4 address (absent: the node's IPv4 address).
	RouterID  string              `json:"routerID,omitempty"`
	Peers     []NetworkBGPPeer    `json:"peers"`
	Advertise NetworkBGPAdvertise `json:"advertise,omitempty"`
}

// NetworkBGPPeer is one neighbour.
type NetworkBGPPeer struct {
	Address string `json:"address"`
	ASN     int64  `json:"asn"`
	Port    int32  `json:"port,omitempty"`
	// EBGPMultihop: the TTL to a peer more than one hop away.
	EBGPMultihop int32            `json:"ebgpMultihop,omitempty"`
	HoldTime     *metav1.Duration `json:"holdTime,omitempty"`
	Keepalive    *metav1.Duration `json:"keepaliveTime,omitempty"`
	// PasswordSecretRef: the TCP MD5 password, a key of a Secret in
	// netcube's namespace.
	PasswordSecretRef *SecretKeyRef              `json:"passwordSecretRef,omitempty"`
	GracefulRestart   *NetworkBGPGracefulRestart `json:"gracefulRestart,omitempty"`
	// Families: ipv4-unicast and/or ipv6-unicast (absent: both).
	Families []string `json:"families,omitempty"`
}

// SecretKeyRef names a key of a Secret.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// NetworkBGPGracefulRestart is RFC 4724's graceful restart.
type NetworkBGPGracefulRestart struct {
	Enabled     bool             `json:"enabled"`
	RestartTime *metav1.Duration `json:"restartTime,omitempty"`
}

// NetworkBGPAdvertise is what the nodes announce.
type NetworkBGPAdvertise struct {
	PodCIDRs        bool                     `json:"podCIDRs,omitempty"`
	LoadBalancerIPs bool                     `json:"loadBalancerIPs,omitempty"`
	ExternalIPs     bool                     `json:"externalIPs,omitempty"`
	ClusterIPs      bool                     `json:"clusterIPs,omitempty"`
	Services        []NetworkBGPServiceAttrs `json:"services,omitempty"`
}

// NetworkBGPServiceAttrs are path attributes for the Services a
// selector picks.
type NetworkBGPServiceAttrs struct {
	Selector        *metav1.LabelSelector `json:"selector,omitempty"`
	Communities     []string              `json:"communities,omitempty"`
	LocalPreference int64                 `json:"localPreference,omitempty"`
}

// BGP's limits: RFC 4271 (a hold time of 0 or at least 3 s) and RFC
// 6793 (four-octet ASNs; 23456 stands for a four-octet one and is never
// a speaker's own).
const (
	maxASN      = 1<<32 - 1
	asTrans     = 23456
	minHoldTime = 3 * time.Second
	maxHoldTime = 65535 * time.Second
	maxRestart  = 4095 * time.Second // a 12-bit field
	familyIPv4  = "ipv4-unicast"
	familyIPv6  = "ipv6-unicast"
)

// wellKnownCommunities are RFC 1997's and RFC 3765's, by the names
// routers print them with.
var wellKnownCommunities = map[string]bool{"no-export": true, "no-advertise": true, "no-export-subconfed": true, "no-peer": true, "blackhole": true}

// ValidCommunity says whether c is a community netcube can send:
// "ASN:value", both 16-bit, or a well-known name.
func ValidCommunity(c string) error {
	if wellKnownCommunities[c] {
		return nil
	}
	a, v, ok := strings.Cut(c, ":")
	if ok {
		_, errA := strconv.ParseUint(a, 10, 16)
		_, errV := strconv.ParseUint(v, 10, 16)
		if errA == nil && errV == nil {
			return nil
		}
	}
	return fmt.Errorf("%q is not a community (ASN:value, each 0..65535, or no-export, no-advertise, no-export-subconfed, no-peer, blackhole)", c)
}

func validASN(field string, v int64) (uint32, error) {
	switch {
	case v <= 0 || v > maxASN:
		return 0, fmt.Errorf("%s: %d is not an ASN (1..4294967295)", field, v)
	case v == asTrans:
		return 0, fmt.Errorf("%s: 23456 is AS_TRANS (RFC 6793), never a speaker's own ASN", field)
	}
	return uint32(v), nil
}

// ToBGPPeering converts and validates a NetworkBGPPeering. Each error
// names its field. A peer that cannot be read is left out and the rest
// applied; an unreadable ASN, router id or node selector makes the whole
// peering unusable (nil), never one that selects every node by mistake.
func ToBGPPeering(p *NetworkBGPPeering) (*model.BGPPeering, error) {
	if p.Name == "" {
		return nil, errors.New("metadata.name is empty")
	}
	out := &model.BGPPeering{Name: p.Name, Nodes: labels.Everything()}
	asn, err := validASN("spec.localASN", p.Spec.LocalASN)
	if err != nil {
		return nil, err
	}
	out.LocalASN = asn
	if p.Spec.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.nodeSelector: %w", err)
		}
		out.Nodes = sel
	}
	if p.Spec.RouterID != "" {
		id, err := netip.ParseAddr(p.Spec.RouterID)
		if err != nil || !id.Is4() || id.IsUnspecified() {
			return nil, fmt.Errorf("spec.routerID: %q is not an IPv4 address (BGP identifiers are 32 bits, RFC 4271)", p.Spec.RouterID)
		}
		out.RouterID = id
	}
	var errs []error
	seen := map[netip.Addr]int{}
	for i, api := range p.Spec.Peers {
		peer, err := toBGPPeer(fmt.Sprintf("spec.peers[%d]", i), api)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w; peer left out", err))
			continue
		}
		if j, dup := seen[peer.Address]; dup {
			errs = append(errs, fmt.Errorf("spec.peers[%d].address: %s is spec.peers[%d]'s too; left out", i, peer.Address, j))
			continue
		}
		seen[peer.Address] = i
		out.Peers = append(out.Peers, peer)
	}
	a := p.Spec.Advertise
	out.Advertise = model.BGPAdvertise{PodCIDRs: a.PodCIDRs, LoadBalancerIPs: a.LoadBalancerIPs, ExternalIPs: a.ExternalIPs, ClusterIPs: a.ClusterIPs}
	for i, s := range a.Services {
		field := fmt.Sprintf("spec.advertise.services[%d]", i)
		attrs := model.BGPServiceAttributes{Selector: labels.Everything()}
		if s.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(s.Selector)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.selector: %w; left out", field, err))
				continue
			}
			attrs.Selector = sel
		}
		bad := false
		for j, c := range s.Communities {
			if err := ValidCommunity(c); err != nil {
				errs = append(errs, fmt.Errorf("%s.communities[%d]: %w; left out", field, j, err))
				bad = true
			}
		}
		if s.LocalPreference < 0 || s.LocalPreference > maxASN {
			errs = append(errs, fmt.Errorf("%s.localPreference: %d is not 0..4294967295; left out", field, s.LocalPreference))
			bad = true
		}
		if bad {
			continue
		}
		attrs.Communities = s.Communities
		attrs.LocalPreference = uint32(s.LocalPreference)
		out.Advertise.Services = append(out.Advertise.Services, attrs)
	}
	return out, errors.Join(errs...)
}

func toBGPPeer(field string, api NetworkBGPPeer) (model.BGPPeer, error) {
	var peer model.BGPPeer
	addr, err := netip.ParseAddr(api.Address)
	if err != nil || addr.IsUnspecified() || addr.IsMulticast() {
		return peer, fmt.Errorf("%s.address: %q is not a peer's address", field, api.Address)
	}
	peer.Address = addr.Unmap()
	if peer.ASN, err = validASN(field+".asn", api.ASN); err != nil {
		return peer, err
	}
	if api.Port < 0 || api.Port > 65535 {
		return peer, fmt.Errorf("%s.port: %d is not a port", field, api.Port)
	}
	peer.Port = uint16(api.Port)
	if api.EBGPMultihop < 0 || api.EBGPMultihop > 255 {
		return peer, fmt.Errorf("%s.ebgpMultihop: %d is not a TTL (1..255)", field, api.EBGPMultihop)
	}
	peer.EBGPMultihop = uint8(api.EBGPMultihop)
	if api.HoldTime != nil {
		h := api.HoldTime.Duration
		if h != 0 && (h < minHoldTime || h > maxHoldTime || h%time.Second != 0) {
			return peer, fmt.Errorf("%s.holdTime: %s is not 0 or whole seconds from 3s to 65535s (RFC 4271)", field, h)
		}
		peer.HoldTime = h
	}
	if api.Keepalive != nil {
		k := api.Keepalive.Duration
		if k < time.Second || k%time.Second != 0 {
			return peer, fmt.Errorf("%s.keepaliveTime: %s is not whole seconds, at least 1s", field, k)
		}
		hold := peer.HoldTime
		if hold == 0 {
			hold = 90 * time.Second
		}
		if k >= hold {
			return peer, fmt.Errorf("%s.keepaliveTime: %s is not below the hold time %s", field, k, hold)
		}
		peer.Keepalive = k
	}
	if r := api.PasswordSecretRef; r != nil {
		if r.Name == "" || r.Key == "" {
			return peer, fmt.Errorf("%s.passwordSecretRef: name and key are both needed", field)
		}
		peer.PasswordSecret = &model.SecretKey{Name: r.Name, Key: r.Key}
	}
	if g := api.GracefulRestart; g != nil && g.Enabled {
		peer.GracefulRestart = true
		peer.RestartTime = 120 * time.Second
		if g.RestartTime != nil {
			r := g.RestartTime.Duration
			if r < time.Second || r > maxRestart || r%time.Second != 0 {
				return peer, fmt.Errorf("%s.gracefulRestart.restartTime: %s is not whole seconds from 1s to 4095s (RFC 4724)", field, r)
			}
			peer.RestartTime = r
		}
	}
	for j, f := range api.Families {
		switch f {
		case familyIPv4:
			peer.Families = append(peer.Families, model.IPv4)
		case familyIPv6:
			peer.Families = append(peer.Families, model.IPv6)
		default:
			return peer, fmt.Errorf("%s.families[%d]: %q is not ipv4-unicast or ipv6-unicast", field, j, f)
		}
	}
	if len(peer.Families) == 0 {
		peer.Families = []model.Family{model.IPv4, model.IPv6}
	}
	return peer, nil
}
