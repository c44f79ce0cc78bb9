package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/netcube/netcube/internal/cgroup"
	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/datapath"
)

// Sandbox is a running sandbox.
type Sandbox struct {
	Config   Config
	Topology Topology
}

const readyTimeout = 30 * time.Second

func layout(cfg Config) (Topology, error) {
	cg, err := cgroup.Root()
	if err != nil {
		return Topology{}, err
	}
	return Layout(cfg, cg), nil
}

// Up builds the sandbox and starts its pods' servers and agents, reporting
// progress to log. On failure everything created is removed again.
func Up(cfg Config, log io.Writer) (sb *Sandbox, err error) {
	cfg.defaults()
	if err := cfg.checkRouted(); err != nil {
		return nil, err
	}
	t, err := layout(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat("/run/netns/" + t.Underlay); err == nil {
		return nil, fmt.Errorf("sandbox %q is already up (netcube-lab sandbox down --name %s)", cfg.Name, cfg.Name)
	}
	if cfg.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = filepath.Dir(exe)
	}
	for _, bin := range []string{LabBinary, "netcube-agent", cni.PluginType} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make build`", bin, cfg.BinDir)
		}
	}
	defer func() {
		if err != nil && cfg.KeepOnFailure {
			fmt.Fprintf(log, "sandbox %s: failed, left as it is for inspection (netcube-lab sandbox down --name %s): %v\n", cfg.Name, cfg.Name, err)
		} else if err != nil {
			fmt.Fprintf(log, "sandbox %s: failed, cleaning up: %v\n", cfg.Name, err)
			_ = Down(cfg.Name, io.Discard)
		}
	}()

	if cfg.PodNetwork == PodNetworkFlannel && (!cfg.APIServer || cfg.FlannelDir == "") {
		return nil, fmt.Errorf("the flannel pod network needs the API server and FlannelDir (hack/build-flannel.sh)")
	}
	sb = &Sandbox{Config: cfg, Topology: t}
	for _, d := range []string{t.ManifestDir(), t.LogDir(), filepath.Join(t.StateDir, "pids")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	state, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(t.StateDir, "sandbox.json"), state, 0o644); err != nil {
		return nil, err
	}
	if err := datapath.EnsureBPFFS(); err != nil {
		return nil, err
	}

	fmt.Fprintf(log, "sandbox %s: %d nodes x %d pods, socket-LB %v, routing %s\n", cfg.Name, cfg.Nodes, cfg.PodsPerNode, cfg.SocketLB, cfg.routing())
	fmt.Fprintf(log, "  network: underlay bridge, nodes, routes\n")
	if err := buildNetwork(t, cfg.XDPUnderlay || cfg.NodePortAcceleration == "xdp"); err != nil {
		return nil, err
	}
	for _, p := range t.Pods() {
		if err := cgroup.Create(p.Cgroup); err != nil {
			return nil, err
		}
	}
	for _, n := range t.Nodes {
		if err := cgroup.Create(n.HostCgroup); err != nil {
			return nil, err
		}
	}
	if cfg.APIServer {
		fmt.Fprintf(log, "  kube-apiserver and etcd on %s:%d (kubeconfig %s)\n", apiServerIP4, apiServerPort, t.Kubeconfig())
		env, err := startAPIServer(cfg, t)
		if err != nil {
			return nil, err
		}
		if cfg.Kubelet {
			if err := sb.startRealNodes(env, log); err != nil {
				return nil, err
			}
			fmt.Fprintf(log, "sandbox %s is up (state and logs in %s)\n", cfg.Name, t.StateDir)
			return sb, nil
		}
	} else {
		fmt.Fprintf(log, "  manifests: %s\n", t.ManifestDir())
		if err := writeManifests(cfg, t); err != nil {
			return nil, err
		}
	}
	if cfg.PodNetwork == PodNetworkFlannel {
		fmt.Fprintf(log, "  flanneld on every node (the reference pod network, no netcube)\n")
		if err := sb.startFlannel(); err != nil {
			return nil, err
		}
	} else {
		for _, n := range t.Nodes {
			fmt.Fprintf(log, "  agent %s: starting\n", n.Name)
			if err := sb.startAgent(n); err != nil {
				return nil, err
			}
		}
		if cfg.APIServer {
			if err := sb.startOperator(log); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range t.Nodes {
		if cfg.PodNetwork != PodNetworkFlannel {
			if err := t.waitConfList(n, readyTimeout); err != nil {
				return nil, err
			}
		}
		for _, p := range n.Pods {
			fmt.Fprintf(log, "  pod %s: CNI ADD on %s\n", p.Name, n.Name)
			if _, err := t.addPod(n, p, sb.pluginDir(), sb.network()); err != nil {
				return nil, fmt.Errorf("pod %s: %w", p.Name, err)
			}
		}
	}
	if cfg.PodNetwork == PodNetworkFlannel {
		if err := sb.waitFlannelRoutes(); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(log, "  pods: starting servers on TCP and UDP %d\n", PodPort)
	for _, p := range t.Pods() {
		if err := sb.StartServer(p.Name); err != nil {
			return nil, err
		}
	}
	for _, p := range t.Pods() {
		if err := waitListening(p, PodPort, readyTimeout); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(log, "sandbox %s is up (state and logs in %s)\n", cfg.Name, t.StateDir)
	return sb, nil
}

func writeManifests(cfg Config, t Topology) error {
	if err := t.WriteManifest("nodes.yaml", "# The nodes: their pod CIDRs and addresses.\n"+t.NodesYAML()); err != nil {
		return err
	}
	if err := t.WriteManifest("pods.yaml", "# The pods: their addresses, labels and named ports (for NetworkPolicy).\n"+t.PodsYAML()); err != nil {
		return err
	}
	if err := writeRoutedManifests(t); err != nil {
		return err
	}
	if cfg.Manifests == "" {
		for file, content := range t.ExampleManifests() {
			if err := t.WriteManifest(file, content); err != nil {
				return err
			}
		}
		return nil
	}
	entries, err := os.ReadDir(cfg.Manifests)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(cfg.Manifests, e.Name()))
		if err != nil {
			return err
		}
		if err := t.WriteManifest(e.Name(), string(b)); err != nil {
			return err
		}
	}
	return nil
}

// pluginDir and network are where the runtime finds CNI plugins, and the
// network it asks for.
func (sb *Sandbox) pluginDir() string {
	if sb.Config.PodNetwork == PodNetworkFlannel {
		return sb.Config.FlannelDir
	}
	return sb.Config.BinDir
}

func (sb *Sandbox) network() string {
	if sb.Config.PodNetwork == PodNetworkFlannel {
		return flannelNetwork
	}
	return cni.NetworkName
}

func (c Config) routing() string {
	if c.Routing == "" {
		return "native"
	}
	return c.Routing
}

func agentName(node string) string { return "agent-" + node }

// AgentPID is the pid of a node's agent, if it runs.
func (t Topology) AgentPID(node string) (int, bool) { return pidOf(t, agentName(node)) }

func (sb *Sandbox) node(name string) (Node, error) {
	if n, ok := sb.Topology.Node(name); ok {
		return n, nil
	}
	return Node{}, fmt.Errorf("no node %q in sandbox %s", name, sb.Config.Name)
}

// StartAgent starts a node's agent and waits until it has applied the
// state and attached to the node's pods.
func (sb *Sandbox) StartAgent(node string) error {
	n, err := sb.node(node)
	if err != nil {
		return err
	}
	if err := sb.startAgent(n); err != nil {
		return err
	}
	return sb.waitPodsAttached(n)
}

// startAgent starts a node's agent and waits until it has applied the
// state.
func (sb *Sandbox) startAgent(n Node) error {
	t := sb.Topology
	ready := filepath.Join(t.StateDir, agentName(n.Name)+".ready")
	_ = os.Remove(ready)
	source := []string{"--manifests", t.ManifestDir()}
	if sb.Config.APIServer {
		source = []string{"--kubeconfig", t.Kubeconfig()}
	}
	agent := filepath.Join(sb.Config.BinDir, "netcube-agent")
	args := append([]string{agent},
		append(source, "--node-name", n.Name, "--bpf-root", n.PinDir, "--cgroup", n.Cgroup,
			"--socket-lb="+strconv.FormatBool(sb.Config.SocketLB), "--node-ifaces", "eth0",
			"--routing", sb.Config.routing(), "--cni-conf-dir", t.cniConfDir(n), "--cni-socket", t.cniSocket(n), "--ipam-dir", t.ipamDir(n),
			"--ready-file", ready)...)
	// The node's own sockets, for agents that serve them (an earlier
	// version's, in an upgrade, may not).
	for flag, path := range map[string]string{"api-socket": t.APISocket(n), "hubble-socket": t.HubbleSocket(n)} {
		if agentHasFlag(agent, flag) {
			args = append(args, "--"+flag, path)
		}
	}
	if a := sb.Config.NodePortAcceleration; a != "" {
		args = append(args, "--nodeport-acceleration", a)
	}
	if m := sb.Config.NodePortMode; m != "" {
		args = append(args, "--nodeport-mode", m)
	}
	args = append(args, sb.Config.AgentArgs...)
	if err := spawn(t, agentName(n.Name), n.Netns, "", args...); err != nil {
		return err
	}
	return waitFile(t, ready, agentName(n.Name), readyTimeout)
}

// waitPodsAttached waits until the agent has attached to every pod veth
// (an agent attaches to the pods present before it reports ready).
func (sb *Sandbox) waitPodsAttached(n Node) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		missing := ""
		for _, p := range n.Pods {
			if !podAttached(n, p) {
				missing = p.HostIf
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent on %s did not attach to %s", n.Name, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Netlink opens a netlink handle in the node's network namespace; done
// closes it.
func (n Node) Netlink() (h *netlink.Handle, done func(), err error) {
	ns, err := netns.GetFromName(n.Netns)
	if err != nil {
		return nil, nil, err
	}
	defer ns.Close() // the handle keeps its own sockets in the namespace
	if h, err = netlink.NewHandleAt(ns); err != nil {
		return nil, nil, err
	}
	return h, h.Close, nil
}

// podAttached tells whether the node's agent attached to the pod's device:
// a veth's tc filters or a netkit pair's programs, or the tcx links an
// older agent pinned.
func podAttached(n Node, p Pod) bool {
	if _, err := os.Stat(filepath.Join(n.PinDir, "links", "pod-"+p.HostIf+"-egress")); err == nil {
		return true
	}
	var fs map[string]string
	err := inNetns(n.Netns, func() (err error) {
		fs, err = datapath.PodFilters(p.HostIf)
		return err
	})
	return err == nil && fs["ingress"] != "" && fs["egress"] != ""
}

// StartServer starts a pod's echo server (TCP and UDP PodPort), as the
// sandbox does at start.
func (sb *Sandbox) StartServer(pod string) error {
	p, ok := sb.Topology.Pod(pod)
	if !ok {
		return fmt.Errorf("no pod %q in sandbox %s", pod, sb.Config.Name)
	}
	return spawn(sb.Topology, "pod-"+p.Name, p.Netns, p.Cgroup,
		filepath.Join(sb.Config.BinDir, LabBinary), "pod", "serve", "--name", p.Name, "--port", strconv.Itoa(PodPort))
}

// OutsidePort is where StartOutsideServer listens.
const OutsidePort = 9090

// StartOutsideServer runs an echo server on the external host, outside
// the cluster (the internet, for pods), and returns its IPv4 and IPv6
// addresses once it listens: its answers say which address it saw, so
// masquerading shows.
func (sb *Sandbox) StartOutsideServer() ([]string, error) {
	h := sb.Topology.External
	err := spawn(sb.Topology, "outside-server", h.Netns, "",
		filepath.Join(sb.Config.BinDir, LabBinary), "pod", "serve", "--name", "outside", "--port", strconv.Itoa(OutsidePort))
	if err != nil {
		return nil, err
	}
	if err := waitListening(Pod{Name: "outside", Netns: h.Netns}, OutsidePort, readyTimeout); err != nil {
		return nil, err
	}
	return []string{
		net.JoinHostPort(h.IP4.String(), strconv.Itoa(OutsidePort)),
		net.JoinHostPort(h.IP6.String(), strconv.Itoa(OutsidePort)),
	}, nil
}

// waitListening waits until a pod's echo server listens on TCP and UDP.
func waitListening(p Pod, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := exec.Command("ip", "netns", "exec", p.Netns, "ss", "-Hlntu", "sport = :"+strconv.Itoa(port)).Output()
		if err == nil && strings.Count(strings.TrimSpace(string(out)), "\n") >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no server listening on TCP and UDP %d within %s", p.Name, port, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StopServer kills a pod's echo server, as when the pod is deleted: new
// connections to it are refused from then on.
func (sb *Sandbox) StopServer(pod string) error {
	return stop(sb.Topology, "pod-"+pod, syscall.SIGKILL, 5*time.Second)
}

// StopAgent stops a node's agent: gracefully (SIGTERM), or as a crash
// (SIGKILL). Either way the datapath keeps running from its pins.
func (sb *Sandbox) StopAgent(node string, crash bool) error {
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	return stop(sb.Topology, agentName(node), sig, 10*time.Second)
}

// RemoveDatapath takes netcube's data plane off a node whose agent is
// stopped: its pins (which detaches the links: uplinks, cgroup) and the
// programs on its pods' devices. The node is then routed by its kernel
// alone, as for kube-proxy, or as after a reboot.
func (sb *Sandbox) RemoveDatapath(node string) error {
	n, ok := sb.Topology.Node(node)
	if !ok {
		return fmt.Errorf("no node %s", node)
	}
	if err := datapath.Unpin(n.PinDir); err != nil {
		return err
	}
	return inNetns(n.Netns, func() error { return datapath.DetachPods(cni.HostIfPrefix) })
}

// AgentAlive reports whether a node's agent is running.
func (sb *Sandbox) AgentAlive(node string) bool {
	_, alive := pidOf(sb.Topology, agentName(node))
	return alive
}

// Open returns the running sandbox called name.
func Open(name string) (*Sandbox, error) {
	cfg := Config{Name: name}
	cfg.defaults()
	t, err := layout(cfg)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(t.StateDir, "sandbox.json"))
	if err != nil {
		return nil, fmt.Errorf("sandbox %q is not up (%w)", name, err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	t, err = layout(cfg)
	if err != nil {
		return nil, err
	}
	return &Sandbox{Config: cfg, Topology: t}, nil
}

// Start starts a command in a pod (its network namespace and cgroup, so
// socket-LB applies), as `netcube-lab sandbox exec` does; given a node's name,
// on that node (its namespace, and its host processes' cgroup); given the
// external client's, outside the cluster.
func (sb *Sandbox) Start(pod string, cmd *exec.Cmd) error {
	if h := sb.Topology.External; pod == h.Name { // outside the cluster: no pod cgroup
		cmd.Args = append([]string{"nsenter", "--net=/run/netns/" + h.Netns, "--"}, cmd.Args...)
		cmd.Path, cmd.Err = "/usr/bin/nsenter", nil
		return cmd.Start()
	}
	netns, cg := "", ""
	if p, ok := sb.Topology.Pod(pod); ok {
		netns, cg = p.Netns, p.Cgroup
	}
	for _, n := range sb.Topology.Nodes { // a node's own process
		if n.Name == pod {
			netns, cg = n.Netns, n.HostCgroup
		}
	}
	if netns == "" {
		return fmt.Errorf("no pod or node %q in sandbox %s", pod, sb.Config.Name)
	}
	dir, err := os.Open(cg)
	if err != nil {
		return err
	}
	defer dir.Close() // the child is placed in the cgroup at clone time
	cmd.Args = append([]string{"nsenter", "--net=/run/netns/" + netns, "--"}, cmd.Args...)
	cmd.Path = "/usr/bin/nsenter"
	cmd.Err = nil
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	return cmd.Start()
}

// Output runs a command in a pod and returns its standard output.
func (sb *Sandbox) Output(pod string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := sb.Start(pod, cmd); err != nil {
		return nil, err
	}
	if err := cmd.Wait(); err != nil {
		return []byte(stdout.String()), fmt.Errorf("%s in %s: %w: %s", name, pod, err, strings.TrimSpace(stderr.String()))
	}
	return []byte(stdout.String()), nil
}

// Down removes everything sandbox name created: processes, namespaces (and
// with them every veth and route), pins and cgroups. It works from names
// alone, so it also cleans up after a crash.
func Down(name string, log io.Writer) error {
	cfg := Config{Name: name}
	cfg.defaults()
	t, err := layout(cfg)
	if err != nil {
		return err
	}
	var errs []error
	// Processes: the recorded ones, then anything left in our namespaces.
	if entries, err := os.ReadDir(filepath.Join(t.StateDir, "pids")); err == nil {
		for _, e := range entries {
			_ = stop(t, strings.TrimSuffix(e.Name(), ".pid"), syscall.SIGTERM, 5*time.Second)
		}
	}
	// Everything else the sandbox started is in its cgroup: real nodes'
	// runtimes, shims and containers, in namespaces the sandbox did not
	// name.
	killRealNodes(t)
	namespaces, _ := filepath.Glob("/run/netns/" + name + "-*")
	for _, ns := range namespaces {
		out, _ := exec.Command("ip", "netns", "pids", filepath.Base(ns)).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, ns := range namespaces {
		if err := ip("", "netns", "delete", filepath.Base(ns)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := datapath.Unpin(t.PinRoot); err != nil {
		errs = append(errs, err)
	}
	// The sandboxes' common parent goes with the last of them (os.Remove
	// leaves a directory another sandbox still pins under).
	_ = os.Remove(filepath.Dir(t.PinRoot))
	if root, err := cgroup.Root(); err == nil {
		if err := cgroup.Remove(root, t.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeRealNodes(t); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(t.StateDir); err != nil {
		errs = append(errs, err)
	}
	fmt.Fprintf(log, "sandbox %s: removed %d namespaces, pins under %s, cgroup %s\n",
		name, len(namespaces), t.PinRoot, t.CgroupRoot)
	return errors.Join(errs...)
}

// AgentPID returns the pid of a node's agent, if it is running.
func (sb *Sandbox) AgentPID(node string) (int, bool) { return pidOf(sb.Topology, agentName(node)) }

// AgentLog is the file a node's agent logs to (every start appends).
func (sb *Sandbox) AgentLog(node string) string {
	return filepath.Join(sb.Topology.LogDir(), agentName(node)+".log")
}

// agentHasFlags caches, by agent binary, the flags its usage lists.
var agentHasFlags sync.Map // path -> map[string]bool

// agentHasFlag says whether the agent binary at path knows --flag.
func agentHasFlag(path, flag string) bool {
	if v, ok := agentHasFlags.Load(path); ok {
		return v.(map[string]bool)[flag]
	}
	out, _ := exec.Command(path, "-h").CombinedOutput() // usage, exit 0 or 2
	flags := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "-") {
			flags[strings.TrimLeft(f[0], "-")] = true
		}
	}
	agentHasFlags.Store(path, flags)
	return flags[flag]
}
