package bgp

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/sirupsen/logrus"

	"github.com/netcube/netcube/internal/testenv"
)

func testLogger(t *testing.T) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(testenv.LogWriter(t))
	l.SetLevel(logrus.WarnLevel)
	return l
}

// theRoutes are a node's pod CIDR, a LoadBalancer IP and an IPv6 one.
func theRoutes(e *birdEnv) (pod, lb, lb6 Route) {
	pod = Route{Prefix: netip.MustParsePrefix("10.244.7.0/24"), Communities: []string{"65000:100", "no-export"}}
	lb = Route{Prefix: netip.MustParsePrefix("203.0.113.7/32"), Communities: []string{"65000:200"}}
	// IPv6 over the IPv4 session: the next hop is the host's address on
	// the link, which BIRD (gateway direct) must find on a connected net.
	lb6 = Route{Prefix: netip.MustParsePrefix("2001:db8:ffff::7/128"), NextHop: e.hostV6, Communities: []string{"65000:600"}}
	return
}

func (e *birdEnv) speakerConfig(asn uint32, gr bool) Config {
	return Config{
		LocalASN: 65000,
		RouterID: e.hostV4,
		Peers: []Peer{{
			Address:           e.nsV4,
			ASN:               asn,
			HoldTime:          3 * time.Second,
			KeepaliveInterval: time.Second,
			ConnectRetry:      time.Second,
			Password:          "md5-secret",
			GracefulRestart:   GracefulRestart{Enabled: gr, RestartTime: 30 * time.Second},
		}},
	}
}

func waitEstablished(t *testing.T, e *birdEnv, s *Speaker) time.Duration {
	t.Helper()
	return testenv.WaitFor(t, 20*time.Second, "session established on both sides", func() bool {
		ps, err := s.Peers(t.Context())
		return err == nil && len(ps) == 1 && ps[0].State == "established" && e.protoState() == "Established"
	})
}

func hasAll(rs map[string]birdRoute, want ...Route) bool {
	for _, r := range want {
		if _, ok := rs[r.Prefix.String()]; !ok {
			return false
		}
	}
	return true
}

