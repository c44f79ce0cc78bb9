package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
)

// applyBound is how long an Apply or a Peers may take while peers
// misbehave: the agent calls both from its control loop and its local API,
// and neither may wait on a broken router.
const applyBound = time.Second

// TestFaultyPeers: one speaker, a healthy BIRD and four bad peers at once: a
// BIRD whose session flaps (reset as soon as it is up, and every third time
// its process is killed outright and started again), a raw TCP "router"
// that answers the handshake and then sends malformed UPDATEs, one that
// accepts the connection and never answers the OPEN, and an address that
// refuses the connection. The healthy session must not notice: it stays
// up with every route, each Apply of a new route set returns within
// applyBound and reaches it, Peers answers as fast and tells each bad
// peer's state, and the speaker's goroutines do not pile up.
func TestFaultyPeers(t *testing.T) {
	healthy := newBirdEnvSlot(t, 0)
	healthy.start(healthy.defaultConf())
	flappy := newBirdEnvSlot(t, 1)
	flappy.start(flappy.defaultConf())
	ctx := t.Context()

	goroutinesBefore := runtime.NumGoroutine()
	s := New(testLogger(t))
	t.Cleanup(func() { _ = s.Stop(context.Background(), false) })

	pod := Route{Prefix: netip.MustParsePrefix("10.244.7.0/24")}
	lbRoute := func(i int) Route {
		return Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i%200)}), 32)}
	}
	birdPeer := func(e *birdEnv) Peer {
		p := e.speakerConfig(65001, true).Peers[0]
		p.Families = []Family{IPv4Unicast}
		return p
	}
	cfg := Config{LocalASN: 65000, RouterID: healthy.hostV4, Peers: []Peer{birdPeer(healthy), birdPeer(flappy)}}

	var healthyUptime time.Duration
	if !t.Run("positive control: both BIRDs up with the routes", func(t *testing.T) {
		routes := []Route{pod, lbRoute(0)}
		start := time.Now()
		if err := s.Apply(ctx, cfg, routes); err != nil {
			t.Fatal(err)
		}
		t.Logf("first Apply (start, two peers, two routes): %s", time.Since(start).Round(time.Microsecond))
		for _, e := range []*birdEnv{healthy, flappy} {
			testenv.WaitFor(t, 20*time.Second, e.ns+" established with both routes", func() bool {
				return e.protoState() == "Established" && hasAll(e.routes(), routes...)
			})
		}
		ps := peersWithin(t, s)
		for _, p := range ps {
			if p.State != "established" || p.Advertised != 2 {
				t.Errorf("peer %+v, want established with 2 sent", p)
			}
		}
		healthyUptime = peerByAddr(t, ps, healthy.nsV4).Uptime
	}) {
		return
	}

	malformed := newRawPeer(t, netip.MustParseAddr("127.0.0.2"), 65002, rawMalformed)
	silent := newRawPeer(t, netip.MustParseAddr("127.0.0.3"), 65003, rawSilent)
	refusing := refusingAddr(t, netip.MustParseAddr("127.0.0.4"))
	rawPeerOf := func(ap netip.AddrPort, asn uint32) Peer {
		return Peer{Address: ap.Addr(), Port: ap.Port(), ASN: asn, HoldTime: 3 * time.Second,
			KeepaliveInterval: time.Second, ConnectRetry: time.Second, Families: []Family{IPv4Unicast}}
	}
	cfg.Peers = append(cfg.Peers, rawPeerOf(malformed.addr, 65002), rawPeerOf(silent.addr, 65003), rawPeerOf(refusing, 65004))
	fl := startFlapper(t, flappy)

	const faultFor = 20 * time.Second
	var goroutinesDuring []int
	if !t.Run("the healthy peer does not notice the bad ones", func(t *testing.T) {
		var lost atomic.Int32
		var lostAt []string
		stopWatch := make(chan struct{})
		watched := make(chan struct{})
		go func() {
			// BIRD's view every 100 ms: the session and the pod
			// route, which no Apply below changes, must stay.
			defer close(watched)
			for {
				select {
				case <-stopWatch:
					return
				case <-time.After(100 * time.Millisecond):
				}
				st, rs, err := birdView(healthy)
				if err != nil || st != "Established" || !hasAll(rs, pod) {
					lost.Add(1)
					lostAt = append(lostAt, fmt.Sprintf("%s (%s, %v)", time.Now().Format("15:04:05.000"), st, err))
				}
			}
		}()
		var slowest, slowestPeers time.Duration
		start := time.Now()
		for i := 1; time.Since(start) < faultFor; i++ {
			routes := []Route{pod, lbRoute(i)}
			t0 := time.Now()
			if err := s.Apply(ctx, cfg, routes); err != nil {
				t.Fatalf("Apply %d: %v", i, err)
			}
			d := time.Since(t0)
			slowest = max(slowest, d)
			if d > applyBound {
				t.Errorf("Apply %d took %s, over %s", i, d.Round(time.Millisecond), applyBound)
			}
			testenv.WaitFor(t, 3*time.Second, fmt.Sprintf("healthy BIRD has route set %d", i), func() bool {
				rs := healthy.routes()
				_, old := rs[lbRoute(i-1).Prefix.String()]
				return hasAll(rs, routes...) && !old
			})
			t0 = time.Now()
			ps := peersWithin(t, s)
			slowestPeers = max(slowestPeers, time.Since(t0))
			if h := peerByAddr(t, ps, healthy.nsV4); h.State != "established" || h.Advertised != 2 {
				t.Errorf("speaker's view of the healthy peer: %+v", h)
			}
			goroutinesDuring = append(goroutinesDuring, runtime.NumGoroutine())
			time.Sleep(500 * time.Millisecond)
		}
		close(stopWatch)
		<-watched
		t.Logf("while the bad peers misbehaved for %s: slowest Apply %s, slowest Peers %s; goroutines %v",
			faultFor, slowest.Round(time.Microsecond), slowestPeers.Round(time.Microsecond), goroutinesDuring)
		if n := lost.Load(); n > 0 {
			t.Errorf("healthy BIRD lost the session or the pod route %d times: %s", n, strings.Join(lostAt, "; "))
		}
		ps := peersWithin(t, s)
		if up := peerByAddr(t, ps, healthy.nsV4).Uptime; up < healthyUptime+faultFor {
			t.Errorf("healthy session up for %s, want at least %s: it was reset", up, healthyUptime+faultFor)
		}
	}) {
		return
	}
	flaps := fl.stop()

	t.Run("Peers tells each bad peer's state", func(t *testing.T) {
		ps := peersWithin(t, s)
		for _, p := range ps {
			t.Logf("peer %s AS %d: %s, up %s, sent %d, received %d, flaps %d", p.Address, p.ASN, p.State, p.Uptime.Round(time.Millisecond), p.Advertised, p.Received, p.Flaps)
		}
		t.Logf("flapper: %d resets of an established session (%d of them by SIGKILL)", flaps.resets, flaps.kills)
		if fp := peerByAddr(t, ps, flappy.nsV4); flaps.resets > 0 && fp.Flaps == 0 {
			t.Errorf("flapping peer: %d resets, GoBGP counted no flap: %+v", flaps.resets, fp)
		}
		for _, p := range ps {
			// GoBGP computes a peer's adj-rib-out from the RIB
			// whatever its session state: a down session must not
			// show prefixes as sent.
			if p.State != "established" && p.Advertised != 0 {
				t.Errorf("peer %s is %s but shows %d prefixes sent", p.Address, p.State, p.Advertised)
			}
		}
		if flaps.resets == 0 {
			t.Error("the flapper never saw the session up: it tested nothing")
		}
		for _, bad := range []netip.Addr{silent.addr.Addr(), refusing.Addr()} {
			p := peerByAddr(t, ps, bad)
			if p.State == "established" || p.Uptime != 0 || p.Advertised != 0 {
				t.Errorf("peer %s: %+v, want not established, no uptime, nothing sent", bad, p)
			}
		}
		if silent.opens.Load() == 0 {
			t.Error("the silent peer never got an OPEN: it tested nothing")
		}
		if m := peerByAddr(t, ps, malformed.addr.Addr()); m.Received != 0 {
			t.Errorf("malformed peer: %d prefixes received from it, want 0: %+v", m.Received, m)
		}
		out := malformed.outcomesCopy()
		for _, u := range malformedUpdates {
			t.Logf("malformed UPDATE %q: %v", u.name, out[u.name])
			if len(out[u.name]) == 0 {
				t.Errorf("malformed UPDATE %q was never delivered (%d connections, %d OPENs)", u.name, malformed.conns.Load(), malformed.opens.Load())
			}
		}
	})

	t.Run("goroutines do not pile up", func(t *testing.T) {
		// Every connection attempt to a bad peer starts goroutines
		// (GoBGP's FSM handler, our raw peer's); over 20 s of attempts
		// a leak of one per attempt would show as dozens.
		if len(goroutinesDuring) > 2 {
			first, last := goroutinesDuring[0], goroutinesDuring[len(goroutinesDuring)-1]
			if last > first+20 {
				t.Errorf("goroutines grew from %d to %d while the peers misbehaved", first, last)
			}
		}
		if err := s.Stop(ctx, false); err != nil {
			t.Fatal(err)
		}
		malformed.close()
		silent.close()
		var after int
		testenv.WaitFor(t, 10*time.Second, "goroutines back near the count before the speaker", func() bool {
			after = runtime.NumGoroutine()
			// GoBGP's Serve loop and its few helpers stay for the
			// life of the process (see restartGlobal).
			return after <= goroutinesBefore+10
		})
		t.Logf("goroutines: %d before the speaker, %d after Stop", goroutinesBefore, after)
		if t.Failed() {
			_ = pprof.Lookup("goroutine").WriteTo(testenv.LogWriter(t), 1)
		}
	})
}

