package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/netcube/netcube/pkg/sandbox"
)

func sandboxCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: netcube sandbox up|down|status|exec|restart-agent")
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
		_ = fs.Parse(args[1:])
		cfg.Name = *name
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
	case "exec":
		_ = fs.Parse(args[1:])
		rest := fs.Args()
		if i := slices.Index(rest, "--"); i >= 0 {
			rest = slices.Delete(rest, i, i+1)
		}
		if len(rest) < 2 {
			return errors.New("usage: netcube sandbox exec [--name N] POD -- COMMAND [ARGS...]")
		}
		sb, err := sandbox.Open(*name)
		if err != nil {
			return err
		}
		cmd := exec.Command(rest[1], rest[2:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
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
	case "restart-agent":
		crash := fs.Bool("crash", false, "kill the agent with SIGKILL instead of stopping it")
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return errors.New("usage: netcube sandbox restart-agent [--name N] [--crash] NODE")
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

func printStatus(sb *sandbox.Sandbox) {
	t := sb.Topology
	if sb.Config.APIServer {
		fmt.Printf("sandbox %s (socket-LB %v, routing %s), kube-apiserver: kubeconfig %s (reachable from the sandbox's namespaces)\n",
			t.Name, sb.Config.SocketLB, sb.Config.Routing, t.Kubeconfig())
	} else {
		fmt.Printf("sandbox %s (socket-LB %v, routing %s), manifests in %s\n", t.Name, sb.Config.SocketLB, sb.Config.Routing, t.ManifestDir())
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
	fmt.Printf("try: netcube sandbox exec --name %s %s -- netcube pod request --count 5 %s:80\n",
		t.Name, t.ClientPod().Name, sandbox.EchoIPs[0])
}