func TestBIRD(t *testing.T) {
	e := newBirdEnv(t)
	e.start(e.defaultConf())
	ctx := t.Context()
	pod, lb, lb6 := theRoutes(e)
	cfg := e.speakerConfig(65001, true)
	all := []Route{pod, lb, lb6}

	s := New(testLogger(t))
	t.Cleanup(func() { _ = s.Stop(context.Background(), false) })

	if !t.Run("announce", func(t *testing.T) {
		start := time.Now()
		if err := s.Apply(ctx, cfg, all); err != nil {
			t.Fatal(err)
		}
		if got, want := s.LastApply(), (Ops{GlobalRestarts: 1, PeersAdded: 1, PathsAdded: 3}); got != want {
			t.Errorf("first Apply did %+v, want %+v", got, want)
		}
		waitEstablished(t, e, s)
		testenv.WaitFor(t, 10*time.Second, "BIRD has the three routes", func() bool { return hasAll(e.routes(), all...) })
		t.Logf("established and announced in %s", time.Since(start).Round(time.Millisecond))
		rs := e.routes()
		for _, c := range []struct {
			r         Route
			nh, comms string
		}{
			{pod, e.hostV4.String(), "(65000,100) (65535,65281)"},
			{lb, e.hostV4.String(), "(65000,200)"},
			{lb6, e.hostV6.String(), "(65000,600)"},
		} {
			got := rs[c.r.Prefix.String()]
			if got.NextHop != c.nh || got.Community != c.comms {
				t.Errorf("%s: next hop %q communities %q, want %q and %q\n%s", c.r.Prefix, got.NextHop, got.Community, c.nh, c.comms, got.Text)
			}
		}
		ps, err := s.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p := ps[0]; p.Address != e.nsV4 || p.ASN != 65001 || p.Advertised != 3 || p.Uptime <= 0 {
			t.Errorf("peer status %+v", p)
		}
	}) {
		return
	}

	if !t.Run("unchanged Apply does nothing", func(t *testing.T) {
		if err := s.Apply(ctx, cfg, []Route{lb6, lb, pod}); err != nil {
			t.Fatal(err)
		}
		if got := s.LastApply(); got.Total() != 0 {
			t.Errorf("unchanged Apply did %+v", got)
		}
	}) {
		return
	}

	if !t.Run("bad input changes nothing", func(t *testing.T) {
		bad := []Route{pod, {Prefix: netip.MustParsePrefix("203.0.113.8/24")}}
		if err := s.Apply(ctx, cfg, bad); err == nil || !strings.Contains(err.Error(), "routes[1].prefix") {
			t.Fatalf("Apply: %v", err)
		}
		if !hasAll(e.routes(), all...) {
			t.Error("a refused Apply changed what BIRD has")
		}
	}) {
		return
	}

	if !t.Run("nothing imported", func(t *testing.T) {
		// Positive control: BIRD does send 198.51.100.0/24, and the
		// speaker does receive it.
		if out := e.birdc("show", "route", "export", "node"); !strings.Contains(out, "198.51.100.0/24") {
			t.Fatalf("BIRD does not export the static route:\n%s", out)
		}
		testenv.WaitFor(t, 5*time.Second, "speaker receives BIRD's route", func() bool {
			ps, err := s.Peers(ctx)
			return err == nil && len(ps) == 1 && ps[0].Received >= 1
		})
		ps, _ := s.Peers(ctx)
		if ps[0].Accepted != 0 {
			t.Errorf("accepted %d of %d received routes, want 0", ps[0].Accepted, ps[0].Received)
		}
		if n := countPaths(t, s, api.TableType_ADJ_IN, e.nsV4.String(), "198.51.100.0/24"); n != 1 {
			t.Errorf("adj-rib-in holds %d paths for 198.51.100.0/24, want 1", n)
		}
		if n := countPaths(t, s, api.TableType_GLOBAL, "", "198.51.100.0/24"); n != 0 {
			t.Errorf("global RIB holds %d paths for 198.51.100.0/24, want 0", n)
		}
		if out := run(t, "ip", "route", "show", "198.51.100.0/24"); strings.TrimSpace(out) != "" {
			t.Errorf("the host's kernel has a route for it: %s", out)
		}
		if out := run(t, "ip", "-6", "route", "show", "table", "all", "proto", "bgp"); strings.TrimSpace(out) != "" {
			t.Errorf("the host's kernel has BGP routes: %s", out)
		}
	}) {
		return
	}

	if !t.Run("withdraw", func(t *testing.T) {
		start := time.Now()
		if err := s.Apply(ctx, cfg, []Route{pod, lb6}); err != nil {
			t.Fatal(err)
		}
		if got := s.LastApply(); got != (Ops{PathsWithdrawn: 1}) {
			t.Errorf("Apply did %+v, want one withdrawal", got)
		}
		d := testenv.WaitFor(t, 5*time.Second, "BIRD drops the withdrawn route", func() bool {
			_, has := e.routes()[lb.Prefix.String()]
			return !has
		})
		t.Logf("withdrawal reached BIRD in %s", time.Since(start).Round(time.Millisecond))
		_ = d
		if !hasAll(e.routes(), pod, lb6) {
			t.Error("the other routes went too")
		}
		if err := s.Apply(ctx, cfg, all); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 5*time.Second, "BIRD has it again", func() bool { return hasAll(e.routes(), all...) })
	}) {
		return
	}

	if !t.Run("iBGP local pref", func(t *testing.T) {
		ibgp := e.defaultConf()
		ibgp.LocalAS = 65000
		e.reconfigure(ibgp)
		icfg := e.speakerConfig(65000, true)
		ipod := pod
		ipod.LocalPref = 300
		if err := s.Apply(ctx, icfg, []Route{ipod, lb, lb6}); err != nil {
			t.Fatal(err)
		}
		if got := s.LastApply(); got != (Ops{PeersUpdated: 1, PathsAdded: 1}) {
			t.Errorf("Apply did %+v, want one peer update and one path", got)
		}
		waitEstablished(t, e, s)
		testenv.WaitFor(t, 10*time.Second, "BIRD has local pref 300 over iBGP", func() bool {
			r, ok := e.routes()[pod.Prefix.String()]
			return ok && r.LocalPref == "300"
		})
		if r := e.routes()[pod.Prefix.String()]; r.NextHop != e.hostV4.String() {
			t.Errorf("iBGP next hop %q, want %s", r.NextHop, e.hostV4)
		}
		e.reconfigure(e.defaultConf())
		if err := s.Apply(ctx, cfg, all); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, e, s)
		testenv.WaitFor(t, 10*time.Second, "BIRD has the routes over eBGP again", func() bool { return hasAll(e.routes(), all...) })
	}) {
		return
	}

	if !t.Run("TCP MD5", func(t *testing.T) {
		// The positive control is the session above, signed with the
		// right key on both sides.
		wrong := e.defaultConf()
		wrong.Password = "not-the-secret"
		e.reconfigure(wrong)
		deadline := time.Now().Add(5 * time.Second)
		time.Sleep(500 * time.Millisecond) // BIRD's restart of the protocol
		for time.Now().Before(deadline) {
			if st := e.protoState(); st == "Established" {
				t.Fatal("session established with a wrong MD5 key on BIRD's side")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if ps, _ := s.Peers(ctx); len(ps) != 1 || ps[0].State == "established" {
			t.Errorf("speaker's view: %+v", ps)
		}
		e.reconfigure(e.defaultConf())
		t.Logf("re-established %s after the right key is back", waitEstablished(t, e, s).Round(time.Millisecond))
		testenv.WaitFor(t, 10*time.Second, "BIRD has the routes again", func() bool { return hasAll(e.routes(), all...) })
	}) {
		return
	}

	if !t.Run("graceful restart keeps the routes", func(t *testing.T) {
		logBefore, _ := os.ReadFile(e.log)
		var gaps atomic.Int32
		var polls atomic.Int32
		stop := make(chan struct{})
		done := make(chan string)
		go func() {
			var missing []string
			tk := time.NewTicker(100 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					done <- strings.Join(missing, "; ")
					return
				case <-tk.C:
				}
				out, err := exec.Command("birdc", "-s", e.sock, "show", "route", "all", "protocol", "node").CombinedOutput()
				polls.Add(1)
				if rs := parseBirdRoutes(string(out)); err != nil || !hasAll(rs, all...) {
					gaps.Add(1)
					missing = append(missing, time.Now().Format("15:04:05.000"))
				}
			}
		}()
		start := time.Now()
		if err := s.Stop(ctx, true); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 5*time.Second, "BIRD sees the session go", func() bool { return e.protoState() != "Established" })
		sawStale := strings.Contains(e.birdc("show", "protocols", "all", "node"), "graceful restart")
		t.Logf("BIRD's view of the pod CIDR while the speaker is away:\n%s", e.routes()[pod.Prefix.String()].Text)
		time.Sleep(time.Second) // a gap a restarting agent would leave
		s2 := New(testLogger(t))
		t.Cleanup(func() { _ = s2.Stop(context.Background(), false) })
		if err := s2.Apply(ctx, cfg, all); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, e, s2)
		// The restart is over when BIRD got our End-of-RIB.
		testenv.WaitFor(t, 10*time.Second, "BIRD ends the graceful restart", func() bool {
			return !strings.Contains(e.birdc("show", "protocols", "all", "node"), "graceful restart active")
		})
		time.Sleep(300 * time.Millisecond)
		close(stop)
		missing := <-done
		t.Logf("old speaker stopped to new session up: %s; %d polls of BIRD, %d without all routes", time.Since(start).Round(time.Millisecond), polls.Load(), gaps.Load())
		if gaps.Load() > 0 {
			t.Errorf("BIRD lacked the routes at %s", missing)
		}
		if !sawStale {
			t.Error("BIRD did not report a neighbor graceful restart while the speaker was away")
		}
		logAfter, _ := os.ReadFile(e.log)
		news := string(logAfter[len(logBefore):])
		if !strings.Contains(news, "graceful restart detected") {
			t.Errorf("BIRD's log has no graceful restart:\n%s", news)
		}
		for _, l := range strings.Split(news, "\n") {
			if strings.Contains(l, "node:") && !strings.Contains(l, "Scanning") {
				t.Logf("bird.log: %s", l)
			}
		}
		if strings.Contains(news, "Received: ") {
			t.Errorf("BIRD received a NOTIFICATION:\n%s", news)
		}
		if !hasAll(e.routes(), all...) {
			t.Error("routes gone after the restart")
		}
		s = s2
	}) {
		return
	}

	if !t.Run("non-graceful stop withdraws", func(t *testing.T) {
		start := time.Now()
		if err := s.Stop(ctx, false); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 5*time.Second, "BIRD drops every route", func() bool { return len(e.routes()) == 0 })
		t.Logf("routes gone from BIRD %s after Stop(false)", time.Since(start).Round(time.Millisecond))
		// GoBGP's StopBgp, which Stop(false) ends with, does send the
		// Cease that Stop(true) must avoid.
		if out := e.birdc("show", "protocols", "all", "node"); !strings.Contains(out, "Last error:       Received: Peer de-configured") {
			t.Errorf("BIRD got no Cease:\n%s", out)
		}
	}) {
		return
	}

	noGR := e.defaultConf()
	noGR.GR = false
	cfgNoGR := e.speakerConfig(65001, false)

	if !t.Run("graceful stop without graceful restart", func(t *testing.T) {
		e.reconfigure(noGR)
		s3 := New(testLogger(t))
		t.Cleanup(func() { _ = s3.Stop(context.Background(), false) })
		if err := s3.Apply(ctx, cfgNoGR, all); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, e, s3)
		testenv.WaitFor(t, 10*time.Second, "BIRD has the routes", func() bool { return hasAll(e.routes(), all...) })
		start := time.Now()
		if err := s3.Stop(ctx, true); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 5*time.Second, "BIRD drops every route", func() bool { return len(e.routes()) == 0 })
		t.Logf("without graceful restart, routes gone %s after Stop(true)", time.Since(start).Round(time.Millisecond))
	}) {
		return
	}

	if !t.Run("killed hard, without graceful restart", func(t *testing.T) { killedHard(t, e, false) }) {
		return
	}
	if !t.Run("killed hard, with graceful restart", func(t *testing.T) { killedHard(t, e, true) }) {
		return
	}
	// Last: after a hold timer expiry BIRD delays the next session by 60 s.
	if !t.Run("hold time expiry", func(t *testing.T) {
		e.reconfigure(noGR)
		s4 := New(testLogger(t))
		t.Cleanup(func() { _ = s4.Stop(context.Background(), false) })
		if err := s4.Apply(ctx, cfgNoGR, all); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, e, s4)
		testenv.WaitFor(t, 10*time.Second, "BIRD has the routes", func() bool { return hasAll(e.routes(), all...) })
		// A speaker that goes silent without closing anything (a hung
		// or partitioned node): BIRD's side drops every packet from it.
		rules := filepath.Join(e.dir, "drop.nft")
		if err := os.WriteFile(rules, []byte("table inet ncbgp {\n chain in {\n  type filter hook input priority 0; policy accept;\n  ip saddr "+e.hostV4.String()+" drop\n }\n}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		e.inNS("nft", "-f", rules)
		defer e.inNS("nft", "delete", "table", "inet", "ncbgp")
		testenv.WaitFor(t, 10*time.Second, "BIRD drops the routes", func() bool { return len(e.routes()) == 0 })
		d := time.Since(start)
		t.Logf("silent speaker: routes gone from BIRD %s after its packets stopped (hold time 3s)", d.Round(time.Millisecond))
		if d < 2*time.Second {
			t.Errorf("routes went after %s, before any hold time could expire", d)
		}
	}) {
		return
	}
}

// countPaths counts the paths for prefix in GoBGP's table of type tt
// (name: the peer, for an adj-rib-in).
func countPaths(t *testing.T, s *Speaker, tt api.TableType, name, prefix string) int {
	t.Helper()
	n := 0
	err := s.server.ListPath(t.Context(), &api.ListPathRequest{
		TableType: tt,
		Name:      name,
		Family:    &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST},
		Prefixes:  []*api.TableLookupPrefix{{Prefix: prefix}},
	}, func(d *api.Destination) { n += len(d.Paths) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}
