package sandbox

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/lab/images"
	"github.com/netcube/netcube/lab/kubeenv"
)

// sandboxImage is what containerd runs as every pod's sandbox (imported,
// never pulled); the suite's own pause tags are aliases of the same image.
const sandboxImage = images.PauseRef

// buildImages writes the image archives the real nodes import: netcube's
// agent (static builds in BinDir/static: make images), pause, and the
// suite's test images under the names e2e.test lists.
func (sb *Sandbox) buildImages(log io.Writer) ([]string, error) {
	dir := filepath.Join(sb.Topology.StateDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	static := filepath.Join(sb.Config.BinDir, "static")
	if _, err := os.Stat(filepath.Join(static, "netcube-agent")); err != nil {
		return nil, fmt.Errorf("the agent image needs static builds in %s: run `make images`", static)
	}
	list, err := kubeenv.SuiteImages(sb.Config.E2EDir)
	if err != nil {
		return nil, err
	}
	refs := images.RefsByRepository(list)
	pause, err := images.Pause(dir)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs["registry.k8s.io/pause"] {
		if ref != pause.Ref {
			pause.Aliases = append(pause.Aliases, ref)
		}
	}
	// The ClusterNetworkPolicy suite's pods (netcube-lab cnp) name an
	// agnhost of their own.
	agnhostRefs := append(refs["registry.k8s.io/e2e-test-images/agnhost"], images.CNPSuiteAgnhostRef)
	agnhost, err := images.Agnhost(filepath.Join(sb.Config.E2EDir, "agnhost"), agnhostRefs)
	if err != nil {
		return nil, err
	}
	busybox, err := images.BusyBox(refs["registry.k8s.io/e2e-test-images/busybox"])
	if err != nil {
		return nil, err
	}
	var archives []string
	glibc, err := images.GlibcDNSTesting(refs["registry.k8s.io/e2e-test-images/glibc-dns-testing"])
	if err != nil {
		return nil, err
	}
	boom, err := images.RegressionIssue74839(filepath.Join(sb.Config.E2EDir, "regression-issue-74839"),
		refs["registry.k8s.io/e2e-test-images/regression-issue-74839"])
	if err != nil {
		return nil, err
	}
	coredns := images.CoreDNS(filepath.Join(sb.Config.E2EDir, "coredns"))
	specs := []images.Spec{images.Agent(static), pause, agnhost, busybox, glibc, boom, coredns}
	// cyclonus's probing pods (netcube-lab netpol), when make images built its
	// worker.
	if worker := filepath.Join(static, "cyclonus-worker"); fileExists(worker) {
		spec, err := images.CyclonusWorker(agnhost, worker)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	for _, spec := range specs {
		img, err := images.Build(spec)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(spec.Ref)+".tar")
		if err := images.WriteArchive(file, img, spec.Refs()...); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "    image %s\n", strings.Join(spec.Refs(), ", "))
		archives = append(archives, file)
	}
	return archives, nil
}

// chartValues are the sandbox's settings of netcube's Helm chart: what a
// user sets for a cluster like it. The image is imported (never pulled);
// the API server is reached at its address, not through the Service
// netcube itself programs; the nodes' uplink is eth0 (they have no default
// route); socket-LB attaches at the cgroup v2 root the node sees.
func (sb *Sandbox) chartValues(cgroupRoot string) []string {
	values := []string{
		"image.pullPolicy=Never",
		"apiServer.host=" + apiServerIP4.String(),
		fmt.Sprintf("apiServer.port=%d", apiServerPort),
		"config.nodeInterfaces={eth0}",
		"config.cgroup=" + cgroupRoot,
		"config.routing=" + sb.Config.routing(),
		fmt.Sprintf("config.socketLB=%v", sb.Config.SocketLB),
	}
	if a := sb.Config.NodePortAcceleration; a != "" {
		values = append(values, "config.nodePortAcceleration="+a)
	}
	if m := sb.Config.NodePortMode; m != "" {
		values = append(values, "config.nodePortMode="+m)
	}
	return values
}

// installNetcube installs netcube as a user does: `helm install` of the
// chart against the sandbox's API server (from the underlay, where it
// listens). Kubelet then starts the DaemonSet's pods on every node.
func (sb *Sandbox) installNetcube(cgroupRoot string) error {
	t := sb.Topology
	helm := filepath.Join(sb.Config.ToolsDir, "helm")
	args := []string{"--net=/run/netns/" + t.Underlay, "--", helm, "upgrade", "--install", "netcube", sb.Config.Chart,
		"--kubeconfig", t.Kubeconfig(), "--namespace", "kube-system"}
	for _, v := range sb.chartValues(cgroupRoot) {
		args = append(args, "--set", v)
	}
	cmd := exec.Command("nsenter", args...)
	home := filepath.Join(t.StateDir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm install %s: %v: %s", sb.Config.Chart, err, bytes.TrimSpace(out))
	}
	return nil
}

// waitAgentsReady waits until the agent DaemonSet has a ready pod on
// every node.
func waitAgentsReady(c kubernetes.Interface, nodes int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var ds *appsv1.DaemonSet
	var err error
	for time.Now().Before(deadline) {
		ds, err = c.AppsV1().DaemonSets("kube-system").Get(context.Background(), "netcube-agent", metav1.GetOptions{})
		if err == nil && int(ds.Status.NumberReady) == nodes && ds.Status.UpdatedNumberScheduled == ds.Status.DesiredNumberScheduled {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("netcube-agent DaemonSet: %w", err)
	}
	return fmt.Errorf("netcube-agent DaemonSet: %d of %d nodes ready after %s", ds.Status.NumberReady, nodes, timeout)
}

// Kubectl is a kubectl command against the sandbox's API server, run
// where it listens (the underlay namespace); kubectl is hack/build-e2e.sh's.
func (sb *Sandbox) Kubectl(args ...string) (*exec.Cmd, error) {
	if !sb.Config.Kubelet {
		return nil, fmt.Errorf("sandbox %s has no real nodes (up --kubelet)", sb.Config.Name)
	}
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + sb.Topology.Underlay, "--",
		filepath.Join(sb.Config.E2EDir, "kubectl"), "--kubeconfig", sb.Topology.Kubeconfig()}, args...)...), nil
}

// clusterDNS is the kube-dns Service's address, in every pod's
// resolv.conf (the Service CIDR's tenth, as kubeadm picks it).
const clusterDNS = "10.96.0.10"

//go:embed addons/coredns.yaml
var corednsYAML string

// installDNS applies the cluster DNS (CoreDNS) and waits until it
// answers: it reaches the API server through the `kubernetes` Service,
// so it is ready only once netcube serves that.
func (sb *Sandbox) installDNS(c kubernetes.Interface, timeout time.Duration) error {
	manifest := strings.NewReplacer("COREDNS_IMAGE", images.CoreDNSRef, "CLUSTER_DNS", clusterDNS).Replace(corednsYAML)
	cmd, err := sb.Kubectl("apply", "-f", "-")
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply (CoreDNS): %v: %s", err, bytes.TrimSpace(out))
	}
	deadline := time.Now().Add(timeout)
	for {
		d, err := c.AppsV1().Deployments("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CoreDNS not ready after %s (kubectl -n kube-system describe pod -l k8s-app=kube-dns)", timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
