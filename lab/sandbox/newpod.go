package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netcube/netcube/internal/cgroup"
)

// AddPod starts a pod more on node, as a cluster does: its Pod object
// (a manifest in the default namespace with labels, bound to the node,
// with no address in its status: the runtime reports that only after
// ADD) comes first, then its namespace and cgroup, then CNI ADD. The pod
// is added to the topology with the addresses ADD gave it, so Start and
// Output run in it. For sandboxes reading manifests (no API server).
func (sb *Sandbox) AddPod(name, node string, labels map[string]string) (Pod, error) {
	if sb.Config.APIServer {
		return Pod{}, fmt.Errorf("AddPod: sandbox %s serves its objects from an API server; it adds pods to manifests only", sb.Config.Name)
	}
	i := -1
	for j, n := range sb.Topology.Nodes {
		if n.Name == node {
			i = j
		}
	}
	if i < 0 {
		return Pod{}, fmt.Errorf("AddPod: no node %q", node)
	}
	n := sb.Topology.Nodes[i]
	p := Pod{Name: name, Node: node, Netns: sb.Config.Name + "-" + name, Cgroup: filepath.Join(n.Cgroup, name)}
	var l []string
	for k, v := range labels {
		l = append(l, fmt.Sprintf("%s: %q", k, v))
	}
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  labels: {%s}\n"+
		"spec:\n  nodeName: %s\n  containers:\n  - name: pod\n    image: netcube\n", name, strings.Join(l, ", "), node)
	if err := steps(
		func() error { return sb.Topology.WriteManifest("pod-"+name+".yaml", manifest) },
		func() error { return cgroup.Create(p.Cgroup) },
		func() error { return ip("", "netns", "add", p.Netns) },
		func() error {
			return sysctl(p.Netns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		},
	); err != nil {
		return Pod{}, fmt.Errorf("pod %s: %w", name, err)
	}
	res, err := sb.Topology.cni(n, sb.pluginDir(), sb.network(), func(ctx context.Context, c *libcni.CNIConfig, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
		return c.AddNetworkList(ctx, l, rt)
	}, p)
	if err != nil {
		return Pod{}, fmt.Errorf("pod %s: CNI ADD: %w", name, err)
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return Pod{}, err
	}
	for _, ipc := range r.IPs {
		a, _ := netip.AddrFromSlice(ipc.Address.IP)
		if a = a.Unmap(); a.Is4() {
			p.IP4 = a
		} else {
			p.IP6 = a
		}
	}
	p.HostIf = r.Interfaces[0].Name
	sb.Topology.Nodes[i].Pods = append(sb.Topology.Nodes[i].Pods, p)
	return p, nil
}
