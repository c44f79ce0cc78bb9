package cni_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/cni/cnisocket"
	"github.com/netcube/netcube/pkg/ipam"
)

// These tests run the real plugin binary, as a container runtime does
// (libcni, the library containerd and CRI-O use) and through the real
// cnitool, in network namespaces they create: a "node" (where the plugin
// runs, as on a node) and pods. The agent's side of the socket is served by
// the test (recordingAgent): what the real agent does with a pod is tested
// in pkg/agent.

// env is one node namespace with the plugin installed and an agent socket.
type env struct {
	t       *testing.T
	node    string // netns name
	binDir  string // netcube-cni, cnitool
	confDir string
	dataDir string
	socket  string
	agent   *recordingAgent
	// wrap, if set, is the agent's side of the socket around agent (the
	// real policy gate, in policy_test.go).
	wrap func(cnisocket.AgentHandler) cnisocket.AgentHandler
	// k8sPod, if set, is the pod ("namespace/name") the runtime names
	// in CNI_ARGS, as kubelet's does.
	k8sPod string
	stop   context.CancelFunc
}

var build struct {
	once sync.Once
	dir  string
	err  error
}

// binaries builds netcube-cni and cnitool once per test process.
func binaries(t *testing.T) string {
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "netcube-cni-bin")
		if build.err != nil {
			return
		}
		for _, pkg := range []string{"github.com/netcube/netcube/cmd/netcube-cni", "github.com/containernetworking/cni/cnitool"} {
			out, err := exec.Command("go", "build", "-o", build.dir+"/", pkg).CombinedOutput()
			if err != nil {
				build.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

func newEnv(t *testing.T, podCIDRs ...string) *env {
	testenv.RequireRoot(t)
	if len(podCIDRs) == 0 {
		podCIDRs = []string{"10.244.7.0/24", "fd00:10:244:7::/64"}
	}
	dir := t.TempDir()
	e := &env{
		t:       t,
		node:    testenv.Name("nccni") + "-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		binDir:  binaries(t),
		confDir: filepath.Join(dir, "net.d"),
		dataDir: filepath.Join(dir, "ipam"),
		socket:  filepath.Join(dir, "cni.sock"),
	}
	if len(e.node) > 60 {
		e.node = e.node[:60]
	}
	run(t, "ip", "netns", "add", e.node)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", e.node).Run() })
	run(t, "ip", "-n", e.node, "link", "set", "lo", "up")
	// The node's own address (documentation ranges, inside this namespace
	// only): the source of its pings, where pods' replies come back to.
	run(t, "ip", "-n", e.node, "addr", "add", "192.0.2.10/32", "dev", "lo")
	run(t, "ip", "-n", e.node, "addr", "add", "2001:db8::10/128", "dev", "lo")
	e.writeConf(map[string]any{"podCIDRs": podCIDRs})
	e.startAgent()
	t.Cleanup(func() { e.stopAgent() })
	return e
}

// writeConf installs the conflist as the agent does, with fields over
// the defaults.
func (e *env) writeConf(fields map[string]any) {
	plugin := map[string]any{"type": cni.PluginType, "dataDir": e.dataDir, "agentSocket": e.socket}
	for k, v := range fields {
		plugin[k] = v
	}
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "netcube", "plugins": []any{plugin}})
	if err := os.MkdirAll(e.confDir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.confDir, "10-netcube.conflist"), b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) startAgent() {
	if e.agent == nil {
		e.agent = &recordingAgent{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	var h cnisocket.AgentHandler = e.agent
	if e.wrap != nil {
		h = e.wrap(h)
	}
	if err := cnisocket.Serve(ctx, e.socket, h); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) stopAgent() {
	if e.stop != nil {
		e.stop()
		testenv.WaitFor(e.t, 2*time.Second, "agent socket removed", func() bool { _, err := os.Stat(e.socket); return err != nil })
		e.stop = nil
	}
}

// pod creates a pod network namespace and returns its path.
func (e *env) pod(name string) string {
	ns := e.node + "-" + name
	run(e.t, "ip", "netns", "add", ns)
	e.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	return "/run/netns/" + ns
}

// runtime calls the plugin through libcni from inside the node namespace,
// as a container runtime on the node would.
func (e *env) runtime(op, netnsPath string, valid ...types.GCAttachment) (*types100.Result, error) {
	e.t.Helper()
	args := []string{"netns", "exec", e.node, os.Args[0], "-test.run=^TestHelperRuntime$", "-test.count=1"}
	cmd := exec.Command("ip", args...)
	vb, _ := json.Marshal(valid)
	cmd.Env = append(os.Environ(), "CNI_HELPER_OP="+op, "CNI_HELPER_NETNS="+netnsPath,
		"CNI_HELPER_PATH="+e.binDir, "CNI_HELPER_CONF="+e.confDir, "CNI_HELPER_VALID="+string(vb), "CNI_HELPER_POD="+e.k8sPod)
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("runtime helper %s: %v\n%s", op, err, out)
	}
	var reply helperReply
	if err := json.Unmarshal(lastLine(out), &reply); err != nil {
		e.t.Fatalf("runtime helper %s: %v\n%s", op, err, out)
	}
	if reply.Err != nil {
		return nil, reply.Err
	}
	return reply.Result, nil
}

type helperReply struct {
	Result *types100.Result `json:"result,omitempty"`
	Err    *types.Error     `json:"err,omitempty"`
}

func lastLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			return []byte(lines[i])
		}
	}
	return b
}

