package integration

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/events"
)

// TestMonitorTracesFlows: with --monitor-trace, a pod's connection to a
// Service through the tc path is reported at its start (its backend, and
// how the router sent its first packet on, to that backend) and at its
// end, with what each way carried (conntrack's per-flow counters):
// a connection of ten requests carries more packets and bytes each way
// than one of a single request (the counters count, not just exist).
// `hubble observe --verdict TRACED` shows the end too.
func TestMonitorTracesFlows(t *testing.T) {
	sb := upWith(t, "tt", sandbox.Config{AgentArgs: []string{"--monitor-trace"}})
	top := sb.Topology
	client := top.ClientPod()
	node, _ := top.Node(client.Node)
	mon := watch(t, sb, node, "--type", "trace", "--pod", "default/"+client.Name)
	svc := net.JoinHostPort(sandbox.EchoIPs[0], "80")

	ends := func() []events.Event {
		return mon.find(func(e events.Event) bool {
			return e.Trace == "flow-end" && e.Cube == "ct" && e.Src.Addr() == client.IP4 && e.Dst.String() == svc && e.Counts != nil
		})
	}
	var flows [2]events.Event
	for i, count := range []int{1, 10} {
		for _, r := range requests(t, sb, "tcp", svc, count, "--persistent") {
			if r.Err != "" {
				t.Fatalf("request to %s: %s", svc, r.Err)
			}
		}
		testenv.WaitFor(t, 5*time.Second, "the connection's end in netcube monitor", func() bool { return len(ends()) == i+1 })
		flows[i] = ends()[i]
		starts := mon.find(func(e events.Event) bool {
			return e.Trace == "service-backend" && e.Src == flows[i].Src && e.Dst.String() == svc && e.To.IsValid()
		})
		if len(starts) != 1 {
			t.Errorf("connection %d: %d reports of its start (its backend), want 1", i, len(starts))
			continue
		}
		backend := starts[0].To
		routed := mon.find(func(e events.Event) bool {
			return e.Trace == "route" && e.Cube == "router" && e.Src == flows[i].Src && e.Dst == backend && e.TCPFlags == "SYN" &&
				(e.Route == "to-pod" || e.Route == "fib" || e.Route == "fib-neighbour") && e.OutIfindex != 0
		})
		if len(routed) != 1 {
			t.Errorf("connection %d: %d reports of its SYN routed to %s, want 1", i, len(routed), backend)
		}
	}
	one, ten := flows[0].Counts, flows[1].Counts
	if one.Packets < 3 || one.ReplyPackets < 2 || one.Bytes < 40*one.Packets || one.ReplyBytes < 40*one.ReplyPackets {
		t.Errorf("one request's connection carried %+v: fewer than its handshake and request", one)
	}
	if ten.Packets < one.Packets+9 || ten.ReplyPackets < one.ReplyPackets+9 || ten.Bytes <= one.Bytes || ten.ReplyBytes <= one.ReplyBytes {
		t.Errorf("ten requests' connection carried %+v, one request's %+v: want more each way", ten, one)
	}

	out, err := exec.Command(hubbleCLI(t), "observe", "--server", "unix://"+top.HubbleSocket(node), "--last", "1000",
		"--verdict", "TRACED", "--from-pod", "default/"+client.Name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ct: flow-end") {
		t.Errorf("hubble observe --verdict TRACED: %v\n%s", err, out)
	}
}
