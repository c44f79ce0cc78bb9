package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/internal/cgroup"
	"github.com/netcube/netcube/lab/internal/logs"
	"github.com/netcube/netcube/lab/kubeenv"
)

// Real nodes (Config.Kubelet). Each sandbox node runs containerd and a
// kubelet in the node's network namespace and in a mount namespace of its
// own, in which the paths a node's runtime, kubelet and network provider
// share (/etc/cni/net.d, /opt/cni/bin, /var/lib/kubelet, /run/containerd,
// /var/lib/netcube, /run/netcube, the bpffs and cgroup v2 roots netcube
// uses) are the node's own directories: two kubelets on one machine see
// two machines, and netcube's DaemonSet, whose hostPath volumes the
// runtime resolves in that namespace, writes its CNI config and plugin
// onto the node it runs on. Each node has its hostname too (a UTS
// namespace: host-network pods see the node's name). The mount and UTS
// namespaces are containerd's (the kubelet joins them) and is private to it: it and every mount in it go
// when containerd and its containers exit, so nothing is left mounted on
// the machine.

// nodeRootBase holds the nodes' directories (on disk: image layers and
// container filesystems live there).
const nodeRootBase = "/var/lib/netcube-sandbox"

func (t Topology) nodeRoot(n Node) string { return filepath.Join(nodeRootBase, t.Name, n.Name) }

// kubeletCgroupRoot is the node's kubelet --cgroup-root, in every cgroup
// v1 hierarchy (the pods' cgroups go under it).
func (t Topology) kubeletCgroupRoot(n Node) string { return "/netcube-" + t.Name + "-" + n.Name }

// bind is one path of a node's mount namespace and the node's directory
// shown there.
type bind struct{ path, source string }

func (t Topology) nodeBinds(n Node) ([]bind, error) {
	v2, err := cgroup.Root()
	if err != nil {
		return nil, err
	}
	r := t.nodeRoot(n)
	return []bind{
		{"/etc/cni/net.d", filepath.Join(r, "etc-cni-net.d")},
		{"/opt/cni/bin", filepath.Join(r, "opt-cni-bin")},
		{"/var/lib/cni", filepath.Join(r, "var-lib-cni")},
		{"/var/lib/kubelet", filepath.Join(r, "var-lib-kubelet")},
		{"/var/log/pods", filepath.Join(r, "var-log-pods")},
		{"/var/lib/containerd", filepath.Join(r, "var-lib-containerd")},
		{"/run/containerd", filepath.Join(r, "run-containerd")},
		{"/var/lib/netcube", filepath.Join(r, "var-lib-netcube")},
		{"/run/netcube", filepath.Join(r, "run-netcube")},
		// The runtime's pod network namespaces (cni-<id>): the node's.
		{"/run/netns", filepath.Join(r, "run-netns")},
		// netcube's pins: the node's pin directory, seen by the agent
		// at the chart's bpfRoot (and by `sandbox down` where it always is).
		{"/sys/fs/bpf/netcube", n.PinDir},
		// The cgroup v2 root, as the node sees it, is the node's cgroup:
		// the agent attaches socket-LB there, as on a node of its own.
		{v2, n.Cgroup},
	}, nil
}

// containerdSocket is the node's containerd socket, from outside the node.
func (t Topology) containerdSocket(n Node) string {
	return filepath.Join(t.nodeRoot(n), "run-containerd", "containerd.sock")
}

// containerdConfig: the CRI plugin uses the imported pause image and
// the node's CNI directories (the paths inside the node's mount
// namespace; its opt plugin's directory too, which would otherwise be
// the machine's /opt/containerd). This machine withholds CAP_SYS_RESOURCE even from root, so
// no process may lower its OOM score below containerd's: the runtime is
// told (restrict_oom_score_adj, as for rootless containerd) instead of
// failing every pod whose kubelet-chosen score is negative.
func containerdConfig() string {
	return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + sandboxImage + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
`
}

// kubeletConfig is the node's KubeletConfiguration. This machine mounts
// cgroup v1 (v2 beside it): kubelet refuses v1 unless told, and takes the
// cgroupfs driver (containerd 1.6 does not report its driver; kubelet
// falls back to this setting). Kubelet's API lets anyone in (the API
// server calls it for exec and logs without a client certificate): the
// sandbox's nodes are reachable only inside it. Images are imported, never
// pulled, so image GC is off, and disk eviction thresholds are low: the
// machine's disk is shared.
func (t Topology) kubeletConfig(n Node) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ` + t.kubeletCgroupRoot(n) + `
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: [` + clusterDNS + `]
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
serializeImagePulls: false
resolvConf: /etc/resolv.conf
`
}

