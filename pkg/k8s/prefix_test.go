package k8s

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestMappedPrefixes: IPv4-mapped prefixes in loadBalancerSourceRanges and
// ipBlock cidrs mean the IPv4 prefix they map (the datapath keys IPv4
// v4-mapped); one shorter than /96, which no IPv4 prefix can say, is
// refused naming the field, and source ranges then admit no client (it
// admitted every client: a negative IPv4 length). An IPv6 prefix stays
// IPv6, ::/0 included.
func TestMappedPrefixes(t *testing.T) {
	for _, c := range []struct {
		in    string
		want  string // the prefix read ("": refused)
		error string
	}{
		{"10.0.0.0/8", "10.0.0.0/8", ""}, // the control
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", ""},
		{"::ffff:0:0/96", "0.0.0.0/0", ""},
		{"::ffff:10.1.2.3/128", "10.1.2.3/32", ""},
		{"::/0", "::/0", ""},
		{"2001:db8::/32", "2001:db8::/32", ""},
		{"::ffff:0:0/90", "", "IPv4-mapped prefix shorter than /96"},
		{"::ffff:10.0.0.0/8", "", "IPv4-mapped prefix shorter than /96"},
	} {
		t.Run(c.in, func(t *testing.T) {
			svc := validLB()
			svc.Spec.LoadBalancerSourceRanges = []string{c.in}
			got, err := ToService(svc)
			ext := got.External
			if c.want != "" {
				if err != nil || ext.Walled || !slices.Equal(ext.SourceRanges, []netip.Prefix{netip.MustParsePrefix(c.want)}) {
					t.Errorf("source range: %v, walled %v, err %v; want [%s]", ext.SourceRanges, ext.Walled, err, c.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), "spec.loadBalancerSourceRanges[0]") || !strings.Contains(err.Error(), c.error) ||
				!FailsClosed(err) || !ext.Walled || len(ext.SourceRanges) != 0 {
				t.Errorf("source range: %v, walled %v, err %v; want refused, walled (no client), the field named", ext.SourceRanges, ext.Walled, err)
			}

			np := validPolicy()
			np.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: c.in}}}
			p, err := ToPolicy(np)
			if c.want != "" {
				if err != nil || len(p.Ingress) != 1 || p.Ingress[0].Peers[0].Block.CIDR != netip.MustParsePrefix(c.want) {
					t.Errorf("ipBlock: %+v, err %v; want cidr %s", p.Ingress, err, c.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), "spec.ingress[0].from[0].ipBlock.cidr") || !strings.Contains(err.Error(), c.error) || len(p.Ingress) != 0 {
				t.Errorf("ipBlock: %+v, err %v; want refused, the rule allowing nothing, the field named", p.Ingress, err)
			}
		})
	}
}
