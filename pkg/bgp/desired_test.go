package bgp

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/model"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func prefixes(rs []Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Prefix.String())
	}
	return out
}

var (
	rack1 = labels.SelectorFromSet(labels.Set{"rack": "r1"})
	node1 = &model.NodeInfo{Name: "node1", Labels: map[string]string{"rack": "r1"},
		Addresses: addrs("172.30.1.11", "fe80::1", "fd00:172:30:1::11"),
		PodCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}}
	tor = model.BGPPeer{Address: netip.MustParseAddr("172.30.1.254"), ASN: 64500, Families: []model.Family{model.IPv4, model.IPv6}}
)

func basePeering() *model.BGPPeering {
	return &model.BGPPeering{Name: "rack1", Nodes: rack1, LocalASN: 64512, Peers: []model.BGPPeer{tor},
		Advertise: model.BGPAdvertise{PodCIDRs: true, LoadBalancerIPs: true, ExternalIPs: true}}
}

// TestDesiredRoutes: what a node announces, as a table: its own pod
// CIDRs; a Cluster Service's LoadBalancer IPs and ExternalIPs from every
// node; a Local one's only while this node has a ready endpoint;
// ClusterIPs only when asked; IPv6 with the node's IPv6 next hop; the
// attributes of the first selector that picks the Service.
func TestDesiredRoutes(t *testing.T) {
	web := model.ServiceID{Namespace: "default", Name: "web"}
	local := model.ServiceID{Namespace: "default", Name: "local"}
	cluster := lb.Advertised{ClusterIPs: addrs("10.96.0.10"), LoadBalancerIPs: addrs("192.0.2.10", "2001:db8::10"), ExternalIPs: addrs("198.51.100.7"),
		Labels: map[string]string{"tier": "gold"}}
	for _, tc := range []struct {
		name     string
		node     *model.NodeInfo
		peering  func(*model.BGPPeering)
		services map[model.ServiceID]lb.Advertised
		want     []string
		active   bool
	}{
		{"pod CIDRs and a Cluster Service", node1, nil, map[model.ServiceID]lb.Advertised{web: cluster},
			[]string{"10.244.1.0/24", "192.0.2.10/32", "198.51.100.7/32", "2001:db8::10/128", "fd00:10:244:1::/64"}, true},
		{"Local without a ready endpoint here", node1, nil,
			map[model.ServiceID]lb.Advertised{local: {LoadBalancerIPs: addrs("192.0.2.20"), LocalOnly: true}},
			[]string{"10.244.1.0/24", "fd00:10:244:1::/64"}, true},
		{"Local with one", node1, nil,
			map[model.ServiceID]lb.Advertised{local: {LoadBalancerIPs: addrs("192.0.2.20"), LocalOnly: true, LocalEndpoints: 1}},
			[]string{"10.244.1.0/24", "192.0.2.20/32", "fd00:10:244:1::/64"}, true},
		{"ClusterIPs when asked", node1, func(p *model.BGPPeering) { p.Advertise = model.BGPAdvertise{ClusterIPs: true} },
			map[model.ServiceID]lb.Advertised{web: cluster}, []string{"10.96.0.10/32"}, true},
		{"nothing asked", node1, func(p *model.BGPPeering) { p.Advertise = model.BGPAdvertise{} },
			map[model.ServiceID]lb.Advertised{web: cluster}, nil, true},
		{"a node without IPv6 announces no IPv6", &model.NodeInfo{Name: "node1", Labels: node1.Labels, Addresses: addrs("172.30.1.11"), PodCIDRs: node1.PodCIDRs}, nil,
			map[model.ServiceID]lb.Advertised{web: cluster}, []string{"10.244.1.0/24", "192.0.2.10/32", "198.51.100.7/32"}, true},
		{"not selected", &model.NodeInfo{Name: "node9", Labels: map[string]string{"rack": "r9"}, Addresses: addrs("172.30.9.11")}, nil,
			map[model.ServiceID]lb.Advertised{web: cluster}, nil, false},
		{"no Node yet", nil, nil, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := basePeering()
			if tc.peering != nil {
				tc.peering(p)
			}
			cfg, routes, active, problems := desired(tc.node, map[string]*model.BGPPeering{p.Name: p}, tc.services, nil)
			if len(problems) != 0 {
				t.Fatalf("problems: %v", problems)
			}
			if active != tc.active || !slices.Equal(prefixes(routes), tc.want) {
				t.Fatalf("active %v, routes %v; want %v, %v", active, prefixes(routes), tc.active, tc.want)
			}
			if !active {
				return
			}
			if cfg.LocalASN != 64512 || cfg.RouterID != netip.MustParseAddr("172.30.1.11") || len(cfg.Peers) != 1 {
				t.Errorf("config %+v", cfg)
			}
			for _, r := range routes {
				if r.Prefix.Addr().Is6() && r.NextHop != netip.MustParseAddr("fd00:172:30:1::11") {
					t.Errorf("%s: next hop %s, want the node's global IPv6 address", r.Prefix, r.NextHop)
				}
				if r.Prefix.Addr().Is4() && r.NextHop.IsValid() {
					t.Errorf("%s: next hop %s, want self", r.Prefix, r.NextHop)
				}
			}
		})
	}

	// Attributes by Service selector: the first that matches.
	p := basePeering()
	p.Advertise.Services = []model.BGPServiceAttributes{
		{Selector: labels.SelectorFromSet(labels.Set{"tier": "silver"}), Communities: []string{"65000:2"}},
		{Selector: labels.SelectorFromSet(labels.Set{"tier": "gold"}), Communities: []string{"65000:1", "no-export"}, LocalPreference: 200},
	}
	_, routes, _, _ := desired(node1, map[string]*model.BGPPeering{p.Name: p}, map[model.ServiceID]lb.Advertised{web: cluster}, nil)
	for _, r := range routes {
		svc := r.Prefix.Bits() == 32 || r.Prefix.Bits() == 128
		if svc != slices.Equal(r.Communities, []string{"65000:1", "no-export"}) || svc != (r.LocalPref == 200) {
			t.Errorf("%s: communities %v, local pref %d", r.Prefix, r.Communities, r.LocalPref)
		}
	}
}

