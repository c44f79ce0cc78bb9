package adversarial

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/l2announce"
)

// forgedSeq is where the forged heartbeats' sequence numbers start: far
// above any a real agent reaches in a test, so that a node's view of
// another's last sequence number says whether a forged one was taken.
const forgedSeq = 1 << 40

// TestForgedHeartbeatsKeepNoDeadNodeAlive: a hostile pod (CAP_NET_RAW)
// floods the agents' heartbeat port (UDP 4246) on every node address with
// heartbeats claiming to be the node that announces a LoadBalancer IP:
// from its own address, and with the source forged to that node's
// address and to its own node's, IPv4 and IPv6. Were one taken, the
// announcer would stay "alive" after it died and its address would never
// move. Positive controls first: the election gives the address to one
// node, and the pod's heartbeats do reach the agents' sockets (refused:
// their counter grows). Then the flood changes nothing: the announcer
// stays, no forged sequence number is ever recorded, and when the
// announcer dies the other node takes the address over within
// takeoverBound, flood or not.
func TestForgedHeartbeatsKeepNoDeadNodeAlive(t *testing.T) {
	const takeoverBound = 5 * time.Second
	sb := up(t, "adv-hb", sandbox.Config{SocketLB: true})
	top := sb.Topology
	lbIP := netip.MustParseAddr("172.30.0.101")
	if err := top.WriteManifest("hbweb.yaml", lbService("hbweb", "10.96.0.41", lbIP, 30150, top.EchoBackends())); err != nil {
		t.Fatal(err)
	}
	var first []string
	testenv.WaitFor(t, 20*time.Second, "exactly one node announcing "+lbIP.String(), func() bool {
		first = top.Announcing(lbIP)
		return len(first) == 1
	})
	var owner, other sandbox.Node
	for _, n := range top.Nodes {
		if n.Name == first[0] {
			owner = n
		} else {
			other = n
		}
	}
	attacker := other.Pods[0]
	t.Logf("%s announces %s; the hostile pod %s is on %s", owner.Name, lbIP, attacker.Name, other.Name)
	testenv.WaitFor(t, 10*time.Second, "each agent counting the other alive", func() bool {
		return slices.Contains(l2Status(t, top, other).Alive, owner.Name) && slices.Contains(l2Status(t, top, owner).Alive, other.Name)
	})

	f := &heartbeatForger{t: t, sb: sb, pod: attacker, claim: owner.Name, targets: []sandbox.Node{other, owner},
		sources: map[string][2]netip.Addr{
			"its own address":         {attacker.IP4, attacker.IP6},
			"the announcer's address": {owner.IP4, owner.IP6},
			"its own node's address":  {other.IP4, other.IP6},
		}}

	if !t.Run("positive control: the pod's heartbeats reach the agents", func(t *testing.T) {
		before := map[string]uint64{}
		for _, n := range f.targets {
			before[n.Name] = l2Status(t, top, n).Refused
		}
		f.sendOnce()
		testenv.WaitFor(t, 5*time.Second, "both agents refusing the pod's heartbeats", func() bool {
			for _, n := range f.targets {
				if l2Status(t, top, n).Refused <= before[n.Name] {
					return false
				}
			}
			return true
		})
		for _, n := range f.targets {
			t.Logf("%s refused %d heartbeats from the pod's one batch of %d", n.Name, l2Status(t, top, n).Refused-before[n.Name], len(f.frames(0)))
		}
	}) {
		return
	}

	stop := f.flood()
	defer stop()

	if !t.Run("the flood changes nothing while the announcer lives", func(t *testing.T) {
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if got := top.Announcing(lbIP); !slices.Equal(got, []string{owner.Name}) {
				t.Fatalf("during the flood %s is announced by %v, want only %s", lbIP, got, owner.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
		checkNoForgedSeq(t, l2Status(t, top, other), owner.Name)
		if n := f.batches.Load(); n < 10 {
			t.Fatalf("the pod sent only %d batches in 3 s: no flood", n)
		}
	}) {
		return
	}

	t.Run("the announcer dies: the address moves despite the flood", func(t *testing.T) {
		if out, err := exec.Command("ip", "-n", owner.Netns, "link", "set", "eth0", "down").CombinedOutput(); err != nil {
			t.Fatalf("%s's uplink down: %v %s", owner.Name, err, out)
		}
		if err := sb.StopAgent(owner.Name, true); err != nil {
			t.Fatal(err)
		}
		// (The dead node's pins keep its entry: a datapath without its
		// link.)
		d := testenv.WaitFor(t, takeoverBound, other.Name+" announcing "+lbIP.String()+" while the pod floods", func() bool {
			return slices.Contains(top.Announcing(lbIP), other.Name)
		})
		sent := f.batches.Load()
		time.Sleep(time.Second) // the flood goes on: the dead node must stay dead
		st := l2Status(t, top, other)
		if slices.Contains(st.Alive, owner.Name) {
			t.Errorf("%s counts the dead %s alive: %+v", other.Name, owner.Name, st)
		}
		if !slices.Contains(top.Announcing(lbIP), other.Name) {
			t.Errorf("%s stopped announcing %s while the flood went on", other.Name, lbIP)
		}
		checkNoForgedSeq(t, st, owner.Name)
		if f.batches.Load() <= sent {
			t.Error("the flood had stopped: the check after the takeover tested nothing")
		}
		t.Logf("%s took %s over %s after %s died (%d forged batches of %d heartbeats sent by then); %s refused %d heartbeats in all",
			other.Name, lbIP, d.Round(time.Millisecond), owner.Name, sent, len(f.frames(0)), other.Name, st.Refused)
	})
	if errs := stop(); len(errs) > 0 {
		t.Errorf("the flood's sends failed: %v", errs)
	}
}

// checkNoForgedSeq fails if st's view of node took a forged heartbeat.
func checkNoForgedSeq(t *testing.T, st l2announce.Status, node string) {
	t.Helper()
	for _, p := range st.Peers {
		if p.Name == node && p.Seq >= forgedSeq {
			t.Errorf("%s took a forged heartbeat for %s (seq %d)", st.Node, node, p.Seq)
		}
	}
}

// lbService renders an IPv4 LoadBalancer Service (policy Cluster) whose
// status holds ip, with its EndpointSlice of pods.
func lbService(name, clusterIP string, ip netip.Addr, nodePort int, pods []sandbox.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n", name)
	fmt.Fprintf(&b, "  type: LoadBalancer\n  externalTrafficPolicy: Cluster\n  ipFamilies: [IPv4]\n  clusterIP: %s\n  clusterIPs: [%s]\n", clusterIP, clusterIP)
	fmt.Fprintf(&b, "  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: %d}\n", nodePort)
	fmt.Fprintf(&b, "status:\n  loadBalancer:\n    ingress:\n    - ip: %s\n", ip)
	return b.String() + "---\n" + sandbox.SliceYAML(name, false, sandbox.EndpointPorts[:1], pods)
}

// l2Status asks node n's agent for its election state (its local API).
func l2Status(t *testing.T, top sandbox.Topology, n sandbox.Node) l2announce.Status {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", top.APISocket(n))
		}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://agent" + l2announce.APIPath)
	if err != nil {
		t.Fatalf("%s's %s: %v", n.Name, l2announce.APIPath, err)
	}
	defer resp.Body.Close()
	var st l2announce.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		t.Fatalf("%s's %s: %s", n.Name, l2announce.APIPath, resp.Status)
	}
	return st
}

