package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// sigs.k8s.io/kube-network-policies, SIG Network's reference
// implementation of NetworkPolicy (and, v0.8.0, of AdminNetworkPolicy
// v1alpha1, not ClusterNetworkPolicy v1beta1), run for real beside
// netcube: built from the Go module proxy, unpatched
// (hack/build-kube-network-policies.sh), watching the benchmark's API
// server, on the benchmark's node. It enforces with an nftables
// postrouting chain whose rules send each new connection's packets to
// nfqueue (the `queue` expression) for its verdict in userspace. What it
// did is recorded as it happened: its nftables table, its log, and a probe
// of the kernel's `queue` expression in a network namespace of its own.

// KNPVersion is the version hack/build-kube-network-policies.sh builds.
const KNPVersion = "v0.8.0"

// KNPAttempt is what kube-network-policies did in a benchmark's session.
type KNPAttempt struct {
	Version string `json:"version"`
	Where   string `json:"where"`   // the node and API server it ran against
	Command string `json:"command"` // as run
	// Probe: the kernel's nftables queue expression, tried alone.
	Probe NFTProbe `json:"nft_queue_probe"`
	// Table: `nft list table inet kube-network-policies` in its network
	// namespace while it ran (the output, or the error).
	Table string `json:"nft_table_while_running"`
	// Log: the lines of its log about nftables, nfqueue and errors.
	Log []string `json:"log_excerpt"`
	// Connections: a connection NetworkPolicy denies, tried while it ran
	// (netcube's policy maps empty), and what happened.
	Connections string `json:"denied_connection_tried,omitempty"`
	Enforced    bool   `json:"enforced"`
	// Reason: why no figure of it is reported ("cannot run on this
	// machine: ..."); empty when it enforced.
	Reason string `json:"reason,omitempty"`
	// Err: the attempt itself failed (the benchmark's own fault).
	Err string `json:"error,omitempty"`
}

// NFTProbe is the queue expression tried in a throwaway network
// namespace, beside a rule without it (the control).
type NFTProbe struct {
	Netns string    `json:"netns"`
	Steps []NFTStep `json:"steps"`
	// QueueSupported: the queue rule was accepted.
	QueueSupported bool `json:"queue_supported"`
}

// NFTStep is one command of the probe.
type NFTStep struct {
	Command string `json:"command"`
	OK      bool   `json:"ok"`
	Output  string `json:"output,omitempty"`
}

// probeNFTQueue creates a network namespace, tries a counter rule and the
// queue rule kube-network-policies writes (`queue num 100 bypass`) in a
// chain of its own, and deletes the namespace.
func probeNFTQueue() NFTProbe {
	p := NFTProbe{Netns: fmt.Sprintf("cnpbench-nftprobe-%d", os.Getpid())}
	run := func(args ...string) bool {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		s := NFTStep{Command: strings.Join(args, " "), OK: err == nil, Output: strings.TrimSpace(string(out))}
		if err != nil && s.Output == "" {
			s.Output = err.Error()
		}
		p.Steps = append(p.Steps, s)
		return err == nil
	}
	_ = exec.Command("ip", "netns", "del", p.Netns).Run()
	if !run("ip", "netns", "add", p.Netns) {
		return p
	}
	defer run("ip", "netns", "del", p.Netns)
	in := []string{"ip", "netns", "exec", p.Netns}
	_ = run(append(in, "nft", "add", "table", "inet", "probe")...) &&
		run(append(in, "nft", "add", "chain", "inet", "probe", "postrouting", "{ type filter hook postrouting priority 95 ; }")...) &&
		run(append(in, "nft", "add", "rule", "inet", "probe", "postrouting", "counter")...)
	p.QueueSupported = run(append(in, "nft", "add", "rule", "inet", "probe", "postrouting", "queue", "num", "100", "bypass")...)
	return p
}

// knpRun is one kube-network-policies process in a network namespace,
// with an in-cluster configuration of its own: a ServiceAccount token and
// the API server's CA under /var/run/secrets/kubernetes.io/serviceaccount
// in a private mount namespace (a tmpfs over /run there: the host's is
// untouched), and the API server reached at 127.0.0.1 of that network
// namespace through a relay of this process.
type knpRun struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	log     string
	netns   string
	relay   net.Listener
	command string
}

// knpCommand is what runs: the binary, for NetworkPolicy alone.
func knpArgs(bin, node string) []string {
	return []string{bin, "--hostname-override=" + node, "--disable-nri", "--metrics-bind-address=127.0.0.1:19080", "--v=2"}
}

