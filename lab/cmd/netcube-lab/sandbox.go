package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

func sandboxCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: netcube-lab sandbox up|down|status|env|exec|kubectl|restart-agent")
	}
	fs := flag.NewFlagSet("sandbox "+args[0], flag.ExitOnError)
	name := fs.String("name", "nc", "sandbox name (prefix of its namespaces, cgroup and pins)")
	switch args[0] {
	case "up":
		cfg := sandbox.Config{}
		fs.IntVar(&cfg.Nodes, "nodes", 2, "number of nodes")
		fs.IntVar(&cfg.PodsPerNode, "pods", 2, "pods per node")
		fs.BoolVar(&cfg.SocketLB, "socket-lb", true, "socket-level LB (off: per-packet tc path only)")
		fs.StringVar(&cfg.Manifests, "manifests", "", "directory of Service/EndpointSlice YAML (default: the example Services)")
		fs.BoolVar(&cfg.APIServer, "apiserver", false, "run a real kube-apiserver + etcd in the sandbox; agents watch it")
		fs.StringVar(&cfg.Routing, "routing", "native", "how pods reach other nodes' pods: native (routes over the underlay) or vxlan (an overlay)")
		fs.StringVar(&cfg.NodePortMode, "nodeport-mode", "", "the agents' --nodeport-mode: snat, dsr or hybrid (\"\": the agent's default)")
		fs.StringVar(&cfg.NodePortAcceleration, "nodeport-acceleration", "", "the agents' --nodeport-acceleration: none or xdp (\"\": the agent's default)")
		fs.BoolVar(&cfg.Kubelet, "kubelet", false, "real nodes: containerd and kubelet on each, netcube installed by its Helm chart (implies --apiserver, no hand-made pods)")
		fs.BoolVar(&cfg.KeepOnFailure, "keep-on-failure", false, "leave a sandbox that failed to come up as it is, to inspect its logs")
		fs.BoolVar(&cfg.Routed, "routed", false, "a routed datacenter: the nodes in racks (own L2 segment and subnets each) behind a router running BIRD, peering with every node over BGP")
		fs.IntVar(&cfg.Racks, "racks", 0, "with --routed: the number of racks (default 2)")
		fs.StringVar(&cfg.Chart, "chart", "", "with --kubelet: netcube's Helm chart (default: deploy/helm/netcube beside bin/)")
		_ = fs.Parse(args[1:])
		cfg.Name = *name
		if cfg.Racks != 0 && !cfg.Routed {
			return errors.New("--racks needs --routed")
		}
		if cfg.Kubelet {
			if err := realNodeParts(&cfg); err != nil {
				return err
			}
		}
		sb, err := sandbox.Up(cfg, os.Stdout)
		if err != nil {
			return err
		}
		printStatus(sb)
		return nil
	case "down":
		_ = fs.Parse(args[1:])
		return sandbox.Down(*name, os.Stdout)
	case "status":
		_ = fs.Parse(args[1:])
		sb, err := sandbox.Open(*name)
		if err != nil {
			return err
		}
		printStatus(sb)
		return nil
	case "env":
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return errors.New("usage: netcube-lab sandbox env [--name N] NODE (then: eval \"$(netcube-lab sandbox env NODE)\")")
		}
		sb, err := sandbox.Open(*name)
		if err != nil {
			return err
		}
		n, ok := sb.Topology.Node(fs.Arg(0))
		if !ok {
			return fmt.Errorf("sandbox %s has no node %q", *name, fs.Arg(0))
		}
		fmt.Printf("# netcube's verbs and hubble against %s of sandbox %s\n", n.Name, *name)
		for _, kv := range sb.Topology.OperatorEnv(n) {
			fmt.Printf("export %s\n", kv)
		}
		return nil
	case "exec":
		_ = fs.Parse(args[1:])
		rest := fs.Args()
		if i := slices.Index(rest, "--"); i >= 0 {
			rest = slices.Delete(rest, i, i+1)
		}
		if len(rest) < 2 {
			return errors.New("usage: netcube-lab sandbox exec [--name N] POD -- COMMAND [ARGS...]")
		}
		sb, err := sandbox.Open(*name)
		if err != nil {
			return err
		}
		if err := commandExists(rest[1]); err != nil {
			return err
		}
		cmd := exec.Command(rest[1], rest[2:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if n, ok := sb.Topology.Node(rest[0]); ok {
			// On a node: netcube's verbs and hubble find its agent.
			cmd.Env = append(os.Environ(), sb.Topology.OperatorEnv(n)...)
		}
		if err := sb.Start(rest[0], cmd); err != nil {
			return err
		}
		if err := cmd.Wait(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				os.Exit(exit.ExitCode())
			}
			return err
		}
		return nil
	case "kubectl":
		// The API server listens inside the sandbox: run kubectl there.
		_ = fs.Parse(args[1:])
		sb, err := sandbox.Open(*name)
		if err != nil {
			return err
		}
		cmd, err := sb.Kubectl(fs.Args()...)
		if err != nil {
			return err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				os.Exit(exit.ExitCode())
			}
			return err
		}
		return nil
	case "restart-agent":
		crash := fs.Bool("crash", false, "kill the agent with SIGKILL instead of stopping it")
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return errors.New("usage: netcube-lab sandbox restart-agent [--name N] [--crash] NODE")
		}
		sb, err := sandbox.Open(*name)
		if err != nil {
			return err
		}
		if err := sb.StopAgent(fs.Arg(0), *crash); err != nil {
			return err
		}
		return sb.StartAgent(fs.Arg(0))
	}
	return fmt.Errorf("unknown sandbox command %q", args[0])
}