// peersWithin is s.Peers, which must answer within applyBound.
func peersWithin(t *testing.T, s *Speaker) []PeerStatus {
	t.Helper()
	start := time.Now()
	ps, err := s.Peers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > applyBound {
		t.Errorf("Peers took %s, over %s", d.Round(time.Millisecond), applyBound)
	}
	return ps
}

func peerByAddr(t *testing.T, ps []PeerStatus, a netip.Addr) PeerStatus {
	t.Helper()
	for _, p := range ps {
		if p.Address == a {
			return p
		}
	}
	t.Fatalf("no peer %s in %+v", a, ps)
	return PeerStatus{}
}

// birdView is protoState and routes without the test's Fatal, for a
// goroutine.
func birdView(e *birdEnv) (string, map[string]birdRoute, error) {
	out, err := exec.Command("birdc", "-s", e.sock, "show", "protocols", "all", "node").CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("birdc: %v: %s", err, out)
	}
	st := ""
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "BGP state:"); ok {
			st = strings.TrimSpace(v)
		}
	}
	out, err = exec.Command("birdc", "-s", e.sock, "show", "route", "all", "protocol", "node").CombinedOutput()
	if err != nil {
		return st, nil, fmt.Errorf("birdc: %v: %s", err, out)
	}
	return st, parseBirdRoutes(string(out)), nil
}