func startKNP(ctx context.Context, env *kubeenv.Env, dir, bin, netns, node string) (*knpRun, error) {
	token, err := knpToken(ctx, env.Client)
	if err != nil {
		return nil, fmt.Errorf("a token for kube-network-policies: %w", err)
	}
	sa := filepath.Join(dir, "serviceaccount")
	if err := os.MkdirAll(sa, 0o700); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(env.Dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(sa, "token"), []byte(token), 0o600); err != nil {
		return nil, err
	}
	r := &knpRun{log: filepath.Join(dir, "kube-network-policies.log"), netns: netns, exited: make(chan struct{})}
	if err := kubeenv.InNetns(netns, func() error {
		var err error
		r.relay, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		return nil, fmt.Errorf("the API server's relay in %s: %w", netns, err)
	}
	go relay(r.relay, net.JoinHostPort(env.Address, fmt.Sprint(env.Port)))
	_, port, _ := net.SplitHostPort(r.relay.Addr().String())
	script := `mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && ` +
		`cp "$1/token" "$1/ca.crt" /run/secrets/kubernetes.io/serviceaccount/ && shift && exec "$@"`
	args := append([]string{"nsenter", "--net=/run/netns/" + netns, "--", "unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", script, "sh", sa}, knpArgs(bin, node)...)
	r.cmd = exec.Command(args[0], args[1:]...)
	r.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+port)
	r.command = "KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=" + port + " " + strings.Join(knpArgs("kube-network-policies", node), " ") +
		" (in network namespace " + netns + ", a ServiceAccount token bound to cluster-admin)"
	logf, err := os.Create(r.log)
	if err != nil {
		r.relay.Close()
		return nil, err
	}
	defer logf.Close()
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.relay.Close()
		return nil, err
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	return r, nil
}

// stop asks it to end (SIGINT: it removes its table, then waits 5 s),
// kills it after 10 s, and deletes its table if it left one.
func (r *knpRun) stop() {
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	r.relay.Close()
	if _, err := r.table(); err == nil {
		_ = exec.Command("ip", "netns", "exec", r.netns, "nft", "delete", "table", "inet", "kube-network-policies").Run()
	}
}

// table lists its nftables table in its network namespace.
func (r *knpRun) table() (string, error) {
	out, err := exec.Command("ip", "netns", "exec", r.netns, "nft", "list", "table", "inet", "kube-network-policies").CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// excerpt: its log's lines about nftables, nfqueue and errors (at most
// max, duplicates once).
func (r *knpRun) excerpt(max int) []string {
	b, _ := os.ReadFile(r.log)
	return knpLogExcerpt(b, max)
}

func knpLogExcerpt(b []byte, max int) []string {
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	cont := false // inside a klog multi-line value (key=< ... >) of a kept line
	for sc.Scan() && len(out) < max {
		l := sc.Text()
		if cont {
			out = append(out, l)
			cont = strings.TrimSpace(l) != ">"
			continue
		}
		low := strings.ToLower(l)
		if !strings.Contains(low, "nftables") && !strings.Contains(low, "nfqueue") && !strings.Contains(low, "error") && !strings.Contains(low, "fail") {
			continue
		}
		// The klog header (level, time, pid, file) differs line to line.
		key := l
		if i := strings.Index(l, "] "); i >= 0 {
			key = l[i+2:]
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, l)
		cont = strings.HasSuffix(l, "=<")
	}
	return out
}

// relay forwards the listener's connections to target until it is
// closed.
func relay(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			_, _ = io.Copy(c, u)
		}()
	}
}