// realNodeParts finds (or builds, the first time) what real nodes run:
// hack/build-e2e.sh's kubelet, scheduler and test images, hack/build-tools.sh's
// control plane and helm, and the chart.
// realNodeFlags are the flags of a command run against a sandbox with
// real nodes (e2e, netpol).
type realNodeFlags struct {
	name, routing                 *string
	reuse, keep, socketLB, routed *bool
	racks                         *int
	nodes                         *int // nil: the sandbox's default (2)
}

func addRealNodeFlags(fs *flag.FlagSet, name string) realNodeFlags {
	return realNodeFlags{
		name:     fs.String("name", name, "sandbox name"),
		reuse:    fs.Bool("reuse", false, "run against the running sandbox --name instead of starting one"),
		keep:     fs.Bool("keep", false, "leave the sandbox up afterwards"),
		routing:  fs.String("routing", "native", "the pod network's routing: native or vxlan"),
		socketLB: fs.Bool("socket-lb", true, "socket-level LB"),
		routed:   fs.Bool("routed", false, "the nodes in racks behind a router running BIRD: pods, LoadBalancer and External IPs reach it by BGP, spread by ECMP"),
		racks:    fs.Int("racks", 0, "with --routed: the number of racks (default 2)"),
	}
}

// realNodeSandbox opens the running sandbox (--reuse), or starts one with
// real nodes; down removes a started one unless --keep.
func (f realNodeFlags) realNodeSandbox() (sb *sandbox.Sandbox, down func(), err error) {
	down = func() {}
	name := *f.name
	if *f.reuse {
		sb, err = sandbox.Open(name)
		return sb, down, err
	}
	cfg := sandbox.Config{Name: name, Kubelet: true, Routing: *f.routing, SocketLB: *f.socketLB, Routed: *f.routed, Racks: *f.racks}
	if f.nodes != nil {
		cfg.Nodes = *f.nodes
	}
	if err := realNodeParts(&cfg); err != nil {
		return nil, down, err
	}
	if sb, err = sandbox.Up(cfg, os.Stdout); err != nil {
		return nil, down, err
	}
	if !*f.keep {
		down = func() { _ = sandbox.Down(name, os.Stdout) }
	}
	return sb, down, nil
}

func realNodeParts(cfg *sandbox.Config) error {
	var err error
	if cfg.E2EDir, err = kubeenv.E2EDir(); err != nil {
		return err
	}
	if cfg.ToolsDir, err = kubeenv.ToolsDir(); err != nil {
		return err
	}
	if cfg.Chart == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Chart = filepath.Join(filepath.Dir(exe), "..", "deploy", "helm", "netcube")
	}
	if _, err := os.Stat(filepath.Join(cfg.Chart, "Chart.yaml")); err != nil {
		return fmt.Errorf("--chart: %w", err)
	}
	return nil
}