// startNode starts a node's containerd (which makes the node's mount
// namespace), imports the images, and starts its kubelet, which registers
// the Node labelled with its zone.
func (sb *Sandbox) startNode(n Node, images []string) error {
	t := sb.Topology
	binds, err := t.nodeBinds(n)
	if err != nil {
		return err
	}
	r := t.nodeRoot(n)
	// Shared, as on a node booted by systemd: kubelet and the runtime
	// propagate mounts into containers (the chart's bpffs volume is
	// HostToContainer). Still a slave of the machine's mounts: nothing
	// made in the node propagates out.
	script := []string{"set -e", "mount --make-rshared /", "hostname " + n.Name}
	for _, b := range binds {
		if err := os.MkdirAll(b.source, 0o755); err != nil {
			return err
		}
		if err := sb.ensureMountPoint(b.path); err != nil {
			return err
		}
		script = append(script, fmt.Sprintf("mount --bind %q %q", b.source, b.path))
	}
	// The standard CNI plugins a node's runtime package brings, before
	// any network provider: loopback (every pod's lo) and portmap (the
	// hostPort plugin netcube's chart chains).
	for _, p := range []string{"loopback", "portmap"} {
		if err := copyFile("/usr/lib/cni/"+p, filepath.Join(r, "opt-cni-bin", p), 0o755); err != nil {
			return fmt.Errorf("node %s: the %s CNI plugin (package containernetworking-plugins, make deps): %w", n.Name, p, err)
		}
	}
	for _, f := range []struct{ name, content string }{
		{"containerd.toml", containerdConfig()},
		{"kubelet.yaml", t.kubeletConfig(n)},
	} {
		if err := os.WriteFile(filepath.Join(r, f.name), []byte(f.content), 0o644); err != nil {
			return err
		}
	}
	if err := createV1Cgroups(t.kubeletCgroupRoot(n)); err != nil {
		return err
	}
	script = append(script, "exec containerd --config "+strconv.Quote(filepath.Join(r, "containerd.toml")))
	name := "containerd-" + n.Name
	if err := spawn(t, name, n.Netns, n.HostCgroup,
		"unshare", "--mount", "--uts", "--propagation", "slave", "--", "/bin/sh", "-c", strings.Join(script, "\n")); err != nil {
		return err
	}
	if err := waitFile(t, t.containerdSocket(n), name, readyTimeout); err != nil {
		return err
	}
	for _, archive := range images {
		out, err := exec.Command("ctr", "--address", t.containerdSocket(n), "--namespace", "k8s.io",
			"images", "import", archive).CombinedOutput()
		if err != nil {
			return fmt.Errorf("node %s: import %s: %v: %s", n.Name, archive, err, out)
		}
	}
	pid, ok := pidOf(t, name)
	if !ok {
		return fmt.Errorf("%s exited; see %s", name, filepath.Join(t.LogDir(), name+".log"))
	}
	kubeconfig := filepath.Join(r, "kubelet.kubeconfig")
	if err := writeNodeKubeconfig(t, n, kubeconfig); err != nil {
		return err
	}
	return spawn(t, "kubelet-"+n.Name, n.Netns, n.HostCgroup,
		"nsenter", "--mount=/proc/"+strconv.Itoa(pid)+"/ns/mnt", "--uts=/proc/"+strconv.Itoa(pid)+"/ns/uts", "--",
		filepath.Join(sb.Config.E2EDir, "kubelet"),
		"--config", filepath.Join(r, "kubelet.yaml"), "--kubeconfig", kubeconfig,
		"--hostname-override", n.Name, "--node-ip", n.IP4.String()+","+n.IP6.String(),
		"--node-labels", t.kubeletNodeLabels(n), "--v", "1")
}

// kubeletNodeLabels are the labels node n's kubelet registers it with:
// its zone, and in a routed sandbox its rack (the NetworkBGPPeerings
// select nodes by it).
func (t Topology) kubeletNodeLabels(n Node) string {
	labels := corev1.LabelTopologyZone + "=" + n.Zone
	if t.Routed() {
		labels += "," + RackLabel + "=" + RackName(n.Rack)
	}
	return labels
}