// TestDesiredConflictsAndSecrets: two peerings selecting a node with
// other ASNs (the first by name wins, the other is reported), with the
// same ASN (merged; a peer both give is reported once), a password whose
// Secret cannot be read (that peer left out and reported, the others
// kept), a peer of a family the node has no address of, and a node with
// no IPv4 address for a router id.
func TestDesiredConflictsAndSecrets(t *testing.T) {
	a := basePeering()
	a.Name = "a"
	b := basePeering()
	b.Name = "b"
	b.LocalASN = 65001
	cfg, _, active, problems := desired(node1, map[string]*model.BGPPeering{"a": a, "b": b}, nil, nil)
	if !active || cfg.LocalASN != 64512 || len(problems) != 1 || problems[0].peering != "b" || !problems[0].conflict ||
		!strings.Contains(problems[0].err.Error(), "spec.localASN: 65001, but NetworkBGPPeering a also selects node node1 with ASN 64512") {
		t.Fatalf("ASN conflict: active %v, asn %d, problems %v", active, cfg.LocalASN, problems)
	}

	b.LocalASN = 64512
	second := tor
	second.Address = netip.MustParseAddr("172.30.1.253")
	b.Peers = append(b.Peers, second)
	cfg, _, _, problems = desired(node1, map[string]*model.BGPPeering{"a": a, "b": b}, nil, nil)
	if len(cfg.Peers) != 2 || len(problems) != 1 || !strings.Contains(problems[0].err.Error(), "spec.peers[0].address: 172.30.1.254 is a peer of NetworkBGPPeering a too") {
		t.Fatalf("merge: peers %+v, problems %v", cfg.Peers, problems)
	}

	withPassword := tor
	withPassword.PasswordSecret = &model.SecretKey{Name: "bgp", Key: "password"}
	a.Peers = []model.BGPPeer{withPassword, second}
	read := func(k *model.SecretKey) (string, error) { return "", errors.New(`secrets "bgp" not found`) }
	cfg, _, active, problems = desired(node1, map[string]*model.BGPPeering{"a": a}, nil, read)
	if !active || len(cfg.Peers) != 1 || cfg.Peers[0].Address != second.Address || len(problems) != 1 ||
		!strings.Contains(problems[0].err.Error(), `spec.peers[0]: passwordSecretRef: Secret bgp key password: secrets "bgp" not found; peer left out`) {
		t.Fatalf("missing Secret: peers %+v, problems %v", cfg.Peers, problems)
	}
	read = func(k *model.SecretKey) (string, error) { return "s3cret", nil }
	cfg, _, _, problems = desired(node1, map[string]*model.BGPPeering{"a": a}, nil, read)
	if len(problems) != 0 || cfg.Peers[0].Password != "s3cret" {
		t.Fatalf("with the Secret: peers %+v, problems %v", cfg.Peers, problems)
	}

	// A peer of a family the node has no address of: left out, named.
	v6peer := tor
	v6peer.Address = netip.MustParseAddr("fd00:172:30:1::254")
	p4 := basePeering()
	p4.Peers = []model.BGPPeer{tor, v6peer}
	v4node := &model.NodeInfo{Name: "node1", Labels: node1.Labels, Addresses: addrs("172.30.1.11"), PodCIDRs: node1.PodCIDRs}
	cfg, _, active, problems = desired(v4node, map[string]*model.BGPPeering{"rack1": p4}, nil, nil)
	if !active || len(cfg.Peers) != 1 || len(problems) != 1 ||
		!strings.Contains(problems[0].err.Error(), "spec.peers[1].address: fd00:172:30:1::254 is IPv6, and node node1 has no address of that family") {
		t.Fatalf("a peer of the wrong family: peers %+v, problems %v", cfg.Peers, problems)
	}

	v6only := &model.NodeInfo{Name: "node1", Labels: node1.Labels, Addresses: addrs("fd00:172:30:1::11")}
	_, _, active, problems = desired(v6only, map[string]*model.BGPPeering{"a": basePeering()}, nil, nil)
	if active || len(problems) != 1 || !strings.Contains(problems[0].err.Error(), "spec.routerID: absent, and node node1 has no IPv4 address") {
		t.Fatalf("no router id: active %v, problems %v", active, problems)
	}
}
