package bpftest

import "testing"

const sec = uint64(1_000_000_000)

// TCP flags as the packet carries them.
const (
	fin = 0x01
	syn = 0x02
	rst = 0x04
	ack = 0x10
)

// packet is one step of a flow's life: who sends what, when, and what
// conntrack must make of it.
type packet struct {
	at      uint64 // seconds on the fake clock
	back    bool   // from the backend (else from the client)
	flags   uint8  // TCP flags (UDP: ignored)
	follows bool   // conntrack still knows the flow
	ends    bool   // this packet ends the flow: both entries removed
}

// TestConntrackLifecycle: a flow's entries live by its state: TCP through
// the handshake, established, FINs, RST; UDP answered or not; each timeout
// (the defaults: kube-proxy's 24 h established, 60 s before an answer,
// 10 s closing, UDP 30 s / 300 s) counted from the flow's last packet
// either way; a SYN on a port whose flow was answered opens a new flow; a
// closed flow's entries leave at once. Packets in and verdicts out, with
// the fake clock.
func TestConntrackLifecycle(t *testing.T) {
	for _, c := range []struct {
		name  string
		proto uint8
		steps []packet
	}{
		{"handshake, data, idle a day less a second, then closed by FINs", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 2, flags: syn, follows: true}, // retransmitted: the same flow
			{at: 2, back: true, flags: syn | ack, follows: true},
			{at: 3, flags: ack, follows: true},
			{at: 3 + 86399, back: true, flags: ack, follows: true}, // idle < 24 h
			{at: 3 + 86399 + 86399, flags: fin | ack, follows: true},
			{at: 3 + 86399 + 86399, back: true, flags: fin | ack, follows: true},
			{at: 3 + 86399 + 86399, flags: ack, follows: true, ends: true}, // the last ACK
			{at: 3 + 86399 + 86400, flags: ack},
		}},
		{"the backend closes first", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 5, back: true, flags: fin | ack, follows: true},
			{at: 5, flags: ack, follows: true}, // half closed: data may still come
			{at: 6, back: true, flags: ack, follows: true},
			{at: 7, flags: fin | ack, follows: true},
			{at: 7, back: true, flags: ack, follows: true, ends: true},
			{at: 8, back: true, flags: ack},
		}},
		{"the backend's ACK of the client's FIN, overtaken by its own FIN, is not the last packet", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 2, flags: fin | ack, follows: true},
			{at: 2, back: true, flags: fin | ack, follows: true}, // the second FIN
			{at: 2, back: true, flags: ack, follows: true},       // sent before it, on another CPU
			{at: 2, flags: ack, follows: true, ends: true},       // the ACK of the second FIN
			{at: 3, back: true, flags: fin | ack},
		}},
		{"the client's ACK of the backend's FIN, overtaken by its own FIN, is not the last packet", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 2, back: true, flags: fin | ack, follows: true},
			{at: 2, flags: fin | ack, follows: true}, // the second FIN
			{at: 2, flags: ack, follows: true},       // sent before it, overtaken
			{at: 2, back: true, flags: ack, follows: true, ends: true},
		}},
		{"reset by the client", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 2, flags: rst, follows: true, ends: true},
			{at: 2, back: true, flags: ack},
		}},
		{"refused by the backend", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: rst | ack, follows: true, ends: true},
			{at: 2, flags: syn}, // the client's next try is a new flow
		}},
		{"established a day and a second idle: timed out", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 2, flags: ack, follows: true},
			{at: 2 + 86401, flags: ack},
		}},
		{"never answered: 60 s", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 61, flags: syn, follows: true},
			{at: 122, flags: syn},
		}},
		{"a SYN on an answered flow's port is a new flow", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 2, flags: ack, follows: true},
			{at: 3, flags: syn}, // the old close was never seen
		}},
		{"closing times out after 10 s without its last ACK", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 2, flags: fin | ack, follows: true},
			{at: 2, back: true, flags: fin | ack, follows: true},
			{at: 13, flags: fin | ack}, // retransmitted FIN, 11 s on
		}},
		{"a packet whose clock reading predates the entry's refresh (another CPU's) is still the flow's", 6, []packet{
			{at: 1, flags: syn, follows: true},
			{at: 1, back: true, flags: syn | ack, follows: true},
			{at: 5, back: true, flags: ack, follows: true}, // refreshes the flow's time to 5 s
			{at: 4, flags: ack, follows: true},             // read the clock at 4 s, on another CPU
		}},
		{"UDP, never answered: 30 s", 17, []packet{
			{at: 1, follows: true},
			{at: 31, follows: true},
			{at: 62},
		}},
		{"UDP answered: a stream, 300 s", 17, []packet{
			{at: 1, follows: true},
			{at: 2, back: true, follows: true},
			{at: 301, follows: true},
			{at: 601, back: true, follows: true},
			{at: 902},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := load(t)
			h.at(sec, 0)
			create := toBackend(flowIO(bpfTestOpOP_CT_CREATE, client, frontend), backend)
			create.BackendId, create.RevNatId, create.F.Proto = 7, 3, c.proto
			if out := h.do(create); out.Ret != 0 {
				t.Fatalf("ct_create_flow: %d", out.Ret)
			}
			for i, p := range c.steps {
				h.at(p.at*sec, 0)
				var io bpfTestIo
				if p.back {
					io = flowIO(bpfTestOpOP_CT_BACKWARD, backend, client)
					io.SnatAddr, io.SnatPort = addr(frontend.Addr()), port(frontend.Port())
				} else {
					io = toBackend(flowIO(bpfTestOpOP_CT_FORWARD, client, frontend), backend)
				}
				io.F.Proto, io.F.TcpFlags = c.proto, p.flags
				out := h.do(io)
				if got := out.Ret == 1; got != p.follows {
					t.Fatalf("step %d (%+v): conntrack follows the flow: %v", i, p, got)
				}
				if got := out.Result == 1; got != p.ends {
					t.Fatalf("step %d (%+v): ends the flow: %v", i, p, got)
				}
				if p.ends {
					_, svc := h.lookup(client, frontend, bpfCtDirCT_SERVICE)
					_, reply := h.lookup(backend, client, bpfCtDirCT_REPLY)
					if svc || reply {
						t.Fatalf("step %d: the ended flow's entries are still there (service %v, reply %v)", i, svc, reply)
					}
				}
			}
		})
	}
}