// createV1Cgroups makes the kubelet's cgroup root in every cgroup v1
// hierarchy (kubelet requires it to exist), with the cpuset parent's CPUs
// and memory nodes (a new cpuset has none).
func createV1Cgroups(root string) error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	for _, procs := range hierarchies {
		h := filepath.Dir(procs)
		if _, err := os.Stat(filepath.Join(h, "cgroup.controllers")); err == nil {
			continue // the v2 hierarchy
		}
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0); err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

// ensureMountPoint creates a directory a node mounts on if the machine
// lacks it, and records it so that `down` removes it again.
func (sb *Sandbox) ensureMountPoint(path string) error {
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(sb.Topology.StateDir, "created-dirs"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range missing { // deepest first: the order to remove them in
		fmt.Fprintln(f, p)
	}
	return nil
}

// removeCreatedDirs removes the empty mount points the sandbox created,
// unless another sandbox with real nodes is up: its nodes mount on them
// (and removing a directory another mount namespace mounts on detaches
// that mount), so they stay, empty.
func removeCreatedDirs(t Topology) {
	b, err := os.ReadFile(filepath.Join(t.StateDir, "created-dirs"))
	if err != nil {
		return
	}
	others, _ := filepath.Glob(filepath.Join(nodeRootBase, "*"))
	for _, o := range others {
		if filepath.Base(o) != t.Name {
			return
		}
	}
	for _, p := range strings.Fields(string(b)) {
		_ = syscall.Rmdir(p) // only if empty: another sandbox may still use it
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// NodeDown lists which of a real node's containerd and kubelet are not
// running.
func (sb *Sandbox) NodeDown(node string) []string {
	n, err := sb.node(node)
	if err != nil {
		return []string{err.Error()}
	}
	return sb.nodeDown(n)
}

func (sb *Sandbox) nodeDown(n Node) []string {
	var down []string
	for _, p := range []string{"containerd-" + n.Name, "kubelet-" + n.Name} {
		if _, alive := pidOf(sb.Topology, p); !alive {
			down = append(down, p)
		}
	}
	return down
}

// logTail is the end of a sandbox process's log.
func (t Topology) logTail(name string, lines int) string {
	return logs.Tail(filepath.Join(t.LogDir(), name+".log"), lines)
}

// writeNodeKubeconfig gives a node's kubelet its identity,
// system:node:<node> (the API server's Node authorizer then limits it to
// its own node's objects).
func writeNodeKubeconfig(t Topology, n Node, file string) error {
	server := "https://" + net.JoinHostPort(apiServerIP4.String(), strconv.Itoa(apiServerPort))
	return kubeenv.WriteUserKubeconfig(t.kubeDir(), server, "system:node:"+n.Name, []string{"system:nodes"}, file)
}

// waitNodesReady waits until every node's kubelet has registered (in its
// zone) and reports Ready (which it does once netcube has put the CNI
// config on it), failing early when a node's containerd or kubelet died.
func (sb *Sandbox) waitNodesReady(c kubernetes.Interface, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		notReady := ""
		for _, n := range sb.Topology.Nodes {
			if down := sb.nodeDown(n); len(down) > 0 {
				return fmt.Errorf("node %s: %s exited; last lines of its log:\n%s", n.Name, down[0], sb.Topology.logTail(down[0], 20))
			}
			node, err := c.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				notReady = n.Name
				continue
			}
			// Zone-aware routing and its upstream tests see zones only here.
			if z := node.Labels[corev1.LabelTopologyZone]; z != n.Zone {
				return fmt.Errorf("node %s registered in zone %q, want %q (kubelet --node-labels)", n.Name, z, n.Zone)
			}
		}
		if notReady == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready after %s (kubelet log: %s)", notReady, timeout, filepath.Join(sb.Topology.LogDir(), "kubelet-"+notReady+".log"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// clusterCIDRs are the pod CIDRs the controller manager allocates from
// (the sandbox's Node objects carry theirs already).
const clusterCIDRs = "10.244.0.0/16,fd00:10:244::/56"

// startRealNodes starts what a cluster runs before its network provider
// (the controllers and scheduler, then containerd and a kubelet per node),
// then installs netcube with its chart and waits for every node to be
// Ready with a ready agent.
func (sb *Sandbox) startRealNodes(env *kubeenv.Env, log io.Writer) error {
	t, cfg := sb.Topology, sb.Config
	for _, d := range []struct{ dir, what string }{{cfg.E2EDir, "E2EDir (hack/build-e2e.sh)"}, {cfg.ToolsDir, "ToolsDir (hack/build-tools.sh)"}, {cfg.Chart, "Chart (deploy/helm/netcube)"}} {
		if d.dir == "" {
			return fmt.Errorf("real nodes need %s", d.what)
		}
	}
	// The underlay routes pod CIDRs (the API server reaches pods: proxy,
	// port-forward); a routed sandbox's router learns them by BGP.
	if cfg.routing() == "native" && !t.Routed() {
		for _, n := range t.Nodes {
			if err := steps(
				func() error { return ip(t.Underlay, "route", "replace", n.PodNet.String(), "via", n.IP4.String()) },
				func() error {
					return ip(t.Underlay, "-6", "route", "replace", n.PodNet6.String(), "via", n.IP6.String())
				},
			); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(log, "  kube-controller-manager and kube-scheduler\n")
	if err := env.StartClusterControllers(clusterCIDRs, filepath.Join(cfg.E2EDir, "kube-scheduler")); err != nil {
		return err
	}
	fmt.Fprintf(log, "  images (built here, imported into every node's containerd)\n")
	archives, err := sb.buildImages(log)
	if err != nil {
		return err
	}
	for _, n := range t.Nodes {
		fmt.Fprintf(log, "  node %s: containerd and kubelet\n", n.Name)
		if err := sb.startNode(n, archives); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	v2, err := cgroup.Root()
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "  netcube: helm install %s (its DaemonSet's pods started by kubelet)\n", cfg.Chart)
	if err := sb.installNetcube(v2); err != nil {
		return err
	}
	fmt.Fprintf(log, "  LoadBalancer IPs: NetworkLoadBalancerPool %s %v\n", DefaultLBPool, DefaultLBPoolCIDRs)
	if err := createLBPool(env.Config); err != nil {
		return err
	}
	if t.Routed() {
		fmt.Fprintf(log, "  BGP: a NetworkBGPPeering per rack, every node peering with the router (BIRD, AS %d)\n", RouterASN)
		if err := createBGPPeerings(env.Config, t); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "  waiting for the nodes to be Ready\n")
	if err := sb.waitNodesReady(env.Client, 3*time.Minute); err != nil {
		return err
	}
	if err := waitAgentsReady(env.Client, len(t.Nodes), 3*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(log, "  cluster DNS: CoreDNS behind kube-dns %s\n", clusterDNS)
	return sb.installDNS(env.Client, 2*time.Minute)
}

// killRealNodes kills every process in the sandbox's cgroup v2 tree (real
// nodes' containerd, kubelet, shims and containers, whose namespaces the
// sandbox did not name) and in its nodes' cgroup v1 roots, and waits for
// them to go.
func killRealNodes(t Topology) {
	_ = os.WriteFile(filepath.Join(t.CgroupRoot, "cgroup.kill"), []byte("1"), 0)
	v1, _ := filepath.Glob("/sys/fs/cgroup/*/netcube-" + t.Name + "-*")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left := 0
		for _, root := range append(v1, t.CgroupRoot) {
			for _, pid := range cgroup.Procs(root) {
				if ProcessAlive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					left++
				}
			}
		}
		if left == 0 {
			return
		}
	}
}

// removeRealNodes removes the nodes' cgroup v1 roots, directories and the
// mount points the sandbox created (their mounts went with the nodes'
// mount namespaces).
func removeRealNodes(t Topology) error {
	var errs []error
	v1, _ := filepath.Glob("/sys/fs/cgroup/*/netcube-" + t.Name + "-*")
	for _, d := range v1 {
		if err := cgroup.Remove(filepath.Dir(d), d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(nodeRootBase, t.Name)); err != nil {
		errs = append(errs, err)
	}
	_ = syscall.Rmdir(nodeRootBase)
	removeCreatedDirs(t)
	return errors.Join(errs...)
}

// KillNodeComponent kills a real node's "containerd" or "kubelet" with
// SIGKILL, as a crash: its containers keep running (their shims outlive
// containerd), status reports the node down, and down still removes all.
func (sb *Sandbox) KillNodeComponent(node, component string) error {
	if component != "containerd" && component != "kubelet" {
		return fmt.Errorf("no node component %q (containerd or kubelet)", component)
	}
	n, err := sb.node(node)
	if err != nil {
		return err
	}
	return stop(sb.Topology, component+"-"+n.Name, syscall.SIGKILL, 5*time.Second)
}
