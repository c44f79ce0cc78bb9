package agent

import (
	"strings"
	"testing"
)

// TestCheckDatapath: the kernel datapath takes every setting; a hollow
// agent (maps in memory) refuses those that would need the host, naming
// each flag; an unknown datapath is named.
func TestCheckDatapath(t *testing.T) {
	kernel := Defaults()
	if err := checkDatapath(kernel); err != nil {
		t.Fatalf("the defaults refused: %v", err)
	}
	hollow := Defaults()
	hollow.Datapath, hollow.SocketLB, hollow.CNISocket = DatapathMemory, false, ""
	if err := checkDatapath(hollow); err != nil {
		t.Fatalf("a hollow agent without socket-LB or CNI refused: %v", err)
	}
	hollow.NodeInterfaces = []string{"none"} // as bench scale starts them
	if err := checkDatapath(hollow); err != nil {
		t.Fatalf("a hollow agent with --node-ifaces=none refused: %v", err)
	}
	bad := Defaults() // socket-LB and the CNI socket on
	bad.Datapath, bad.CNIConfDir = DatapathMemory, "/etc/cni/net.d"
	bad.NodePortAcceleration, bad.NodeInterfaces = "xdp", []string{"eth0"}
	err := checkDatapath(bad)
	for _, want := range []string{"--datapath=memory with --socket-lb", "--datapath=memory with --cni-socket", "--datapath=memory with --cni-conf-dir",
		`--datapath=memory with --nodeport-acceleration "xdp"`, `--datapath=memory with --node-ifaces "eth0"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	bad.Datapath = "fpga"
	if err := checkDatapath(bad); err == nil || !strings.Contains(err.Error(), `"fpga": want kernel or memory`) {
		t.Errorf("unknown datapath: %v", err)
	}
}
