package bgp

import (
	"net/netip"
	"testing"
	"time"
)

// appliedFrom is what a successful Apply of cfg and routes leaves.
func appliedFrom(t *testing.T, cfg Config, routes []Route) applied {
	t.Helper()
	cfg, routes, err := normalize(cfg, routes)
	if err != nil {
		t.Fatal(err)
	}
	a := newApplied()
	a.started, a.global = true, globalOf(cfg)
	for _, p := range cfg.Peers {
		a.peers[p.Address.String()] = p
	}
	for _, r := range routes {
		a.routes[r.Prefix.String()] = r
	}
	return a
}

func TestDiff(t *testing.T) {
	pod := Route{Prefix: netip.MustParsePrefix("10.244.1.0/24")}
	lb := Route{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Communities: []string{"65000:100"}}
	base := goodConfig()
	baseRoutes := []Route{pod, lb}

	type counts struct{ restart, addP, updP, delP, addR, wd int }
	cases := []struct {
		name   string
		cfg    func() Config
		routes []Route
		want   counts
	}{
		{"unchanged", goodConfig, baseRoutes, counts{}},
		{"unchanged, other order and spelling", func() Config {
			c := goodConfig()
			c.Peers[0], c.Peers[1] = c.Peers[1], c.Peers[0]
			c.Peers[0].Port = 179
			c.ListenPort = DoNotListen
			return c
		}, []Route{lb, pod}, counts{}},
		{"new ASN restarts", func() Config { c := goodConfig(); c.LocalASN = 65010; return c }, baseRoutes, counts{restart: 1, addP: 2, addR: 2}},
		{"new router id restarts", func() Config { c := goodConfig(); c.RouterID = netip.MustParseAddr("192.0.2.9"); return c }, baseRoutes, counts{restart: 1, addP: 2, addR: 2}},
		{"peer added", func() Config {
			c := goodConfig()
			c.Peers = append(c.Peers, Peer{Address: netip.MustParseAddr("192.0.2.3"), ASN: 65002})
			return c
		}, baseRoutes, counts{addP: 1}},
		{"peer removed", func() Config { c := goodConfig(); c.Peers = c.Peers[:1]; return c }, baseRoutes, counts{delP: 1}},
		{"peer changed", func() Config { c := goodConfig(); c.Peers[0].HoldTime = 9 * time.Second; return c }, baseRoutes, counts{updP: 1}},
		{"peer password changed", func() Config { c := goodConfig(); c.Peers[1].Password = "s3cret"; return c }, baseRoutes, counts{updP: 1}},
		{"route withdrawn", goodConfig, []Route{pod}, counts{wd: 1}},
		{"route added", goodConfig, []Route{pod, lb, {Prefix: netip.MustParsePrefix("10.244.2.0/24")}}, counts{addR: 1}},
		{"route attributes changed", goodConfig, []Route{pod, {Prefix: lb.Prefix, Communities: []string{"65000:200"}}}, counts{addR: 1}},
		{"everything withdrawn", goodConfig, nil, counts{wd: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := appliedFrom(t, base, baseRoutes)
			cfg, routes, err := normalize(tc.cfg(), tc.routes)
			if err != nil {
				t.Fatal(err)
			}
			p := diff(old, cfg, routes)
			got := counts{0, len(p.addPeers), len(p.updatePeers), len(p.deletePeers), len(p.addRoutes), len(p.withdraw)}
			if p.restartGlobal {
				got.restart = 1
			}
			if got != tc.want {
				t.Errorf("plan %+v, want %+v", got, tc.want)
			}
			if p.empty() != (tc.want == counts{}) {
				t.Errorf("empty() = %v", p.empty())
			}
		})
	}
}

func TestDiffFirstApplyStarts(t *testing.T) {
	cfg, routes, err := normalize(goodConfig(), []Route{{Prefix: netip.MustParsePrefix("10.244.1.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	p := diff(newApplied(), cfg, routes)
	if !p.restartGlobal || len(p.addPeers) != 2 || len(p.addRoutes) != 1 {
		t.Fatalf("first plan %+v", p)
	}
}
