package bpftest

import (
	"net/netip"
	"testing"
)

var (
	client   = netip.MustParseAddrPort("10.244.1.11:40000")
	client2  = netip.MustParseAddrPort("10.244.1.12:40000")
	frontend = netip.MustParseAddrPort("10.96.0.10:80")
	backend  = netip.MustParseAddrPort("10.244.2.21:8080")
	backend2 = netip.MustParseAddrPort("10.244.2.22:8080")
	nodeIP   = netip.MustParseAddr("192.168.1.1")
)

// create records the flow src -> frontend, translated to b (and SNATed
// to snat if valid), at the fake clock's time.
func (h *harness) create(src netip.AddrPort, b netip.AddrPort, revNAT uint32, snat netip.AddrPort) {
	h.t.Helper()
	io := toBackend(flowIO(bpfTestOpOP_CT_CREATE, src, frontend), b)
	io.BackendId, io.RevNatId = 7, revNAT
	if snat.IsValid() {
		io.Flags = uint8(bpfCtFlagsCT_F_EXTERNAL | bpfCtFlagsCT_F_SNAT)
		io.SnatAddr, io.SnatPort = addr(snat.Addr()), port(snat.Port())
	}
	if out := h.do(io); out.Ret != 0 {
		h.t.Fatalf("ct_create_flow: %d", out.Ret)
	}
}

// lookup returns the entry of src -> dst in direction dir, if any.
func (h *harness) lookup(src, dst netip.AddrPort, dir bpfCtDir) (bpfTestIo, bool) {
	h.t.Helper()
	io := flowIO(bpfTestOpOP_CT_LOOKUP, src, dst)
	io.Dir = uint8(dir)
	out := h.do(io)
	return out, out.Ret == 1
}

// matches says whether the flow src -> frontend still has its reply half
// from backend b (ct_reply_of).
func (h *harness) matches(src, b netip.AddrPort) bool {
	h.t.Helper()
	return h.do(toBackend(flowIO(bpfTestOpOP_CT_MATCHES, src, frontend), b)).Ret == 1
}

// TestConntrackEntries: a translated flow is two entries, each found only
// in its own direction, stamped with the (fake) time it was balanced; the
// service entry is trusted only while its reply half is the one it made.
func TestConntrackEntries(t *testing.T) {
	h := load(t)
	h.at(1_000_000, 0)
	h.create(client, backend, 3, netip.AddrPort{})

	svc, ok := h.lookup(client, frontend, bpfCtDirCT_SERVICE)
	if !ok || svc.Entry.BackendId != 7 || svc.Entry.RevNatId != 3 || svc.Entry.LastNs != 1_000_000 || svc.Entry.Flags != uint8(bpfCtFlagsCT_F_HANDSHAKE) {
		t.Fatalf("service entry: found %v, %+v", ok, svc.Entry)
	}
	reply, ok := h.lookup(backend, client, bpfCtDirCT_REPLY)
	if !ok || reply.Entry.RevNatId != 3 {
		t.Fatalf("reply entry: found %v, %+v", ok, reply.Entry)
	}
	if _, ok := h.lookup(client, frontend, bpfCtDirCT_REPLY); ok {
		t.Error("the service flow is found as a reply")
	}
	if _, ok := h.lookup(backend, client, bpfCtDirCT_SERVICE); ok {
		t.Error("the reply is found as a service flow")
	}
	if !h.matches(client, backend) {
		t.Fatal("a fresh flow does not match its reply half")
	}

	// The client opens a direct connection to the backend from the same
	// port: its replies must not be reverse-translated.
	h.do(flowIO(bpfTestOpOP_CT_FORGET, client, backend))
	if _, ok := h.lookup(backend, client, bpfCtDirCT_REPLY); ok {
		t.Fatal("ct_forget_reply left the reply entry")
	}
	if h.matches(client, backend) {
		t.Error("a service entry without its reply half still matches")
	}
	if _, ok := h.lookup(client, frontend, bpfCtDirCT_SERVICE); !ok {
		t.Error("forgetting the reply removed the service entry")
	}
}

// TestConntrackSNAT: a SNATed flow's reply entry is keyed on the node's
// address and port and remembers the client; another client given the
// same node port to the same backend takes the reply half over, and the
// first flow stops matching.
func TestConntrackSNAT(t *testing.T) {
	h := load(t)
	h.at(2_000_000, 0)
	snat := netip.AddrPortFrom(nodeIP, 61005)
	h.create(client, backend, 4, snat)

	svc, ok := h.lookup(client, frontend, bpfCtDirCT_SERVICE)
	wantFlags := uint8(bpfCtFlagsCT_F_EXTERNAL | bpfCtFlagsCT_F_SNAT | bpfCtFlagsCT_F_HANDSHAKE)
	if !ok || svc.Entry.Flags != wantFlags || svc.Entry.NatAddr.W != addr(nodeIP).W || svc.Entry.NatPort != port(61005) {
		t.Fatalf("service entry: found %v, %+v", ok, svc.Entry)
	}
	reply, ok := h.lookup(backend, snat, bpfCtDirCT_REPLY)
	if !ok || reply.Entry.NatAddr.W != addr(client.Addr()).W || reply.Entry.NatPort != port(client.Port()) {
		t.Fatalf("reply entry keyed on the node port: found %v, %+v", ok, reply.Entry)
	}
	if _, ok := h.lookup(backend, client, bpfCtDirCT_REPLY); ok {
		t.Error("a SNATed flow has a reply entry keyed on the client")
	}
	if !h.matches(client, backend) {
		t.Fatal("a fresh SNATed flow does not match its reply half")
	}
	h.create(client2, backend, 4, snat)
	if h.matches(client, backend) {
		t.Error("the first client still matches a reply half that now remembers another client")
	}
	if !h.matches(client2, backend) {
		t.Error("the second client does not match its reply half")
	}
}