// flapper resets a BIRD's session every time it comes up, after 300 ms:
// with `birdc restart`, and every third time by killing the BIRD process
// (SIGKILL) and starting a new one.
type flapper struct {
	e    *birdEnv
	done chan struct{}
	quit chan struct{}
	once sync.Once
	res  flapCount
}

type flapCount struct{ resets, kills int }

func startFlapper(t *testing.T, e *birdEnv) *flapper {
	f := &flapper{e: e, done: make(chan struct{}), quit: make(chan struct{})}
	t.Cleanup(func() { f.stop() }) // before e's cleanup, which kills the last BIRD
	go f.loop(t)
	return f
}

func (f *flapper) stop() flapCount {
	f.once.Do(func() { close(f.quit) })
	<-f.done
	return f.res
}

func (f *flapper) loop(t *testing.T) {
	defer close(f.done)
	for {
		up := false
		for !up {
			select {
			case <-f.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			st, _, _ := birdView(f.e)
			up = st == "Established"
		}
		time.Sleep(300 * time.Millisecond)
		if f.res.resets%3 == 2 {
			if err := f.restartProcess(); err != nil {
				t.Errorf("flapper: %v", err)
				return
			}
			f.res.kills++
		} else if out, err := exec.Command("birdc", "-s", f.e.sock, "restart", "node").CombinedOutput(); err != nil {
			t.Errorf("flapper: birdc restart: %v: %s", err, out)
			return
		}
		f.res.resets++
	}
}

// restartProcess kills BIRD outright and starts it again on the same
// configuration, socket and log.
func (f *flapper) restartProcess() error {
	e := f.e
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
	cmd := exec.Command("ip", "netns", "exec", e.ns, "bird", "-f", "-c", e.dir+"/bird.conf", "-s", e.sock)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	e.cmd = cmd
	for range 100 {
		if exec.Command("birdc", "-s", e.sock, "show", "status").Run() == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("restarted BIRD not answering on %s", e.sock)
}
