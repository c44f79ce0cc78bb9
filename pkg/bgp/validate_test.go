package bgp

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func goodConfig() Config {
	return Config{
		LocalASN: 65000,
		RouterID: netip.MustParseAddr("192.0.2.1"),
		Peers: []Peer{
			{Address: netip.MustParseAddr("192.0.2.2"), ASN: 65001},
			{Address: netip.MustParseAddr("2001:db8::2"), ASN: 65001},
		},
	}
}

func TestNormalizeRejects(t *testing.T) {
	pfx := netip.MustParsePrefix
	cases := []struct {
		name   string
		mutate func(*Config, *[]Route)
		want   string
	}{
		{"no local ASN", func(c *Config, _ *[]Route) { c.LocalASN = 0 }, "localASN: 0 is not a valid ASN"},
		{"no router id", func(c *Config, _ *[]Route) { c.RouterID = netip.Addr{} }, "routerID: missing"},
		{"IPv6 router id", func(c *Config, _ *[]Route) { c.RouterID = netip.MustParseAddr("2001:db8::1") }, "routerID: 2001:db8::1 is not an IPv4 address"},
		{"bad listen port", func(c *Config, _ *[]Route) { c.ListenPort = 70000 }, "listenPort: 70000"},
		{"peer ASN 0", func(c *Config, _ *[]Route) { c.Peers[1].ASN = 0 }, "peers[1].asn: 0 is not a valid ASN"},
		{"peer no address", func(c *Config, _ *[]Route) { c.Peers[0].Address = netip.Addr{} }, "peers[0].address: missing"},
		{"duplicate peer", func(c *Config, _ *[]Route) {
			c.Peers[1].Address = netip.MustParseAddr("::ffff:192.0.2.2")
		}, "peers[1].address: 192.0.2.2 is peers[0]'s too"},
		{"short hold time", func(c *Config, _ *[]Route) { c.Peers[0].HoldTime = 2 * time.Second }, "peers[0].holdTime: 2s is less than 3s"},
		{"fractional hold time", func(c *Config, _ *[]Route) { c.Peers[0].HoldTime = 3500 * time.Millisecond }, "peers[0].holdTime: 3.5s is not whole seconds"},
		{"keepalive >= hold", func(c *Config, _ *[]Route) {
			c.Peers[0].HoldTime, c.Peers[0].KeepaliveInterval = 3*time.Second, 3*time.Second
		}, "peers[0].keepaliveInterval: 3s is not less than holdTime 3s"},
		{"restart time too long", func(c *Config, _ *[]Route) {
			c.Peers[0].GracefulRestart = GracefulRestart{Enabled: true, RestartTime: time.Hour * 2}
		}, "peers[0].gracefulRestart.restartTime"},
		{"unknown family", func(c *Config, _ *[]Route) { c.Peers[0].Families = []Family{"l2vpn-evpn"} }, `peers[0].families[0]: "l2vpn-evpn"`},
		{"prefix not masked", func(_ *Config, r *[]Route) { *r = []Route{{Prefix: pfx("10.244.1.7/24")}} }, "routes[0].prefix: 10.244.1.7/24 is not masked (10.244.1.0/24 is)"},
		{"no prefix", func(_ *Config, r *[]Route) { *r = []Route{{}} }, "routes[0].prefix: missing"},
		{"duplicate prefix", func(_ *Config, r *[]Route) {
			*r = []Route{{Prefix: pfx("10.0.0.0/8")}, {Prefix: pfx("10.0.0.0/8"), LocalPref: 5}}
		}, "routes[1].prefix: 10.0.0.0/8 is routes[0]'s too"},
		{"bad community", func(_ *Config, r *[]Route) {
			*r = []Route{{Prefix: pfx("10.0.0.0/8"), Communities: []string{"65000:100", "65000:70000"}}}
		}, `routes[0].communities[1]: "65000:70000"`},
		{"community name", func(_ *Config, r *[]Route) {
			*r = []Route{{Prefix: pfx("10.0.0.0/8"), Communities: []string{"no-exprot"}}}
		}, `routes[0].communities[0]: "no-exprot" is neither`},
		{"next hop family", func(_ *Config, r *[]Route) {
			*r = []Route{{Prefix: pfx("10.0.0.0/8"), NextHop: netip.MustParseAddr("2001:db8::1")}}
		}, "routes[0].nextHop: 2001:db8::1 is not of 10.0.0.0/8's family"},
		{"IPv6 self over IPv4 session", func(_ *Config, r *[]Route) {
			*r = []Route{{Prefix: pfx("2001:db8:1::5/128")}}
		}, "routes[0].nextHop: missing, and IPv6 route 2001:db8:1::5/128 would go over the IPv4 session to 192.0.2.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, r := goodConfig(), []Route{}
			tc.mutate(&c, &r)
			_, _, err := normalize(c, r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestNormalizeDefaults(t *testing.T) {
	c := goodConfig()
	c.Peers[0].GracefulRestart.Enabled = true
	c.Peers[1].Families = []Family{IPv6Unicast, IPv6Unicast}
	routes := []Route{
		{Prefix: netip.MustParsePrefix("10.244.1.0/24"), Communities: []string{"no-export", "65000:100", "65535:65281"}},
		{Prefix: netip.MustParsePrefix("2001:db8:1::5/128"), NextHop: netip.MustParseAddr("2001:db8::1")},
	}
	n, r, err := normalize(c, routes)
	if err != nil {
		t.Fatal(err)
	}
	if n.ListenPort != DoNotListen {
		t.Errorf("listen port %d, want DoNotListen", n.ListenPort)
	}
	p := n.Peers[0]
	if p.Port != 179 || p.ConnectRetry != DefaultConnectRetry || p.GracefulRestart.RestartTime != 120*time.Second {
		t.Errorf("peer defaults not filled: %+v", p)
	}
	if len(p.Families) != 2 {
		t.Errorf("default families %v, want both", p.Families)
	}
	if f := n.Peers[1].Families; len(f) != 1 || f[0] != IPv6Unicast {
		t.Errorf("families %v, want [ipv6-unicast]", f)
	}
	// "no-export" is 65535:65281: one community, in one spelling.
	if got := strings.Join(r[0].Communities, " "); got != "65000:100 65535:65281" {
		t.Errorf("communities %q", got)
	}
}

func TestBadApplyChangesNothing(t *testing.T) {
	s := New(nil)
	c := goodConfig()
	c.Peers[0].ASN = 0
	if err := s.Apply(t.Context(), c, nil); err == nil || !strings.Contains(err.Error(), "peers[0].asn") {
		t.Fatalf("Apply: %v", err)
	}
	if s.server != nil || s.state.started || s.LastApply().Total() != 0 {
		t.Fatal("a refused Apply started the speaker")
	}
}