// TestHelperRuntime is the runtime: it runs inside the node namespace (the
// plugin creates host veths in the namespace it runs in) and prints the
// result or the CNI error as one JSON line.
func TestHelperRuntime(t *testing.T) {
	op := os.Getenv("CNI_HELPER_OP")
	if op == "" {
		t.Skip("run by newEnv's runtime()")
	}
	c := libcni.NewCNIConfigWithCacheDir([]string{os.Getenv("CNI_HELPER_PATH")}, filepath.Join(os.Getenv("CNI_HELPER_CONF"), "cache"), nil)
	list, err := libcni.LoadNetworkConf(os.Getenv("CNI_HELPER_CONF"), "netcube")
	if err != nil {
		t.Fatal(err)
	}
	nsPath := os.Getenv("CNI_HELPER_NETNS")
	rt := &libcni.RuntimeConf{ContainerID: "c-" + filepath.Base(nsPath), NetNS: nsPath, IfName: "eth0"}
	if ns, name, ok := strings.Cut(os.Getenv("CNI_HELPER_POD"), "/"); ok {
		rt.Args = [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", ns}, {"K8S_POD_NAME", name}}
	}
	ctx := context.Background()
	var reply helperReply
	switch op {
	case "add":
		var r types.Result
		r, err = c.AddNetworkList(ctx, list, rt)
		if err == nil {
			reply.Result, err = types100.NewResultFromResult(r)
		}
	case "check":
		err = c.CheckNetworkList(ctx, list, rt)
	case "del":
		err = c.DelNetworkList(ctx, list, rt)
	case "status":
		err = c.GetStatusNetworkList(ctx, list)
	case "gc":
		var valid []types.GCAttachment
		_ = json.Unmarshal([]byte(os.Getenv("CNI_HELPER_VALID")), &valid)
		err = c.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid})
	}
	if err != nil {
		var ce *types.Error
		if !errors.As(err, &ce) {
			ce = &types.Error{Code: 0, Msg: err.Error()}
		}
		reply.Err = ce
	}
	b, _ := json.Marshal(reply)
	fmt.Println(string(b))
}

// recordingAgent is the agent's side of the socket, recording the pods it
// is told of; failAdd makes it refuse them.
type recordingAgent struct {
	mu      sync.Mutex
	added   []cni.Pod
	deleted []cni.Pod
	failAdd error
}

func (a *recordingAgent) Ready() error { return nil }
func (a *recordingAgent) PodAdded(p cni.Pod) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failAdd != nil {
		return a.failAdd
	}
	a.added = append(a.added, p)
	return nil
}
func (a *recordingAgent) PodDeleted(p cni.Pod) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deleted = append(a.deleted, p)
	return nil
}

func (e *env) allocations() []ipam.Allocation {
	s, err := ipam.Open(e.dataDir)
	if err != nil {
		e.t.Fatal(err)
	}
	all, err := s.List()
	if err != nil {
		e.t.Fatal(err)
	}
	return all
}

// hostLinks lists the node's pod veths.
func (e *env) hostLinks() []string {
	out := run(e.t, "ip", "-n", e.node, "-o", "link", "show")
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], cni.HostIfPrefix) {
			names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	return names
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func ping(node, addr string) error {
	args := []string{"netns", "exec", node, "ping", "-c1", "-W2", addr}
	if netip.MustParseAddr(addr).Is6() {
		args = append(args[:4], append([]string{"-6"}, args[4:]...)...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from %s: %v\n%s", addr, node, err, out)
	}
	return nil
}

func wantCode(t *testing.T, err error, code uint, in ...string) {
	t.Helper()
	var ce *types.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want CNI error code %d", err, code)
	}
	if ce.Code != code {
		t.Fatalf("CNI error code %d (%s), want %d", ce.Code, ce.Error(), code)
	}
	for _, s := range in {
		if !strings.Contains(ce.Error(), s) {
			t.Errorf("CNI error %q does not say %q", ce.Error(), s)
		}
	}
}
