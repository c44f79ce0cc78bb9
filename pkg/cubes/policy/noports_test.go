package policy_test

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestPacketsWithoutPortsAreJudged: an isolated pod's ICMP and other
// protocols without ports (GRE here) are judged in both directions: as a
// packet to port 0, which a rule naming ports does not admit and a rule
// without ports does; an ICMP error as the connection it quotes (passing
// when that connection is allowed, judged as itself when the quote names
// none or is forged). The positive control: the same packets with no
// policy.
func TestPacketsWithoutPortsAreJudged(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	server := &model.Pod{ID: model.PodID{Namespace: "x", Name: "server"}, Labels: map[string]string{"app": "server"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")}}
	client := &model.Pod{ID: model.PodID{Namespace: "x", Name: "client"}, Labels: map[string]string{"app": "client"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.6"), netip.MustParseAddr("fd00:10:244:1::6")}}
	cl := policy.NewCluster()
	cl.SetPod(server.ID, server)
	cl.SetPod(client.ID, client)
	comp := policy.NewCompiler()
	var have *policy.Tables
	apply := func() {
		t.Helper()
		want := comp.Compile(cl, func(*model.Pod) bool { return true }, nil)
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		have = want
	}
	progs := dp.Programs()
	sel, _ := labels.Parse("app=server")
	peer, _ := labels.Parse("app=client")
	ports := &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "server"}, Pods: sel, IsolatesIngress: true, IsolatesEgress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: peer}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8080}}}}}
	noPorts := &model.Policy{ID: ports.ID, Pods: sel, IsolatesIngress: true, IsolatesEgress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: peer}}}}}

	for fam := range 2 {
		c := netip.AddrPortFrom(client.IPs[fam], uint16(41000+fam))
		s := netip.AddrPortFrom(server.IPs[fam], 8080)
		echo := pkt.Echo(c.Addr(), s.Addr(), 7, 1, false, nil)
		echoOut := pkt.Echo(s.Addr(), c.Addr(), 8, 1, false, nil)
		gre := pkt.WithProto(pkt.UDP(c, s, nil), 47)
		syn := pkt.TCP(c, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil)
		synAck := pkt.TCP(s, c, pkt.TCPOpts{SYN: true, ACK: true, Seq: 9, Ack: 2}, nil)
		// Errors about the allowed connection, each way, and about none.
		errIn := pkt.Error(c.Addr(), s.Addr(), pkt.PortUnreach, 0, synAck, 0)
		errOut := pkt.Error(s.Addr(), c.Addr(), pkt.PortUnreach, 0, syn, 0)
		forgedIn := pkt.Error(c.Addr(), s.Addr(), pkt.PortUnreach, 0,
			pkt.TCP(s, netip.AddrPortFrom(c.Addr(), 1), pkt.TCPOpts{SYN: true, ACK: true}, nil), 0)

		type check struct {
			name   string
			prog   *ebpf.Program
			in     []byte
			passes bool
		}
		play := func(stage string, checks []check) {
			t.Helper()
			for _, k := range checks {
				if got := runProg(t, k.prog, k.in) != tcShot; got != k.passes {
					t.Errorf("family %d, %s: %s: passes %v, want %v", fam, stage, k.name, got, k.passes)
				}
			}
		}

		cl.SetPolicy(ports.ID, nil)
		apply()
		play("no policy (control)", []check{
			{"echo into the server", progs.ToPod, echo, true},
			{"GRE into the server", progs.ToPod, gre, true},
			{"the server's echo out", progs.FromPod, echoOut, true},
		})

		cl.SetPolicy(ports.ID, ports)
		apply()
		play("ingress TCP 8080 only, egress nothing", []check{
			{"the allowed connection's SYN (control)", progs.ToPod, syn, true},
			{"its SYN-ACK", progs.FromPod, synAck, true},
			{"an error about the connection, into the server", progs.ToPod, errIn, true},
			{"an error about the connection, from the server", progs.FromPod, errOut, true},
			{"an error quoting no connection, into the server", progs.ToPod, forgedIn, false},
			{"echo into the server", progs.ToPod, echo, false},
			{"GRE into the server", progs.ToPod, gre, false},
			{"the server's echo out", progs.FromPod, echoOut, false},
		})

		cl.SetPolicy(ports.ID, noPorts)
		apply()
		play("ingress from the client, every port and protocol", []check{
			{"echo into the server", progs.ToPod, echo, true},
			{"GRE into the server", progs.ToPod, gre, true},
			{"the server's echo out (egress still nothing)", progs.FromPod, echoOut, false},
		})
		cl.SetPolicy(ports.ID, nil)
	}
}
