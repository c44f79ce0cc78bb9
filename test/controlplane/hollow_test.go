package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/netcube/netcube/internal/testenv"
)

// TestHollowAgent: an agent with --datapath=memory, run as an unprivileged
// user, follows the API server as any agent does (ready; a Service and
// its endpoints programmed, the change timed as network programming
// latency; another node's pod CIDR in its router map) and leaves the
// host alone: no pin, no link, no route. Configurations that would touch
// the host are refused, naming the flags.
func TestHollowAgent(t *testing.T) {
	dir, kubeconfig := hollowDir(t)
	links := func() string { out, _ := exec.Command("ip", "-o", "link", "show").Output(); return string(out) }
	pins := func() string { // bpffs two levels deep: each pin directory and what it holds
		var names []string
		top, _ := os.ReadDir("/sys/fs/bpf")
		for _, d := range top {
			names = append(names, d.Name())
			if d.IsDir() {
				sub, _ := os.ReadDir(filepath.Join("/sys/fs/bpf", d.Name()))
				for _, e := range sub {
					names = append(names, d.Name()+"/"+e.Name())
				}
			}
		}
		return strings.Join(names, "\n")
	}
	linksBefore, pinsBefore := links(), pins()
	// As root first, where a host change would succeed (and be seen).
	a := startHollow(t, dir, kubeconfig, "hollow-1", nil)
	metric := func(name string) float64 { return a.metric(name) }
	c, ns := env.Client, "default"
	if _, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "hollow", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), "hollow", metav1.DeleteOptions{}) })
	s := slice(ns, "hollow", "hollow", false, ready("10.244.9.1", "10.244.9.2"))
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), "hollow", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, bound, "the Service's change programmed and timed", func() bool {
		return metric("netcube_network_programming_duration_seconds_count") == 1
	})
	if n := metric(`netcube_map_fill_ratio{map="lb_backends"}`); n <= 0 {
		t.Errorf("lb_backends fill ratio %g: the endpoints are not in the memory maps", n)
	}

	// Another node: its pod CIDR goes into the router's map, and no route
	// into the host's table.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hollow-2"}, Spec: corev1.NodeSpec{PodCIDR: "10.250.7.0/24", PodCIDRs: []string{"10.250.7.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.77"}}}}
	if _, err := c.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(ctx(t), "hollow-2", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, bound, "the other node's pod CIDR in router_nodes", func() bool {
		return metric(`netcube_map_operations_total{map="router_nodes",op="update",result="ok"}`) >= 1
	})
	if out, _ := exec.Command("ip", "route", "show", "10.250.7.0/24").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("a hollow agent installed a route: %s", out)
	}
	if got := links(); got != linksBefore {
		t.Errorf("links changed while a hollow agent ran:\nbefore %s\nafter %s", linksBefore, got)
	}
	if got := pins(); got != pinsBefore {
		t.Errorf("bpffs changed while a hollow agent ran:\nbefore %s\nafter %s", pinsBefore, got)
	}

	// And as an unprivileged user: it needs no root. This one streams
	// its lists (watch-list) in JSON, the other ways to ask the API
	// server that bench scale compares.
	nobody := startHollow(t, dir, kubeconfig, "hollow-3", &syscall.Credential{Uid: 65534, Gid: 65534}, "--api-watch-list", "--api-content-type=json")
	testenv.WaitFor(t, bound, "the unprivileged hollow agent holds the Service's endpoints", func() bool {
		return nobody.metric(`netcube_map_fill_ratio{map="lb_backends"}`) > 0
	})

	// Refused, after the same flags started an agent above: they need
	// the host.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--socket-lb"}, "--datapath=memory with --socket-lb"},
		{[]string{"--socket-lb=false", "--cni-socket", "/tmp/x.sock"}, "--datapath=memory with --cni-socket"},
		{[]string{"--datapath", "fpga"}, "want kernel or memory"},
		{[]string{"--socket-lb=false", "--api-content-type", "yaml"}, "want protobuf or json"},
		{[]string{"--socket-lb=false", "--pod-source", "kubelet"}, "want pods or nodepods"},
	} {
		args := append([]string{"--datapath", "memory", "--kubeconfig", env.Kubeconfig, "--node-name", "hollow-refused", "--cni-socket=",
			"--api-socket=", "--hubble-socket=", "--metrics-bind-address=", "--healthz-bind-address="}, c.args...)
		out, err := exec.Command(filepath.Join(binDir, "netcube-agent"), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: %v, output %q; want it refused saying %q", c.args, err, out, c.want)
		}
	}
}

// hollowDir is a directory readable by an unprivileged user holding the
// agent's binary and a kubeconfig with its credentials inline (for
// startHollow); it is removed when the test ends.
func hollowDir(t *testing.T) (dir, kubeconfig string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "netcube-hollow-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubeconfig = filepath.Join(dir, "kubeconfig")
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		t.Fatal(err)
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netcube-agent")
	exe, err := os.ReadFile(filepath.Join(binDir, "netcube-agent"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{kubeconfig, b, 0o644}, {bin, exe, 0o755}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	return dir, kubeconfig
}

// startHollow starts a hollow agent for node (as user cred; nil: this
// process's) and waits until it is ready.
func startHollow(t *testing.T, dir, kubeconfig, node string, cred *syscall.Credential, extra ...string) *agent {
	t.Helper()
	a := &agent{metrics: freeAddr(t), healthz: freeAddr(t), log: filepath.Join(dir, node+".log")}
	logf, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	a.cmd = exec.Command(filepath.Join(dir, "netcube-agent"), "--datapath", "memory", "--kubeconfig", kubeconfig, "--node-name", node,
		"--socket-lb=false", "--node-ifaces", "none", "--cni-socket=", "--api-socket=", "--hubble-socket=",
		"--metrics-bind-address", a.metrics, "--healthz-bind-address", a.healthz)
	a.cmd.Args = append(a.cmd.Args, extra...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			b, _ := os.ReadFile(a.log)
			t.Logf("%s log:\n%s", node, b)
		}
	})
	testenv.WaitFor(t, 30*time.Second, node+" ready", func() bool { return a.get("/readyz", a.healthz) == "ok" })
	return a
}

// metric is the value of one sample of the agent's /metrics (0: absent).
func (a *agent) metric(name string) float64 {
	var v float64
	line := grep(a.get("/metrics", a.metrics), name+" ")
	_, _ = fmt.Sscanf(strings.TrimPrefix(line, name+" "), "%g", &v)
	return v
}
