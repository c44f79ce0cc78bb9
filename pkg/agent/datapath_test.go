package agent

import (
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cni"
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

// TestCheckPodDevice: veth is taken anywhere (the positive control); an
// unknown device is named; netkit is taken where the kernel makes a netkit
// pair, and refused with the kernel's answer where it does not (this
// machine's kernel: CONFIG_NETKIT is not set), except by a hollow agent,
// which makes no pods.
func TestCheckPodDevice(t *testing.T) {
	testenv.RequireRoot(t)
	for _, d := range []string{"", cni.PodDeviceVeth} {
		if err := checkPodDevice(d, false); err != nil {
			t.Fatalf("--pod-device %q refused: %v", d, err)
		}
	}
	if err := checkPodDevice("macvlan", false); err == nil || !strings.Contains(err.Error(), `--pod-device: "macvlan" is not a pod device`) {
		t.Errorf("--pod-device macvlan: %v", err)
	}
	if err := checkPodDevice(cni.PodDeviceNetkit, true); err != nil {
		t.Errorf("a hollow agent with --pod-device netkit: %v", err)
	}
	err := checkPodDevice(cni.PodDeviceNetkit, false)
	if probe := cni.ProbeNetkit(); probe == nil {
		if err != nil {
			t.Errorf("--pod-device netkit refused on a kernel that makes netkit pairs: %v", err)
		}
	} else if err == nil || !strings.Contains(err.Error(), "--pod-device netkit: "+probe.Error()) {
		t.Errorf("--pod-device netkit on a kernel without netkit: %v, want it refused saying %q", err, probe)
	}
}
