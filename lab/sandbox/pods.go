package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netcube/netcube/pkg/cni"
)

// Pods are wired as a container runtime wires them: a network namespace,
// then CNI ADD through libcni (the library containerd and CRI-O use) with
// the conflist the node's agent installed, running the plugin on the node.

// CNI directories of a node (the sandbox's stand-ins for /etc/cni/net.d,
// the runtime's result cache, /var/lib/netcube/ipam, /run/netcube).
func (t Topology) cniConfDir(n Node) string  { return filepath.Join(t.StateDir, n.Name, "net.d") }
func (t Topology) cniCacheDir(n Node) string { return filepath.Join(t.StateDir, n.Name, "cni-cache") }
func (t Topology) ipamDir(n Node) string     { return filepath.Join(t.StateDir, n.Name, "ipam") }
func (t Topology) cniSocket(n Node) string   { return filepath.Join(t.StateDir, n.Name, "cni.sock") }

// APISocket is where node n's agent serves its local API (netcube monitor).
func (t Topology) APISocket(n Node) string { return filepath.Join(t.StateDir, n.Name, "agent.sock") }

// HubbleSocket is where node n's agent serves the Hubble Observer API.
func (t Topology) HubbleSocket(n Node) string {
	return filepath.Join(t.StateDir, n.Name, "hubble.sock")
}

// containerID is the pod's id in CNI calls (its namespace is unique).
func containerID(p Pod) string { return p.Netns }

// addPod creates the pod's namespace and runs CNI ADD for it, checking
// that it got the addresses the topology expects (IPAM hands them out in
// order on a fresh node); it returns how long ADD took.
func (t Topology) addPod(n Node, p Pod, binDir, network string) (time.Duration, error) {
	if err := steps(
		func() error { return ip("", "netns", "add", p.Netns) },
		func() error {
			return sysctl(p.Netns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		},
	); err != nil {
		return 0, err
	}
	start := time.Now()
	res, err := t.cni(n, binDir, network, func(ctx context.Context, c *libcni.CNIConfig, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
		return c.AddNetworkList(ctx, l, rt)
	}, p)
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("CNI ADD: %w", err)
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return took, err
	}
	var got []netip.Addr
	for _, ipc := range r.IPs {
		a, _ := netip.AddrFromSlice(ipc.Address.IP)
		got = append(got, a.Unmap())
	}
	if want := []netip.Addr{p.IP4, p.IP6}; p.IP4.IsValid() && !slices.Equal(got, want) {
		return took, fmt.Errorf("CNI ADD gave %v, the topology expects %v (is %s's IPAM state fresh?)", got, want, n.Name)
	}
	if p.HostIf != "" && r.Interfaces[0].Name != p.HostIf {
		return took, fmt.Errorf("CNI ADD made host veth %s, expected %s", r.Interfaces[0].Name, p.HostIf)
	}
	return took, nil
}

// delPod runs CNI DEL for the pod (its namespace stays).
func (t Topology) delPod(n Node, p Pod, binDir, network string) error {
	_, err := t.cni(n, binDir, network, func(ctx context.Context, c *libcni.CNIConfig, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
		return nil, c.DelNetworkList(ctx, l, rt)
	}, p)
	return err
}