// heartbeatForger sends, from a pod, heartbeats claiming to be node claim
// to the heartbeat port of every address of targets, from each of
// sources (IPv4, IPv6).
type heartbeatForger struct {
	t       *testing.T
	sb      *sandbox.Sandbox
	pod     sandbox.Pod
	claim   string
	targets []sandbox.Node
	sources map[string][2]netip.Addr

	batches atomic.Int64
}

// frames is one batch: every target address from every source of its
// family, sequence number forgedSeq+batch.
func (f *heartbeatForger) frames(batch int64) []string {
	// Marshal fails only for a name no Node can have; claim is a node's.
	hb, _ := l2announce.Heartbeat{Node: f.claim, Seq: uint64(forgedSeq + batch)}.Marshal()
	var out []string
	for _, n := range f.targets {
		for fam, dst := range []netip.Addr{n.IP4, n.IP6} {
			for _, src := range f.sources {
				out = append(out, hex.EncodeToString(pkt.UDP(netip.AddrPortFrom(src[fam], l2announce.DefaultPort),
					netip.AddrPortFrom(dst, l2announce.DefaultPort), hb)))
			}
		}
	}
	return out
}

func (f *heartbeatForger) sendOnce() {
	f.t.Helper()
	lab(f.t, f.sb, f.pod.Name, append([]string{"pod", "send"}, f.frames(f.batches.Add(1))...)...)
}

// flood sends batches back to back until the returned function is
// called; that one returns the sends' errors (a goroutine cannot fail the
// test) and may be called again.
func (f *heartbeatForger) flood() func() []string {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			args := append([]string{"pod", "send"}, f.frames(f.batches.Add(1))...)
			if out, err := f.sb.Output(f.pod.Name, filepath.Join(binDir, sandbox.LabBinary), args...); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%v %s", err, out))
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	var once sync.Once
	return func() []string {
		once.Do(func() { close(done); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return errs
	}
}
