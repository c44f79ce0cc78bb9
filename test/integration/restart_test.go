package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/faultrec"
)

// TestAgentRestartKeepsConnections: established TCP and UDP flows through a
// Service keep working, on the same backend, while the node's agent is
// killed (as in a crash), stays down, and starts again; the restarted agent
// finds the state in the pinned maps and writes nothing to them.
func TestAgentRestartKeepsConnections(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sb := up(t, path.socketLB)
			node := sb.Topology.ClientPod().Node
			tcp := startStream(t, sb, "tcp", "10.96.0.10:80", "--persistent")
			udp := startStream(t, sb, "udp", "[fd00:10:96::10]:8080", "--persistent")
			start := time.Now()
			for _, s := range []*stream{tcp, udp} {
				testenv.WaitFor(t, 5*time.Second, "first answers", func() bool { return len(s.since(start)) >= 10 })
			}

			if err := sb.StopAgent(node, true); err != nil {
				t.Fatal(err)
			}
			down := time.Now()
			time.Sleep(500 * time.Millisecond)
			for name, s := range map[string]*stream{"tcp": tcp, "udp": udp} {
				if n := len(s.since(down)); n < 10 {
					t.Fatalf("%s: only %d answers while the agent was down", name, n)
				}
			}
			if err := sb.StartAgent(node); err != nil {
				t.Fatal(err)
			}
			restarted := time.Now()
			for _, s := range []*stream{tcp, udp} {
				testenv.WaitFor(t, 5*time.Second, "answers after restart", func() bool { return len(s.since(restarted)) >= 10 })
			}
			tcp.stop()
			udp.stop()

			for name, s := range map[string]*stream{"tcp": tcp, "udp": udp} {
				rs := s.since(start)
				for _, r := range rs {
					if r.Err != "" {
						t.Fatalf("%s: request %d failed: %s", name, r.Seq, r.Err)
					}
					if r.Backend != rs[0].Backend {
						t.Fatalf("%s: flow moved from %s to %s", name, rs[0].Backend, r.Backend)
					}
				}
				t.Logf("%s: %d answers, all from %s", name, len(rs), rs[0].Backend)
			}

			// The restarted agent reconciled against the pinned maps: the state
			// was already there, so its first sync wrote nothing.
			log, _ := os.ReadFile(filepath.Join(sb.Topology.LogDir(), "agent-"+node+".log"))
			syncs := regexp.MustCompile(`initial sync applied.*map_ops="\{Updates:(\d+) Deletes:(\d+)\}"`).FindAllSubmatch(log, -1)
			if len(syncs) != 2 {
				t.Fatalf("want 2 initial syncs in the agent log, got %d", len(syncs))
			}
			if u, d := string(syncs[1][1]), string(syncs[1][2]); u != "0" || d != "0" {
				t.Errorf("restarted agent wrote %s and deleted %s map entries; want none", u, d)
			}

			// And it still serves changes and new connections.
			for _, r := range requests(t, sb, "tcp", "10.96.0.10:80", 10) {
				if r.Err != "" {
					t.Fatalf("new connection after restart: %s", r.Err)
				}
			}
		})
	}
}

// TestNodeRebootConverges: a node whose pins are gone (as after a reboot:
// bpffs is empty, the programs detached) and whose agent starts afresh
// converges: the agent reattaches to every pod, programs every Service
// again, and the client pod reaches each echo backend, directly and
// through the Services, IPv4 and IPv6 (checked before the reboot too).
func TestNodeRebootConverges(t *testing.T) {
	sb := up(t, true)
	node := sb.Topology.ClientPod().Node
	check := func(when string) {
		t.Helper()
		want := backendNames(sb)
		for _, fe := range echoFrontends() {
			seen := map[string]int{}
			for _, r := range requests(t, sb, fe.proto, fe.addr, 30) {
				if r.Err != "" {
					t.Fatalf("%s: %s: request %d failed: %s", when, fe.name, r.Seq, r.Err)
				}
				seen[r.Backend]++
			}
			if len(seen) != len(want) {
				t.Errorf("%s: %s answered from %v, want each of %v", when, fe.name, seen, want)
			}
		}
	}
	check("before the reboot")
	if err := sb.StopAgent(node, true); err != nil {
		t.Fatal(err)
	}
	n, ok := sb.Topology.Node(node)
	if !ok {
		t.Fatalf("no node %s", node)
	}
	if err := sb.RemoveDatapath(node); err != nil { // a reboot loses all of it
		t.Fatal(err)
	}
	if _, err := os.Stat(n.PinDir); !os.IsNotExist(err) {
		t.Fatalf("pins of %s still there: %v", node, err)
	}
	started := time.Now()
	if err := sb.StartAgent(node); err != nil {
		t.Fatal(err)
	}
	converge := time.Since(started)
	check("after the reboot")
	faultrec.Write(t, faultrec.Record{Fault: "node reboot: pins gone, agent started afresh", Path: "socket-LB",
		ConvergeSeconds: converge.Seconds(), Note: "every Service answers from every endpoint, IPv4 and IPv6"})
}
