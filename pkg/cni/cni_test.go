package cni_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netcube/netcube/pkg/cni"
)

// TestAddCheckDel: the whole life of a dual-stack pod through the runtime's
// library, with the node reaching the pod over what ADD made.
func TestAddCheckDel(t *testing.T) {
	e := newEnv(t)
	ns := e.pod("a")
	if _, err := e.runtime("status", ns); err != nil {
		t.Fatalf("STATUS with the agent up: %v", err)
	}
	res, err := e.runtime("add", ns)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	// The result, as the spec shapes it.
	if len(res.Interfaces) != 2 || res.Interfaces[1].Name != "eth0" || res.Interfaces[1].Sandbox != ns ||
		!strings.HasPrefix(res.Interfaces[0].Name, cni.HostIfPrefix) || res.Interfaces[1].Mac == "" {
		t.Fatalf("interfaces %+v", res.Interfaces)
	}
	if len(res.IPs) != 2 || *res.IPs[0].Interface != 1 || res.IPs[0].Address.String() != "10.244.7.1/32" ||
		res.IPs[1].Address.String() != "fd00:10:244:7::1/128" || res.IPs[0].Gateway.String() != "169.254.1.1" {
		t.Fatalf("ips %v", res.IPs)
	}
	if len(res.Routes) != 2 || res.Routes[0].Dst.String() != "0.0.0.0/0" || res.Routes[1].GW.String() != "fe80::1" {
		t.Fatalf("routes %v", res.Routes)
	}
	// The agent was told before ADD returned.
	if len(e.agent.added) != 1 || e.agent.added[0].HostIf != res.Interfaces[0].Name || e.agent.added[0].HostIfIndex == 0 ||
		len(e.agent.added[0].Addrs) != 2 {
		t.Fatalf("agent told %+v", e.agent.added)
	}
	// Real packets: node -> pod and back, both families.
	for _, a := range []string{"10.244.7.1", "fd00:10:244:7::1"} {
		if err := ping(e.node, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.runtime("check", ns); err != nil {
		t.Fatalf("CHECK of an untouched pod: %v", err)
	}

	// DEL: veth and allocation gone; a second DEL succeeds too.
	if _, err := e.runtime("del", ns); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if l := e.hostLinks(); len(l) != 0 {
		t.Fatalf("host veths after DEL: %v", l)
	}
	if a := e.allocations(); len(a) != 0 {
		t.Fatalf("allocations after DEL: %v", a)
	}
	if len(e.agent.deleted) != 1 {
		t.Errorf("agent not told of the DEL: %+v", e.agent.deleted)
	}
	if err := ping(e.node, "10.244.7.1"); err == nil {
		t.Fatal("the pod still answers after DEL")
	}
	if _, err := e.runtime("del", ns); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
}

// TestCheckReportsChanges: CHECK names what was changed behind the
// plugin's back.
func TestCheckReportsChanges(t *testing.T) {
	e := newEnv(t)
	ns := e.pod("a")
	res, err := e.runtime("add", ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.runtime("check", ns); err != nil {
		t.Fatalf("CHECK before any change: %v", err)
	}
	podNS := strings.TrimPrefix(ns, "/run/netns/")
	for _, c := range []struct {
		name   string
		break_ []string
		mend   [][]string // the address's routes go with it
		says   string
	}{
		{"address removed", []string{"-n", podNS, "addr", "del", "10.244.7.1/32", "dev", "eth0"},
			[][]string{{"-n", podNS, "addr", "add", "10.244.7.1/32", "dev", "eth0"},
				{"-n", podNS, "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link"},
				{"-n", podNS, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0"}}, "address 10.244.7.1 is missing"},
		{"default route removed", []string{"-n", podNS, "-6", "route", "del", "default"},
			[][]string{{"-n", podNS, "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0"}}, "default route via fe80::1 is missing"},
		{"host route removed", []string{"-n", e.node, "route", "del", "10.244.7.1/32"},
			[][]string{{"-n", e.node, "route", "add", "10.244.7.1/32", "dev", res.Interfaces[0].Name}}, "route to 10.244.7.1 is missing"},
		{"pod interface down", []string{"-n", podNS, "link", "set", "eth0", "down"},
			nil, "eth0 is down"},
	} {
		run(t, "ip", c.break_...)
		_, err := e.runtime("check", ns)
		wantCode(t, err, types.ErrInternal, c.says)
		if c.mend != nil {
			for _, m := range c.mend {
				run(t, "ip", m...)
			}
			if _, err := e.runtime("check", ns); err != nil {
				t.Fatalf("%s: CHECK after mending: %v", c.name, err)
			}
		}
	}
}

// TestSecondAddIsRefused: ADD for an interface the pod has is an error,
// and no second address is handed out.
func TestSecondAddIsRefused(t *testing.T) {
	e := newEnv(t)
	ns := e.pod("a")
	if _, err := e.runtime("add", ns); err != nil {
		t.Fatal(err)
	}
	_, err := e.runtime("add", ns)
	wantCode(t, err, cni.ErrInterfaceExists, "already has interface eth0")
	if a := e.allocations(); len(a) != 1 || len(a[0].Addrs) != 2 {
		t.Fatalf("allocations after a second ADD: %v", a)
	}
	if l := e.hostLinks(); len(l) != 1 {
		t.Fatalf("host veths after a second ADD: %v", l)
	}
}

// TestInvalidConfig: every invalid field named, nothing created.
func TestInvalidConfig(t *testing.T) {
	e := newEnv(t)
	ns := e.pod("a")
	if _, err := e.runtime("add", ns); err != nil { // positive control: the valid config works
		t.Fatal(err)
	}
	if _, err := e.runtime("del", ns); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fields map[string]any
		says   []string
	}{
		{map[string]any{"podCIDRs": nil}, []string{`"podCIDRs" is missing`}},
		{map[string]any{"podCIDRs": []string{"10.244.300.0/24", "10.1.0.0/16", "10.2.0.0/16"}, "mtu": 70},
			[]string{`podCIDRs[0]: "10.244.300.0/24" is not a CIDR`, "podCIDRs[2]: 10.2.0.0/16 is a second CIDR", `"mtu": 70 is not in 1280-65535`}},
		{map[string]any{"podCIDRs": []string{"10.244.7.0/24"}, "podDevice": "macvlan"},
			[]string{`"podDevice": "macvlan" is not a pod device: veth or netkit`}},
	} {
		e.writeConf(c.fields)
		_, err := e.runtime("add", ns)
		wantCode(t, err, types.ErrInvalidNetworkConfig, c.says...)
		if l := e.hostLinks(); len(l) != 0 {
			t.Fatalf("host veths after a refused ADD: %v", l)
		}
		if a := e.allocations(); len(a) != 0 {
			t.Fatalf("allocations after a refused ADD: %v", a)
		}
	}
}

// TestNetkitPods: with "podDevice": "netkit", ADD on a kernel that cannot
// make a netkit pair (this machine's: CONFIG_NETKIT is not set) fails with
// the kernel's answer and leaves no device and no address, while a veth pod
// (the positive control, before and after) works on the same node. On a
// kernel that can, the pod gets a netkit pair that drops what the pod
// sends until the agent has put netcube's programs on it (the test's agent
// puts none): the node's pings get no answer.
func TestNetkitPods(t *testing.T) {
	e := newEnv(t)
	veth, nk := e.pod("a"), e.pod("b")
	if _, err := e.runtime("add", veth); err != nil {
		t.Fatal(err)
	}
	e.writeConf(map[string]any{"podCIDRs": []string{"10.244.7.0/24", "fd00:10:244:7::/64"}, "podDevice": "netkit"})
	res, err := e.runtime("add", nk)
	if perr := cni.ProbeNetkit(); perr != nil {
		kernel := perr.Error()[strings.LastIndex(perr.Error(), ": ")+2:] // its errno's text
		wantCode(t, err, types.ErrInternal, "create netkit", kernel)
		if l := e.hostLinks(); len(l) != 1 {
			t.Errorf("host devices after the refused ADD: %v, want the veth pod's alone", l)
		}
		if a := e.allocations(); len(a) != 1 {
			t.Errorf("allocations after the refused ADD: %v, want the veth pod's alone", a)
		}
	} else {
		if err != nil {
			t.Fatalf("ADD of a netkit pod: %v", err)
		}
		if out := run(t, "ip", "-n", e.node, "-d", "link", "show", res.Interfaces[0].Name); !strings.Contains(out, "netkit") {
			t.Errorf("the pod's host device is not netkit:\n%s", out)
		}
		if err := ping(e.node, res.IPs[0].Address.IP.String()); err == nil {
			t.Errorf("a netkit pod without netcube's programs answered the node")
		}
	}
	if err := ping(e.node, "10.244.7.1"); err != nil {
		t.Fatalf("the veth pod: %v", err)
	}
}

// TestRangeExhausted: the pod that finds no address gets a clear error;
// the pods that have one keep working.
func TestRangeExhausted(t *testing.T) {
	e := newEnv(t, "10.244.8.0/30") // two pods
	var pods []string
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, e.pod(n))
	}
	for _, ns := range pods[:2] {
		if _, err := e.runtime("add", ns); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.runtime("add", pods[2])
	wantCode(t, err, cni.ErrRangeFull, "pod CIDR 10.244.8.0/30 has no free address (2 in use)")
	if l := e.hostLinks(); len(l) != 2 {
		t.Fatalf("host veths: %v", l)
	}
	for _, a := range []string{"10.244.8.1", "10.244.8.2"} {
		if err := ping(e.node, a); err != nil {
			t.Fatal(err)
		}
	}
	// Room again after a DEL.
	if _, err := e.runtime("del", pods[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runtime("add", pods[2]); err != nil {
		t.Fatalf("ADD after a DEL made room: %v", err)
	}
}

// TestAgentDownOrRefusing: with no agent, STATUS says not available and
// ADD fails after waiting, leaving nothing; an agent refusing the pod
// fails ADD the same way. Existing pods keep working meanwhile.
func TestAgentDownOrRefusing(t *testing.T) {
	e := newEnv(t)
	first, second := e.pod("a"), e.pod("b")
	if _, err := e.runtime("add", first); err != nil {
		t.Fatal(err)
	}
	e.stopAgent()
	_, err := e.runtime("status", first)
	wantCode(t, err, types.ErrPluginNotAvailable, "not ready", "not running")
	_, err = e.runtime("add", second)
	wantCode(t, err, types.ErrTryAgainLater, "not running")
	if l := e.hostLinks(); len(l) != 1 {
		t.Fatalf("host veths with the agent down: %v", l)
	}
	if a := e.allocations(); len(a) != 1 {
		t.Fatalf("allocations with the agent down: %v", a)
	}
	if err := ping(e.node, "10.244.7.1"); err != nil {
		t.Fatalf("the existing pod with the agent down: %v", err)
	}

	e.agent.failAdd = errors.New("attach from_pod: no such program")
	e.startAgent()
	_, err = e.runtime("add", second)
	wantCode(t, err, types.ErrTryAgainLater, "did not attach", "no such program")
	if l := e.hostLinks(); len(l) != 1 {
		t.Fatalf("host veths after the agent refused: %v", l)
	}
	if a := e.allocations(); len(a) != 1 {
		t.Fatalf("allocations after the agent refused: %v", a)
	}
	e.agent.failAdd = nil
	if _, err := e.runtime("add", second); err != nil {
		t.Fatalf("ADD once the agent accepts: %v", err)
	}
}

// TestGC: GC keeps the attachments the runtime lists and releases the
// rest, with their veths.
func TestGC(t *testing.T) {
	e := newEnv(t)
	a, b := e.pod("a"), e.pod("b")
	var results []string
	for _, ns := range []string{a, b} {
		res, err := e.runtime("add", ns)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res.Interfaces[0].Name)
	}
	keep := types.GCAttachment{ContainerID: "c-" + strings.TrimPrefix(a, "/run/netns/"), IfName: "eth0"}
	if _, err := e.runtime("gc", a, keep); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if l := e.hostLinks(); !slices.Equal(l, results[:1]) {
		t.Fatalf("host veths after GC: %v, want %v", l, results[:1])
	}
	all := e.allocations()
	if len(all) != 1 || all[0].ContainerID != keep.ContainerID {
		t.Fatalf("allocations after GC: %v", all)
	}
	if err := ping(e.node, all[0].Addrs[0].String()); err != nil {
		t.Fatalf("the kept pod after GC: %v", err)
	}
}

// TestDelAfterNetnsGone: the runtime may delete the namespace first.
func TestDelAfterNetnsGone(t *testing.T) {
	e := newEnv(t)
	ns := e.pod("a")
	if _, err := e.runtime("add", ns); err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "netns", "del", strings.TrimPrefix(ns, "/run/netns/"))
	if _, err := e.runtime("del", ns); err != nil {
		t.Fatalf("DEL with the netns gone: %v", err)
	}
	if a := e.allocations(); len(a) != 0 {
		t.Fatalf("allocations: %v", a)
	}
	if l := e.hostLinks(); len(l) != 0 {
		t.Fatalf("host veths: %v", l)
	}
}

// TestCnitool: the reference client drives ADD, CHECK, STATUS, GC and DEL.
func TestCnitool(t *testing.T) {
	e := newEnv(t)
	ns := e.pod("a")
	tool := func(args ...string) (string, error) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", e.node, e.binDir + "/cnitool"}, args...)...)
		cmd.Env = append(os.Environ(), "CNI_PATH="+e.binDir, "NETCONFPATH="+e.confDir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := tool("status", "netcube", ns)
	if err != nil {
		t.Fatalf("cnitool status: %v\n%s", err, out)
	}
	out, err = tool("add", "netcube", ns)
	if err != nil {
		t.Fatalf("cnitool add: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"10.244.7.1/32"`) || !strings.Contains(out, `"fd00:10:244:7::1/128"`) {
		t.Fatalf("cnitool add printed %s", out)
	}
	if err := ping(e.node, "fd00:10:244:7::1"); err != nil {
		t.Fatal(err)
	}
	if out, err := tool("check", "netcube", ns); err != nil {
		t.Fatalf("cnitool check: %v\n%s", err, out)
	}
	run(t, "ip", "-n", strings.TrimPrefix(ns, "/run/netns/"), "addr", "del", "fd00:10:244:7::1/128", "dev", "eth0")
	if out, err := tool("check", "netcube", ns); err == nil || !strings.Contains(out, "address fd00:10:244:7::1 is missing") {
		t.Fatalf("cnitool check of a changed pod: %v\n%s", err, out)
	}
	if out, err := tool("del", "netcube", ns); err != nil {
		t.Fatalf("cnitool del: %v\n%s", err, out)
	}
	if out, err := tool("del", "netcube", ns); err != nil {
		t.Fatalf("cnitool del again: %v\n%s", err, out)
	}
	// cnitool's GC lists no valid attachment: everything goes.
	if out, err := tool("add", "netcube", ns); err != nil {
		t.Fatalf("cnitool add: %v\n%s", err, out)
	}
	if out, err := tool("gc", "netcube", ns); err != nil {
		t.Fatalf("cnitool gc: %v\n%s", err, out)
	}
	if a := e.allocations(); len(a) != 0 {
		t.Fatalf("allocations after cnitool gc: %v", a)
	}
	e.stopAgent()
	if out, err := tool("status", "netcube", ns); err == nil || !strings.Contains(out, "not ready") {
		t.Fatalf("cnitool status with the agent down: %v\n%s", err, out)
	}
}

// TestVersion: VERSION names the spec versions the plugin speaks, 1.1.0
// (GC, STATUS) among them.
func TestVersion(t *testing.T) {
	cmd := exec.Command(filepath.Join(binaries(t), cni.PluginType))
	cmd.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !slices.Contains(v.SupportedVersions, "1.1.0") || !slices.Contains(v.SupportedVersions, "0.4.0") {
		t.Fatalf("supported versions %v", v.SupportedVersions)
	}
}
