package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/datapath"
)

// TestEveryDropReasonIsNamed: a reason the datapath adds without a name
// (and a cube) here would reach users as "unknown-N".
func TestEveryDropReasonIsNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range DropReasons() {
		r, ok := drops[d]
		if !ok || r.Name == "" || r.Cube == "" || r.Help == "" {
			t.Errorf("drop reason %d has no name, cube or help: %+v", d, r)
		}
		if seen[r.Name] {
			t.Errorf("drop reason name %q used twice", r.Name)
		}
		seen[r.Name] = true
	}
	if len(drops) != len(DropReasons()) {
		t.Errorf("%d names for %d reasons", len(drops), len(DropReasons()))
	}
}

func raw(t *testing.T, e datapath.MonEvent) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := binary.Write(&b, binary.NativeEndian, e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecode: a record as the datapath writes it becomes the event users
// read: addresses unmapped, ports in host order, the reason and the cube
// named; a short record is refused.
func TestDecode(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.244.1.11:40000"), netip.MustParseAddrPort("10.96.0.10:80")
	e := datapath.MonEvent{TsNs: uint64(time.Second), Type: uint8(datapath.MonEvDrop), Point: uint8(datapath.MonAtFromPod),
		Drop: uint32(datapath.MonDropPolicyEgress), Ifindex: 7, Len: 74, Proto: 6, Family: 4, TcpFlags: 0x02,
		Sport: datapath.Port(src.Port()), Dport: datapath.Port(dst.Port()), PolDir: uint8(datapath.PolicyEgress), Endpoint: 3, Peer: 256}
	e.Saddr.W = datapath.AddrFrom(src.Addr()).W
	e.Daddr.W = datapath.AddrFrom(dst.Addr()).W
	boot := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	got, err := Decode(raw(t, e), boot)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Time: boot.Add(time.Second), Type: "drop", Cube: "policy", Point: "from-pod", Ifindex: 7, Len: 74, Family: 4,
		Proto: "TCP", Src: src, Dst: dst, TCPFlags: "SYN", Drop: "policy-denied-egress",
		Policy: &PolicyVerdict{Direction: "egress", Endpoint: 3, Peer: 256}}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if !bytes.Equal(gj, wj) {
		t.Errorf("decoded\n %s\nwant\n %s", gj, wj)
	}
	if s := got.String(); !strings.Contains(s, "DROPPED (policy-denied-egress) by policy at from-pod") || !strings.Contains(s, "10.244.1.11:40000 -> 10.96.0.10:80") {
		t.Errorf("line %q", s)
	}
	if _, err := Decode(raw(t, e)[:20], boot); err == nil {
		t.Error("a 20-byte record decoded")
	}
}

// TestSlowSubscriberLosesAloneAndNeverBlocks: a subscriber that does not
// read loses what it has no room for (counted); another gets everything;
// publishing never waits.
func TestSlowSubscriberLosesAloneAndNeverBlocks(t *testing.T) {
	h := NewHub()
	slow, fast := h.Subscribe(2), h.Subscribe(100)
	done := make(chan struct{})
	go func() {
		for i := 0; i < 10; i++ {
			h.Publish(Event{Len: uint32(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	if slow.Lost() != 8 || h.Lost() != 8 {
		t.Errorf("slow subscriber lost %d (hub %d), want 8", slow.Lost(), h.Lost())
	}
	if len(fast.C) != 10 || fast.Lost() != 0 {
		t.Errorf("fast subscriber has %d, lost %d; want 10, 0", len(fast.C), fast.Lost())
	}
	slow.Close()
	slow.Close() // twice is harmless
	if h.Subscribers() != 1 {
		t.Errorf("%d subscribers after one closed", h.Subscribers())
	}
}