func printStatus(sb *sandbox.Sandbox) {
	t := sb.Topology
	if sb.Config.APIServer {
		fmt.Printf("sandbox %s (socket-LB %v, routing %s), kube-apiserver: kubeconfig %s (reachable from the sandbox's namespaces)\n",
			t.Name, sb.Config.SocketLB, sb.Config.Routing, t.Kubeconfig())
	} else {
		fmt.Printf("sandbox %s (socket-LB %v, routing %s), manifests in %s\n", t.Name, sb.Config.SocketLB, sb.Config.Routing, t.ManifestDir())
	}
	if sb.Config.Kubelet {
		for _, n := range t.Nodes {
			state := "containerd and kubelet running"
			if down := sb.NodeDown(n.Name); len(down) > 0 {
				state = "DOWN: " + strings.Join(down, ", ") + " not running"
			}
			fmt.Printf("  %-6s %-15s %-18s %s, pins %s\n", n.Name, n.IP4, n.IP6, state, n.PinDir)
		}
		fmt.Printf("try: netcube-lab sandbox kubectl --name %s get pods -A -o wide\n", t.Name)
		return
	}
	for _, n := range t.Nodes {
		state := "stopped"
		if sb.AgentAlive(n.Name) {
			state = "running"
		}
		fmt.Printf("  %-6s %-15s %-18s agent %s, pins %s\n", n.Name, n.IP4, n.IP6, state, n.PinDir)
		for _, p := range n.Pods {
			fmt.Printf("    pod %-5s %-15s %s\n", p.Name, p.IP4, p.IP6)
		}
	}
	if t.Routed() {
		printRacks(sb)
	}
	fmt.Printf("try: netcube-lab sandbox exec --name %s %s -- netcube-lab pod request --count 5 %s:80\n",
		t.Name, t.ClientPod().Name, sandbox.EchoIPs[0])
	printOperatorCommands(sb)
}

// printOperatorCommands prints the operator's first commands against
// the sandbox's first node, each as it runs from the checkout.
func printOperatorCommands(sb *sandbox.Sandbox) {
	t := sb.Topology
	n := t.Nodes[0]
	fmt.Printf("\noperate %s (netcube-lab sandbox exec NODE sets what netcube and hubble need; for a shell: eval \"$(bin/netcube-lab sandbox env --name %s %s)\"):\n", n.Name, t.Name, n.Name)
	for _, c := range t.OperatorCommands(t.Name, n) {
		fmt.Printf("  # %s\n  %s\n", c.What, c.Line)
	}
}

// commandExists says, before entering the sandbox, that a command given
// by its path is not there, and what builds it (bin/hubble comes from
// make tools, not make demo).
func commandExists(path string) error {
	if !strings.Contains(path, "/") {
		return nil // found on PATH inside, or reported there
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	switch filepath.Base(path) {
	case "hubble":
		return fmt.Errorf("%s does not exist: `make tools` builds the hubble CLI and links it there", path)
	case "netcube", sandbox.LabBinary:
		return fmt.Errorf("%s does not exist: `make build` builds it", path)
	}
	return fmt.Errorf("%s does not exist", path)
}

// printRacks prints a routed sandbox's racks and, from BIRD, each node's
// BGP session with the router.
func printRacks(sb *sandbox.Sandbox) {
	t := sb.Topology
	sessions, err := sb.BGPSessions()
	fmt.Printf("routed: router %s (AS %d, BIRD: birdc -s %s), nodes AS %d\n", t.Router.Netns, sandbox.RouterASN, t.BirdSocket(), sandbox.NodeASN)
	if err != nil {
		fmt.Printf("  BGP sessions: %v\n", err)
	}
	for _, k := range t.Racks {
		fmt.Printf("  rack %s: %s %s, router %s %s\n", k.Name, k.Net4, k.Net6, k.Router4, k.Router6)
		for _, name := range k.Nodes {
			n, _ := t.Node(name)
			state := sessions[name]
			if state == "" {
				state = "unknown"
			}
			fmt.Printf("    %-6s %-15s %-20s BGP %s\n", n.Name, n.IP4, n.IP6, state)
		}
	}
}
