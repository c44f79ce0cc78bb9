package datapath_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/netcube/netcube/internal/flowcases"
	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source/yamldir"
)

// TestFlowTable runs the packet-flow table (internal/flowcases) through
// node 1's datapath with BPF_PROG_RUN: the table's manifests are translated
// as the agent translates them, each row's packets go through from_pod (a
// pod client) or from_net (an external one), and what comes out must be
// the row's verdict. test/integration runs the same table as real traffic.
func TestFlowTable(t *testing.T) {
	top := sandbox.Layout(sandbox.Config{}, "/sys/fs/cgroup") // the addresses only
	node1 := top.Nodes[0]
	dp, cube := load(t)
	if err := nat.SetNodeAddrs(dp.Maps(), node1.IP4, node1.IP6); err != nil {
		t.Fatal(err)
	}
	svcs, apiSlices, err := yamldir.Parse([]byte(flowcases.Manifests(top)))
	if err != nil {
		t.Fatal(err)
	}
	var eps []*model.EndpointSlice
	for _, s := range apiSlices {
		eps = append(eps, must(k8s.ToEndpointSlice(s)))
	}
	node := model.Node{Name: node1.Name, Addrs: []netip.Addr{node1.IP4, node1.IP6}}
	for _, s := range svcs {
		svc := must(k8s.ToService(s))
		var own []*model.EndpointSlice
		for i, e := range eps {
			if apiSlices[i].Namespace == svc.ID.Namespace && e.ServiceName == svc.ID.Name {
				own = append(own, e)
			}
		}
		for _, fb := range lb.Frontends(svc, own, node) {
			if err := cube.Apply(fb); err != nil {
				t.Fatal(err)
			}
		}
	}
	podOf := map[netip.Addr]string{}
	for _, p := range top.Pods() {
		podOf[p.IP4], podOf[p.IP6] = p.Name, p.Name
	}

	var controls flowcases.Controls
	for _, c := range flowcases.Cases(top) {
		t.Run(c.Name, func(t *testing.T) {
			if c.Verdict == flowcases.Drop {
				if why := controls.Check(c); why != "" {
					t.Fatal(why)
				}
			}
			v6 := c.To.Addr().Is6()
			client, nodeIP := top.ClientPod().IP4, node1.IP4
			if c.External {
				client = top.External.IP4
			}
			if v6 {
				client, nodeIP = top.ClientPod().IP6, node1.IP6
				if c.External {
					client = top.External.IP6
				}
			}
			var prog runner = dp.Programs().FromPod
			if c.External {
				prog = onUplink{dp.Programs().FromNet}
			}
			seen := map[string]bool{}
			for i := range 48 {
				src := netip.AddrPortFrom(client, uint16(61000+100*i)) // a new flow each
				in := pkt.TCP(src, c.To, syn, nil)
				if c.Proto == "udp" {
					in = pkt.UDP(src, c.To, []byte("?"))
				}
				out := make([]byte, 1600)
				opts := runOpts(in, out)
				verdict, err := prog.Run(opts)
				if err != nil {
					t.Fatal(err)
				}
				switch c.Verdict {
				case flowcases.Reject:
					var want []byte
					if c.Proto == "udp" {
						want = pkt.PortUnreachable(in)
					} else {
						want = pkt.RST(in)
					}
					if verdict != actRedirect || !slices.Equal(opts.DataOut, want) {
						t.Fatalf("verdict %d, %x; want the refusal sent back", verdict, opts.DataOut)
					}
					return
				case flowcases.Drop:
					if verdict != actShot {
						t.Fatalf("verdict %d, want drop", verdict)
					}
					return
				}
				if verdict != actOK {
					t.Fatalf("verdict %d, want the packet passed on", verdict)
				}
				gotSrc, gotDst := pkt.Endpoints(opts.DataOut)
				name, ok := podOf[gotDst.Addr()]
				if !ok || gotDst.Port() != sandbox.PodPort || !slices.Contains(c.Want, name) {
					t.Fatalf("sent to %s (%s), want one of %v", gotDst, name, c.Want)
				}
				wantSrc := client
				if c.SNAT {
					wantSrc = nodeIP
				}
				if gotSrc.Addr() != wantSrc {
					t.Fatalf("source %s, want %s", gotSrc.Addr(), wantSrc)
				}
				seen[name] = true
			}
			if len(seen) != len(c.Want) {
				t.Errorf("48 flows reached %v, want every one of %v", seen, c.Want)
			}
			if !t.Failed() {
				controls.Answered(c)
			}
		})
	}
}

// must returns a conversion's result, panicking on input the test meant
// to be valid.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
