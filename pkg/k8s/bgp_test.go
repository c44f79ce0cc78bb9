package k8s

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

func peering(mut func(*NetworkBGPPeering)) *NetworkBGPPeering {
	p := &NetworkBGPPeering{
		ObjectMeta: metav1.ObjectMeta{Name: "rack1"},
		Spec: NetworkBGPPeeringSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}},
			LocalASN:     64512,
			Peers:        []NetworkBGPPeer{{Address: "172.30.1.254", ASN: 64500}},
			Advertise:    NetworkBGPAdvertise{PodCIDRs: true, LoadBalancerIPs: true},
		},
	}
	if mut != nil {
		mut(p)
	}
	return p
}

// TestToBGPPeering: a good peering converts with its defaults; each bad
// field is named, and what it spoils is left out while the rest is kept
// (a bad peer, a bad community), or the peering is refused whole when
// keeping it would be wrong (its ASN, router id, node selector).
func TestToBGPPeering(t *testing.T) {
	got, err := ToBGPPeering(peering(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.LocalASN != 64512 || len(got.Peers) != 1 || got.Peers[0].ASN != 64500 || len(got.Peers[0].Families) != 2 ||
		!got.Nodes.Matches(labels.Set{"rack": "r1"}) || got.Nodes.Matches(labels.Set{"rack": "r2"}) || !got.Advertise.PodCIDRs {
		t.Fatalf("converted: %+v", got)
	}
	for _, tc := range []struct {
		name  string
		mut   func(*NetworkBGPPeering)
		err   string
		whole bool // the peering is refused
		peers int
		attrs int
	}{
		{"ASN zero", func(p *NetworkBGPPeering) { p.Spec.LocalASN = 0 }, "spec.localASN: 0 is not an ASN", true, 0, 0},
		{"ASN too big", func(p *NetworkBGPPeering) { p.Spec.LocalASN = 1 << 32 }, "spec.localASN: 4294967296 is not an ASN", true, 0, 0},
		{"AS_TRANS", func(p *NetworkBGPPeering) { p.Spec.LocalASN = 23456 }, "AS_TRANS", true, 0, 0},
		{"router id IPv6", func(p *NetworkBGPPeering) { p.Spec.RouterID = "fd00::1" }, "spec.routerID: \"fd00::1\" is not an IPv4 address", true, 0, 0},
		{"bad node selector", func(p *NetworkBGPPeering) {
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Near"}}}
		}, "spec.nodeSelector", true, 0, 0},
		{"peer address", func(p *NetworkBGPPeering) {
			p.Spec.Peers = append(p.Spec.Peers, NetworkBGPPeer{Address: "router", ASN: 1})
		}, "spec.peers[1].address: \"router\" is not a peer's address; peer left out", false, 1, 0},
		{"peer ASN", func(p *NetworkBGPPeering) { p.Spec.Peers = append(p.Spec.Peers, NetworkBGPPeer{Address: "10.0.0.1"}) },
			"spec.peers[1].asn: 0 is not an ASN", false, 1, 0},
		{"duplicate peer", func(p *NetworkBGPPeering) {
			p.Spec.Peers = append(p.Spec.Peers, NetworkBGPPeer{Address: "172.30.1.254", ASN: 64501})
		}, "spec.peers[1].address: 172.30.1.254 is spec.peers[0]'s too", false, 1, 0},
		{"hold time", func(p *NetworkBGPPeering) { p.Spec.Peers[0].HoldTime = &metav1.Duration{Duration: 2 * time.Second} },
			"spec.peers[0].holdTime: 2s is not 0 or whole seconds from 3s", false, 0, 0},
		{"keepalive over hold", func(p *NetworkBGPPeering) {
			p.Spec.Peers[0].HoldTime = &metav1.Duration{Duration: 3 * time.Second}
			p.Spec.Peers[0].Keepalive = &metav1.Duration{Duration: 3 * time.Second}
		}, "spec.peers[0].keepaliveTime: 3s is not below the hold time 3s", false, 0, 0},
		{"family", func(p *NetworkBGPPeering) { p.Spec.Peers[0].Families = []string{"l2vpn-evpn"} },
			"spec.peers[0].families[0]: \"l2vpn-evpn\" is not ipv4-unicast or ipv6-unicast", false, 0, 0},
		{"secret without key", func(p *NetworkBGPPeering) { p.Spec.Peers[0].PasswordSecretRef = &SecretKeyRef{Name: "bgp"} },
			"spec.peers[0].passwordSecretRef: name and key are both needed", false, 0, 0},
		{"restart time", func(p *NetworkBGPPeering) {
			p.Spec.Peers[0].GracefulRestart = &NetworkBGPGracefulRestart{Enabled: true, RestartTime: &metav1.Duration{Duration: 5000 * time.Second}}
		}, "spec.peers[0].gracefulRestart.restartTime", false, 0, 0},
		{"community", func(p *NetworkBGPPeering) {
			p.Spec.Advertise.Services = []NetworkBGPServiceAttrs{{Communities: []string{"65000:100"}}, {Communities: []string{"65000:70000"}}}
		}, "spec.advertise.services[1].communities[0]: \"65000:70000\" is not a community", false, 1, 1},
		{"local preference", func(p *NetworkBGPPeering) {
			p.Spec.Advertise.Services = []NetworkBGPServiceAttrs{{LocalPreference: -1}}
		}, "spec.advertise.services[0].localPreference: -1", false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ToBGPPeering(peering(tc.mut))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
			if tc.whole {
				if got != nil {
					t.Fatalf("refused peering converted anyway: %+v", got)
				}
				return
			}
			if got == nil || len(got.Peers) != tc.peers || len(got.Advertise.Services) != tc.attrs {
				t.Fatalf("kept %+v, want %d peers and %d service attributes", got, tc.peers, tc.attrs)
			}
		})
	}
	// Defaults a user would expect: graceful restart's 120 s, both families.
	got, _ = ToBGPPeering(peering(func(p *NetworkBGPPeering) {
		p.Spec.Peers[0].GracefulRestart = &NetworkBGPGracefulRestart{Enabled: true}
		p.Spec.Peers[0].Families = []string{"ipv6-unicast"}
	}))
	if pe := got.Peers[0]; !pe.GracefulRestart || pe.RestartTime != 120*time.Second || len(pe.Families) != 1 || pe.Families[0] != model.IPv6 {
		t.Errorf("peer: %+v", pe)
	}
}