func (t Topology) cni(n Node, binDir, network string, op func(context.Context, *libcni.CNIConfig, *libcni.NetworkConfigList, *libcni.RuntimeConf) (types.Result, error), p Pod) (types.Result, error) {
	list, err := libcni.LoadNetworkConf(t.cniConfDir(n), network)
	if err != nil {
		return nil, err
	}
	c := libcni.NewCNIConfigWithCacheDir([]string{binDir}, t.cniCacheDir(n), nodeExec{netns: n.Netns})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The pod's name, as kubelet's runtime gives it: an agent enforcing
	// NetworkPolicy writes the pod's policy before it answers ADD.
	return op(ctx, c, list, &libcni.RuntimeConf{ContainerID: containerID(p), NetNS: "/run/netns/" + p.Netns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", p.Name}}})
}

// waitConfList waits for the node's agent to install the conflist (it
// does once it has read the node's pod CIDRs).
func (t Topology) waitConfList(n Node, timeout time.Duration) error {
	path := filepath.Join(t.cniConfDir(n), cni.ConfListFile)
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent on %s installed no CNI config (%s) within %s", n.Name, path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeExec runs CNI plugins in a node's network namespace, as the runtime
// on that node would (libcni's own exec runs them where it runs). The
// plugin is forked from a thread switched into the node's namespace, so
// it starts there, as a runtime's child does on a real node: no nsenter
// process in between, whose own start (about 3 ms on the 2-CPU VM) a real
// pod does not pay and the lab's CNI ADD timings would.
type nodeExec struct{ netns string }

func (e nodeExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, pluginPath)
	c.Env, c.Stdin, c.Stdout, c.Stderr = environ, bytes.NewReader(stdin), &stdout, &stderr
	err := inNetns(e.netns, c.Start)
	if err == nil {
		err = c.Wait()
	}
	if err != nil {
		msg := &types.Error{}
		if jerr := json.Unmarshal(stdout.Bytes(), msg); jerr != nil || msg.Msg == "" {
			msg = &types.Error{Msg: fmt.Sprintf("%s failed: %v: %s", filepath.Base(pluginPath), err, bytes.TrimSpace(stderr.Bytes()))}
		}
		return nil, msg
	}
	return stdout.Bytes(), nil
}

func (e nodeExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

func (e nodeExec) Decode(b []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(b)
}

// podMAC reads a pod's interface MAC (the plugin chose it).
func podMAC(p Pod) (string, error) {
	out, err := exec.Command("ip", "-n", p.Netns, "-j", "link", "show", "eth0").Output()
	if err != nil {
		return "", fmt.Errorf("pod %s: %w", p.Name, err)
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return "", fmt.Errorf("pod %s: eth0: %s", p.Name, out)
	}
	if _, err := net.ParseMAC(links[0].Address); err != nil {
		return "", err
	}
	return links[0].Address, nil
}

// TimePodStartups wires count extra pods on a node one after another, as a
// runtime starting pods does, and returns how long each CNI ADD took; each
// is deleted (CNI DEL, namespace, Pod object) before the next. With
// netcube's pod network each pod has its Pod object first (the agent
// refuses ADD for a pod it does not know), and its ADD is timed once the
// agent has it.
func (sb *Sandbox) TimePodStartups(node string, count int) ([]time.Duration, error) {
	n, err := sb.node(node)
	if err != nil {
		return nil, err
	}
	netcube := sb.Config.PodNetwork != PodNetworkFlannel
	var out []time.Duration
	for i := 0; i < count; i++ {
		p := Pod{Name: fmt.Sprintf("startup%d", i), Node: n.Name, Netns: fmt.Sprintf("%s-s%d", sb.Config.Name, i)}
		if netcube {
			err = sb.declarePod(p.Name, n.Name, map[string]string{"app": "startup"})
			if err == nil {
				err = sb.waitPodSeen(n, p.Name, readyTimeout)
			}
		}
		if err == nil {
			var took time.Duration
			took, err = sb.Topology.addPod(n, p, sb.pluginDir(), sb.network())
			if err == nil {
				out = append(out, took)
				err = sb.Topology.delPod(n, p, sb.pluginDir(), sb.network())
			}
			if derr := ip("", "netns", "delete", p.Netns); err == nil {
				err = derr
			}
		}
		if netcube {
			if derr := sb.undeclarePod(p.Name); err == nil {
				err = derr
			}
		}
		if err != nil {
			return out, fmt.Errorf("pod startup %d on %s: %w", i, node, err)
		}
	}
	return out, nil
}
