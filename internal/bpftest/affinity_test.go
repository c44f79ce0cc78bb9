package bpftest

import (
	"testing"
	"time"
)

// TestAffinityTimeout: with sessionAffinity ClientIP, a client keeps its
// backend while it comes back within the timeout (each visit renews it),
// is balanced afresh once the timeout has passed, and never sticks to a
// backend its Service no longer has.
func TestAffinityTimeout(t *testing.T) {
	h := load(t)
	const revNAT, timeout = 5, 10 // seconds
	sec := func(s float64) uint64 { return uint64(s * float64(time.Second)) }
	key := func(slot uint16) bpfLbSvcKey {
		return bpfLbSvcKey{Addr: addr(frontend.Addr()), Port: port(frontend.Port()), Proto: 6, Slot: slot}
	}
	for slot, id := range []uint32{11, 12} {
		if err := h.objs.LbServices.Put(key(uint16(slot+1)), bpfLbSvcVal{BackendId: id}); err != nil {
			t.Fatal(err)
		}
		if err := h.objs.LbAffinityMatch.Put(bpfLbAffinityMatchKey{BackendId: id, RevNatId: revNAT}, uint8(1)); err != nil {
			t.Fatal(err)
		}
	}
	pick := func(atSec float64, random uint32) uint32 {
		t.Helper()
		h.at(sec(atSec), random)
		io := flowIO(bpfTestOpOP_PICK, client, frontend)
		io.Svc.BackendId, io.Svc.RevNatId, io.Svc.Count = timeout, revNAT, 2 // BackendId: the timeout
		return h.do(io).Result
	}
	steps := []struct {
		name   string
		at     float64
		random uint32 // slot random%2+1 if balanced
		want   uint32
	}{
		{"first visit: balanced (slot 1)", 100, 0, 11},
		{"back within the timeout: kept, though the dice say slot 2", 109, 1, 11},
		{"renewed by the last visit: kept", 118, 1, 11},
		{"past the timeout: balanced again (slot 2)", 128.5, 1, 12},
		{"within the new timeout: kept", 130, 0, 12},
	}
	for _, s := range steps {
		if got := pick(s.at, s.random); got != s.want {
			t.Fatalf("%s: backend %d, want %d", s.name, got, s.want)
		}
	}
	// Backend 12 leaves the Service: the client is balanced again at once.
	if err := h.objs.LbAffinityMatch.Delete(bpfLbAffinityMatchKey{BackendId: 12, RevNatId: revNAT}); err != nil {
		t.Fatal(err)
	}
	if err := h.objs.LbServices.Put(key(2), bpfLbSvcVal{BackendId: 11}); err != nil {
		t.Fatal(err)
	}
	if got := pick(131, 1); got != 11 {
		t.Errorf("stuck to a backend that left: got %d, want 11", got)
	}
}
