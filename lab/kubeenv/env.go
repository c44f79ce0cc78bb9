package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"github.com/netcube/netcube/lab/internal/logs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options say where the control plane runs.
type Options struct {
	ToolsDir string // holds kube-apiserver and etcd (ToolsDir() finds it)
	Dir      string // state: certificates, etcd data, logs, kubeconfig
	// Netns, if set, is a network namespace (name under /run/netns) to run
	// in; Address is then an address of that namespace to serve on.
	Netns   string
	Address string // default 127.0.0.1
	Port    int    // API server port; 0 = pick a free one
	// ServiceCIDRs for ClusterIP allocation.
	ServiceCIDRs string
	// Detach leaves etcd and the API server running when this process
	// exits (the sandbox CLI); Stop, or killing the namespace's processes,
	// ends them.
	Detach bool
	// Profiling serves the API server's /debug/pprof (a benchmark's
	// profile of it).
	Profiling bool
}

// Env is a running control plane.
type Env struct {
	Options
	URL        string
	EtcdURL    string // set when this process started the control plane
	Kubeconfig string // admin kubeconfig file
	Config     *rest.Config
	Client     kubernetes.Interface
	etcd, api  *exec.Cmd
	apiArgs    []string // to start the API server again
}

// Start starts etcd and kube-apiserver and waits until the API server is
// ready. Stop them with Stop, also on failure paths.
func Start(opts Options) (env *Env, err error) {
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	if opts.ServiceCIDRs == "" {
		opts.ServiceCIDRs = "10.96.0.0/16,fd00:10:96::/112"
	}
	if opts.ToolsDir == "" {
		if opts.ToolsDir, err = ToolsDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	ip := net.ParseIP(opts.Address)
	if err := writeCerts(opts.Dir, ip); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	env = &Env{Options: opts}
	defer func() {
		if err != nil {
			env.Stop()
		}
	}()

	ports, err := env.freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	env.EtcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if opts.Port == 0 {
		opts.Port = ports[2]
		env.Port = opts.Port
	}
	env.etcd, err = env.spawn("etcd", filepath.Join(opts.ToolsDir, "etcd"),
		"--name", "netcube", "--data-dir", filepath.Join(opts.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "netcube="+peerURL, "--log-level", "warn",
		"--unsafe-no-fsync", "--quota-backend-bytes", strconv.Itoa(4<<30))
	if err != nil {
		return nil, err
	}
	d := opts.Dir
	env.apiArgs = []string{"--etcd-servers", etcdURL,
		"--bind-address", opts.Address, "--advertise-address", opts.Address, "--secure-port", strconv.Itoa(opts.Port),
		"--tls-cert-file", filepath.Join(d, "apiserver.crt"), "--tls-private-key-file", filepath.Join(d, "apiserver.key"),
		"--client-ca-file", filepath.Join(d, "ca.crt"),
		"--service-account-key-file", filepath.Join(d, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(d, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", opts.ServiceCIDRs,
		"--authorization-mode", "Node,RBAC",
		"--enable-priority-and-fairness=false", // a benchmark's bulk writes are not to be throttled
		"--max-requests-inflight", "2000", "--max-mutating-requests-inflight", "1000",
		// Nodes are reached at their addresses (exec, logs): their names
		// resolve nowhere.
		"--kubelet-preferred-address-types", "InternalIP",
		// Privileged pods, as clusters allow (netcube's agent is not one,
		// but tests of the node's kernel state are).
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(opts.Profiling), "--cert-dir", d}
	if env.api, err = env.spawn("kube-apiserver", filepath.Join(opts.ToolsDir, "kube-apiserver"), env.apiArgs...); err != nil {
		return nil, err
	}
	env.URL = "https://" + net.JoinHostPort(opts.Address, strconv.Itoa(opts.Port))
	if err := env.writeKubeconfig(); err != nil {
		return nil, err
	}
	if env.Config, err = clientcmd.BuildConfigFromFlags("", env.Kubeconfig); err != nil {
		return nil, err
	}
	env.Config.QPS, env.Config.Burst = 5000, 10000
	if opts.Netns != "" {
		env.Config.Dial = NetnsDialer(opts.Netns)
	}
	if env.Client, err = kubernetes.NewForConfig(env.Config); err != nil {
		return nil, err
	}
	return env, env.waitReady(90 * time.Second)
}

// spawn starts a control-plane process (in the namespace, if any), logging
// to <Dir>/<name>.log.
func (e *Env) spawn(name, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(e.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	if e.Netns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + e.Netns, "--", bin}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if e.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	// A process that connects later (Connect) finds it by this file.
	if err := os.WriteFile(e.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		stopProcess(cmd)
		return nil, err
	}
	return cmd, nil
}

func (e *Env) pidFile(name string) string { return filepath.Join(e.Dir, name+".pid") }

// pidFromFile is the pid a spawn recorded for name, if that process still
// runs under that name (0: none).
func (e *Env) pidFromFile(name string) int {
	b, err := os.ReadFile(e.pidFile(name))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != name {
		return 0
	}
	return pid
}

func (e *Env) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["netcube"] = &clientcmdapi.Cluster{Server: e.URL, CertificateAuthority: filepath.Join(e.Dir, "ca.crt")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificate: filepath.Join(e.Dir, "admin.crt"), ClientKey: filepath.Join(e.Dir, "admin.key"),
	}
	cfg.Contexts["netcube"] = &clientcmdapi.Context{Cluster: "netcube", AuthInfo: "admin"}
	cfg.CurrentContext = "netcube"
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*cfg, e.Kubeconfig)
}

func (e *Env) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if processGone(e.api) {
			break
		}
		body, err := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			// The default namespace, then the API server's own Service
			// in it, are created by bootstrap controllers shortly after
			// /readyz; clusters have both.
			if _, err = e.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1GetOptions); err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready (%v); last lines of %s:\n%s", last,
		filepath.Join(e.Dir, "kube-apiserver.log"), logs.Tail(filepath.Join(e.Dir, "kube-apiserver.log"), 20))
}

