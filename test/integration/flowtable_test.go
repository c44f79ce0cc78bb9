package integration

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/flowcases"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/traffic"
)

// TestFlowTable runs the packet-flow table (internal/flowcases) as real
// traffic in the sandbox, on both paths: from the client pod and from the
// client outside the cluster, to destinations node 1 serves. pkg/datapath
// runs the same table with BPF_PROG_RUN.
func TestFlowTable(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sb := up(t, path.socketLB)
			top := sb.Topology
			node1 := top.Nodes[0]
			if err := top.WriteManifest("flows.yaml", flowcases.Manifests(top)); err != nil {
				t.Fatal(err)
			}
			for _, p := range flowcases.ExternalRoutes() {
				if err := top.RouteFromExternal(p, node1.Name); err != nil {
					t.Fatal(err)
				}
			}
			cases := flowcases.Cases(top)
			send := func(c flowcases.Case, count int, extra ...string) []traffic.Result {
				if c.External {
					return fromOutside(t, sb, c.Proto, c.To.String(), count, extra...)
				}
				return requests(t, sb, c.Proto, c.To.String(), count, extra...)
			}
			testenv.WaitFor(t, 10*time.Second, "the table's Services", func() bool {
				return send(cases[0], 1, "--timeout", "200ms")[0].Err == ""
			})
			var controls flowcases.Controls
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					switch c.Verdict {
					case flowcases.Reject:
						for _, r := range send(c, 2) {
							refusedFast(t, r)
						}
						return
					case flowcases.Drop:
						if why := controls.Check(c); why != "" {
							t.Fatal(why)
						}
						if r := send(c, 1, "--timeout", "300ms")[0]; !strings.Contains(r.Err, "timeout") {
							t.Fatalf("%+v, want a timeout (dropped)", r)
						}
						return
					}
					client := top.ClientPod().IP4
					if c.External {
						client = top.External.IP4
					}
					nodeIP := node1.IP4
					if c.To.Addr().Is6() {
						client, nodeIP = top.ClientPod().IP6, node1.IP6
						if c.External {
							client = top.External.IP6
						}
					}
					peer := client
					if c.SNAT {
						peer = nodeIP
					}
					seen := map[string]bool{}
					for _, r := range send(c, 40) {
						if r.Err != "" {
							t.Fatalf("request %d: %s", r.Seq, r.Err)
						}
						if !slices.Contains(c.Want, r.Backend) {
							t.Fatalf("answered by %s, want one of %v", r.Backend, c.Want)
						}
						want := peer
						if c.SNAT && c.External && onNode1(r.Backend) {
							// An endpoint on the node that received the
							// packet keeps the client (no SNAT), so that
							// its ingress policy judges the client.
							want = client
						}
						if got, err := netip.ParseAddr(r.Peer); err != nil || got != want {
							t.Fatalf("%s saw the client as %s, want %s", r.Backend, r.Peer, want)
						}
						seen[r.Backend] = true
					}
					if len(seen) != len(c.Want) {
						t.Errorf("answered by %v, want every one of %v", seen, c.Want)
					}
					if !t.Failed() {
						controls.Answered(c)
					}
				})
			}
		})
	}
}

// onNode1 says whether the sandbox pod named so (n1p2: node 1, pod 2) is
// on node1.
func onNode1(pod string) bool { return strings.HasPrefix(pod, "n1p") }