// knpToken is a token of ServiceAccount kube-system/kube-network-policies,
// bound to cluster-admin (its own chart's ClusterRole reads what this
// reads; the benchmark's API server is its own).
func knpToken(ctx context.Context, c kubernetes.Interface) (string, error) {
	const ns, name = "kube-system", "kube-network-policies"
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	secs := int64(7200)
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// watchKNP lets it start and sync (up to 30 s: its table appears, or its
// log says how the sync went), and fills what it did into a.
func watchKNP(r *knpRun, a *KNPAttempt) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !closed(r.exited) {
		if _, err := r.table(); err == nil {
			break
		}
		b, _ := os.ReadFile(r.log)
		if bytes.Contains(b, []byte("syncing nftables rules")) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // its workers' first syncs, too
	out, err := r.table()
	if err != nil {
		out = fmt.Sprintf("%s (%v)", out, err)
	}
	a.Table = out
	a.Log = r.excerpt(20)
	if closed(r.exited) {
		a.Log = append(a.Log, "(it exited: "+r.cmd.ProcessState.String()+")")
	}
}

// judgeKNP says whether it could enforce, from the probe and its table.
func judgeKNP(a *KNPAttempt, tableErr error) {
	switch {
	case tableErr == nil && a.Probe.QueueSupported:
		a.Enforced = true
	case !a.Probe.QueueSupported:
		var probeOut string
		for _, s := range a.Probe.Steps {
			if strings.Contains(s.Command, " queue ") {
				probeOut = s.Output
			}
		}
		a.Reason = fmt.Sprintf("cannot run on this machine: this kernel has no nftables `queue` expression (CONFIG_NFT_QUEUE is not set): "+
			"`nft add rule ... queue num 100 bypass` fails (%q) where a `counter` rule in the same chain is accepted, and every rule "+
			"kube-network-policies writes to divert new connections ends in that expression, so the kernel refuses its whole nftables "+
			"batch: it never has a table (%s), sees no packet and enforces nothing", probeOut, firstLine(a.Table))
	default:
		a.Reason = "cannot run on this machine: the queue expression works but its table was not programmed: " + firstLine(a.Table)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// tryKNPOnSandbox runs kube-network-policies on the per-packet
// benchmark's node1 (netcube's policy maps empty meanwhile), against an API
// server of its own holding the benchmark's pods and its two
// NetworkPolicies, and tries a connection they deny.
func tryKNPOnSandbox(cfg PolicyConfig, sb *sandbox.Sandbox, ncperf string) *KNPAttempt {
	node := sb.Topology.Nodes[0]
	a := &KNPAttempt{Version: KNPVersion, Probe: probeNFTQueue(),
		Where: fmt.Sprintf("sandbox %s's %s (network namespace %s), against a kube-apiserver holding the benchmark's pods and its 2 NetworkPolicies", sb.Config.Name, node.Name, node.Netns)}
	fmt.Fprintf(cfg.Log, "kube-network-policies %s on %s\n", KNPVersion, node.Name)
	fail := func(err error) *KNPAttempt { a.Err = err.Error(); return a }
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "netcube-bench-knp-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	env, err := kubeenv.Start(kubeenv.Options{Dir: filepath.Join(dir, "api")})
	if err != nil {
		return fail(err)
	}
	defer env.Stop()
	if err := createBenchObjects(ctx, env.Client, sb); err != nil {
		return fail(err)
	}
	r, err := startKNP(ctx, env, dir, filepath.Join(cfg.KubeNetworkPolicies, "kube-network-policies"), node.Netns, node.Name)
	if err != nil {
		return fail(err)
	}
	a.Command = r.command
	defer r.stop()
	watchKNP(r, a)
	_, tableErr := r.table()
	// A connection the NetworkPolicies deny: the servers accept only the
	// client, and this is a server (node2's) to a server (node1's).
	from, to := sb.Topology.Nodes[1].Pods[0], sb.Topology.Nodes[0].Pods[1]
	res, err := ncperfRun(sb, from.Name, ncperf, "crr", to.IP4, 500*time.Millisecond)
	if err != nil {
		a.Connections = fmt.Sprintf("%s -> %s:%d (the NetworkPolicies deny it): %v", from.Name, to.IP4, podnetRRPort, err)
	} else {
		a.Connections = fmt.Sprintf("%s -> %s:%d (the NetworkPolicies deny it): %d connections made in 0.5 s, none refused: nothing enforced it", from.Name, to.IP4, podnetRRPort, res.Ops)
	}
	judgeKNP(a, tableErr)
	if a.Enforced && err == nil {
		a.Enforced = false
		a.Reason = "its table was programmed but a connection the NetworkPolicies deny was made: " + a.Connections
	}
	return a
}

// tryKNPOnAPI runs kube-network-policies against the change-latency
// benchmark's API server as node nodeName, in a network namespace of its
// own (the benchmark's node has no network of its own: its pods are
// addresses in the API), created and deleted here.
func tryKNPOnAPI(env *kubeenv.Env, knpDir, nodeName string, log io.Writer) *KNPAttempt {
	a := &KNPAttempt{Version: KNPVersion, Probe: probeNFTQueue(),
		Where: fmt.Sprintf("the benchmark's kube-apiserver as node %s (its pods and NetworkPolicies as they stand), in a network namespace of its own", nodeName)}
	fmt.Fprintf(log, "kube-network-policies %s as %s\n", KNPVersion, nodeName)
	fail := func(err error) *KNPAttempt { a.Err = err.Error(); return a }
	netns := fmt.Sprintf("cnpbench-knp-%d", os.Getpid())
	_ = exec.Command("ip", "netns", "del", netns).Run()
	if out, err := exec.Command("ip", "netns", "add", netns).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ip netns add %s: %v: %s", netns, err, out))
	}
	defer exec.Command("ip", "netns", "del", netns).Run() //nolint:errcheck
	if out, err := exec.Command("ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("lo up in %s: %v: %s", netns, err, out))
	}
	dir, err := os.MkdirTemp("", "netcube-bench-knp-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	r, err := startKNP(context.Background(), env, dir, filepath.Join(knpDir, "kube-network-policies"), netns, nodeName)
	if err != nil {
		return fail(err)
	}
	a.Command = r.command
	defer r.stop()
	watchKNP(r, a)
	_, tableErr := r.table()
	judgeKNP(a, tableErr)
	if a.Enforced {
		// Not measured: its change latency would need its own probe.
		a.Enforced = false
		a.Reason = "its table was programmed; the benchmark has no probe of its verdicts (userspace, per packet) to time changes against"
	}
	return a
}

// createBenchObjects writes the per-packet benchmark's pods (their nodes
// and addresses as the sandbox has them) and its two NetworkPolicies, as
// benchCluster holds them, into the API server.
func createBenchObjects(ctx context.Context, c kubernetes.Interface, sb *sandbox.Sandbox) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// (No controller manager: the pods' service account is made here.)
	if _, err := c.CoreV1().ServiceAccounts("bench").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, n := range sb.Topology.Nodes {
		if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP4.String()}}}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	add := func(p sandbox.Pod, role string) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "bench", Labels: map[string]string{"role": role}},
			Spec: corev1.PodSpec{NodeName: p.Node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		created, err := c.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.IP4.String(),
			PodIPs: []corev1.PodIP{{IP: p.IP4.String()}, {IP: p.IP6.String()}}}
		_, err = c.CoreV1().Pods("bench").UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	}
	nodes := sb.Topology.Nodes
	if err := errors.Join(add(nodes[0].Pods[0], "client"), add(nodes[0].Pods[1], "server"), add(nodes[1].Pods[0], "server")); err != nil {
		return err
	}
	port := intstr.FromInt32(podnetRRPort)
	tcp := corev1.ProtocolTCP
	ports := []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}
	sel := func(role string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"role": role}}
	}
	client, server := sel("client"), sel("server")
	for _, np := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "servers", Namespace: "bench"}, Spec: networkingv1.NetworkPolicySpec{PodSelector: server,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &client}}, Ports: ports}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "bench"}, Spec: networkingv1.NetworkPolicySpec{PodSelector: client,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &server}}, Ports: ports}}}},
	} {
		if _, err := c.NetworkingV1().NetworkPolicies("bench").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// knpMarkdown renders the attempt.
func knpMarkdown(b *strings.Builder, a *KNPAttempt) {
	if a == nil {
		return
	}
	b.WriteString("## sigs.k8s.io/kube-network-policies, side by side\n\n")
	fmt.Fprintf(b, "SIG Network's reference implementation, %s, built from the Go module proxy unpatched (`hack/build-kube-network-policies.sh`), "+
		"ran in the same session on %s, for NetworkPolicy (%s implements AdminNetworkPolicy v1alpha1, not ClusterNetworkPolicy v1beta1: "+
		"there is no ClusterNetworkPolicy figure of it to have). It enforces by an nftables postrouting chain whose rules send new "+
		"connections to nfqueue (the `queue` expression) for a verdict in userspace.\n\n", a.Version, a.Where, a.Version)
	switch {
	case a.Err != "":
		fmt.Fprintf(b, "**Not measured**: the attempt itself failed: %s\n\n", a.Err)
	case a.Enforced:
		b.WriteString("It enforced.\n\n")
	default:
		fmt.Fprintf(b, "**No figure: it %s.**\n\n", a.Reason)
	}
	if a.Command != "" {
		fmt.Fprintf(b, "Run as `%s`.\n\n", a.Command)
	}
	fmt.Fprintf(b, "The kernel's queue expression, probed in a network namespace the benchmark created and deleted (`%s`):\n\n", a.Probe.Netns)
	b.WriteString("| command | result |\n|---|---|\n")
	for _, s := range a.Probe.Steps {
		res := "ok"
		if !s.OK {
			res = "**failed**: " + strings.Join(strings.Fields(s.Output), " ")
		}
		fmt.Fprintf(b, "| `%s` | %s |\n", strings.ReplaceAll(s.Command, "|", `\|`), strings.ReplaceAll(res, "\n", " "))
	}
	fmt.Fprintf(b, "\nIts table while it ran (`nft list table inet kube-network-policies` in its network namespace): `%s`\n\n", strings.ReplaceAll(firstLine(a.Table), "`", "'"))
	if a.Connections != "" {
		fmt.Fprintf(b, "A connection tried while it ran (netcube's policy maps empty): %s.\n\n", a.Connections)
	}
	if len(a.Log) > 0 {
		b.WriteString("Its log, the lines about nftables, nfqueue and errors:\n\n```\n")
		for _, l := range a.Log {
			b.WriteString(l + "\n")
		}
		b.WriteString("```\n\n")
	}
}