// APIServerPID is the running kube-apiserver's process (0: none), for
// benchmarks that read its CPU time; for an Env from Connect, the one
// its starter recorded.
func (e *Env) APIServerPID() int {
	if e.api == nil || e.api.Process == nil {
		return e.pidFromFile("kube-apiserver")
	}
	return e.api.Process.Pid
}

// EtcdPID is the running etcd's process (0: none), for benchmarks that
// keep it off the CPUs they measure on; for an Env from Connect, the one
// its starter recorded.
func (e *Env) EtcdPID() int {
	if e.etcd == nil || e.etcd.Process == nil {
		return e.pidFromFile("etcd")
	}
	return e.etcd.Process.Pid
}

// processGone: the process has exited (and been reaped by spawn's Wait).
func processGone(c *exec.Cmd) bool {
	return c.Process == nil || syscall.Kill(c.Process.Pid, 0) != nil
}

// Connect returns a client for a control plane started earlier (by another
// process), from its state directory.
func Connect(dir, netns string) (*Env, error) {
	e := &Env{Options: Options{Dir: dir, Netns: netns}, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	var err error
	if e.Config, err = clientcmd.BuildConfigFromFlags("", e.Kubeconfig); err != nil {
		return nil, err
	}
	e.URL = e.Config.Host
	e.Config.QPS, e.Config.Burst = 5000, 10000
	if netns != "" {
		e.Config.Dial = NetnsDialer(netns)
	}
	e.Client, err = kubernetes.NewForConfig(e.Config)
	return e, err
}

// Stop stops the API server and etcd.
func (e *Env) Stop() {
	for _, c := range []*exec.Cmd{e.api, e.etcd} {
		stopProcess(c)
	}
}

func stopProcess(c *exec.Cmd) {
	if c == nil || c.Process == nil {
		return
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(c) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}

// RestartAPIServer stops the API server (every watch on it ends), runs
// while (e.g. writes straight to etcd, a compaction), starts it again and
// waits until it is ready, whether or not while failed.
func (e *Env) RestartAPIServer(while func() error) error {
	if e.apiArgs == nil {
		return errors.New("RestartAPIServer needs a control plane started by this process")
	}
	stopProcess(e.api)
	// The server comes back even when while fails: the tests after this
	// one share it.
	whileErr := while()
	var err error
	if e.api, err = e.spawn("kube-apiserver", filepath.Join(e.ToolsDir, "kube-apiserver"), e.apiArgs...); err != nil {
		return errors.Join(whileErr, err)
	}
	return errors.Join(whileErr, e.waitReady(90*time.Second))
}

// freePorts finds n free TCP ports where the control plane will listen.
func (e *Env) freePorts(n int) ([]int, error) {
	var ports []int
	err := InNetns(e.Netns, func() error {
		var ls []net.Listener
		defer func() {
			for _, l := range ls {
				l.Close()
			}
		}()
		for range n {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			ls = append(ls, l)
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		}
		return nil
	})
	return ports, err
}

// ToolsDir builds (or finds cached) kube-apiserver and etcd and returns
// their directory. NETCUBE_TOOLS_DIR overrides it.
func ToolsDir() (string, error) { return CachedBuild("NETCUBE_TOOLS_DIR", "build-tools.sh") }

// E2EDir finds (building once) what real nodes and the upstream e2e suite
// need: kubelet, kube-scheduler, agnhost, e2e.test and ginkgo
// (hack/build-e2e.sh, cached; NETCUBE_E2E_DIR names the directory
// instead).
func E2EDir() (string, error) { return CachedBuild("NETCUBE_E2E_DIR", "build-e2e.sh") }

// CachedBuild runs a build script of hack/ (which builds into a cache, or
// finds it there, and prints the directory on its last line) and returns
// that directory; envVar, when set, names it instead.
func CachedBuild(envVar, script string) (string, error) {
	if d := os.Getenv(envVar); d != "" {
		return d, nil
	}
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "hack", script)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("set %s to hack/%s's output", envVar, script)
	}
	cmd := exec.Command("bash", path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/%s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// StartControllerManager runs kube-controller-manager with only its node
// IPAM controller: it gives each Node without pod CIDRs one of each
// family from clusterCIDRs (comma-separated, IPv4 first), /24 and /64, as
// a cluster's `--allocate-node-cidrs` does. It ends with the control plane
// (Stop, or the namespace's processes killed).
func (e *Env) StartControllerManager(clusterCIDRs string) error {
	return e.startControllerManager(clusterCIDRs, "nodeipam")
}

// StartClusterControllers runs what a cluster runs beside its API server
// before any node joins: kube-controller-manager with its default
// controllers (service accounts and their tokens, the root CA ConfigMap,
// EndpointSlices, Deployments and DaemonSets, garbage collection, node
// lifecycle and IPAM, ...), each with its own service account, and
// kube-scheduler (schedulerBin, built by hack/build-e2e.sh).
func (e *Env) StartClusterControllers(clusterCIDRs, schedulerBin string) error {
	if _, err := os.Stat(schedulerBin); err != nil {
		return fmt.Errorf("kube-scheduler: %w (hack/build-e2e.sh builds it)", err)
	}
	if err := e.startControllerManager(clusterCIDRs, "*",
		"--use-service-account-credentials=true",
		"--root-ca-file", filepath.Join(e.Dir, "ca.crt"),
		"--service-account-private-key-file", filepath.Join(e.Dir, "sa.key"),
		"--cluster-signing-cert-file", filepath.Join(e.Dir, "ca.crt"),
		"--cluster-signing-key-file", filepath.Join(e.Dir, "ca.key"),
	); err != nil {
		return err
	}
	_, err := e.spawn("kube-scheduler", schedulerBin,
		"--kubeconfig", e.Kubeconfig, "--leader-elect=false", "--secure-port", "0")
	return err
}

func (e *Env) startControllerManager(clusterCIDRs, controllers string, extra ...string) error {
	bin := filepath.Join(e.ToolsDir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-controller-manager: %w (hack/build-tools.sh builds it)", err)
	}
	args := []string{"--kubeconfig", e.Kubeconfig, "--controllers", controllers, "--leader-elect=false",
		"--allocate-node-cidrs=true", "--cluster-cidr", clusterCIDRs,
		"--node-cidr-mask-size-ipv4", "24", "--node-cidr-mask-size-ipv6", "64",
		"--service-cluster-ip-range", e.ServiceCIDRs, "--secure-port", "0"}
	if len(extra) == 0 {
		extra = []string{"--use-service-account-credentials=false"}
	}
	_, err := e.spawn("kube-controller-manager", bin, append(args, extra...)...)
	return err
}
