package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/internal/cgroup"
	"github.com/netcube/netcube/pkg/cubes/policy"
)

// AddPod starts a pod more on node, as a cluster does: its Pod object
// (in the default namespace with labels, bound to the node, with no
// address in its status: the runtime reports that only after ADD) comes
// first, then its namespace and cgroup, then CNI ADD, which an agent
// enforcing NetworkPolicy answers once it has the Pod and has written its
// policy. The pod is added to the topology with the addresses ADD gave
// it, so Start and Output run in it.
func (sb *Sandbox) AddPod(name, node string, labels map[string]string) (Pod, error) {
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
	if err := steps(
		func() error { return sb.declarePod(name, node, labels) },
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

// podManifest is the Pod object of a pod the sandbox adds: in the default
// namespace, bound to node, with no address in its status.
func podManifest(name, node string, labels map[string]string) string {
	var l []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		l = append(l, fmt.Sprintf("%q: %q", k, labels[k]))
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  labels: {%s}\n"+
		"spec:\n  nodeName: %s\n  containers:\n  - name: pod\n    image: netcube\n", name, strings.Join(l, ", "), node)
}

// podFile is the manifest holding pod name's Pod object.
func podFile(name string) string { return "pod-" + name + ".yaml" }

// declarePod gives the cluster pod name's Pod object: a manifest the
// agents read, or, with an API server, the object created through it.
func (sb *Sandbox) declarePod(name, node string, labels map[string]string) error {
	if !sb.Config.APIServer {
		return sb.Topology.WriteManifest(podFile(name), podManifest(name, node, labels))
	}
	c, err := sb.Client()
	if err != nil {
		return err
	}
	return createFromYAML(c, podManifest(name, node, labels))
}

// undeclarePod deletes what declarePod made.
func (sb *Sandbox) undeclarePod(name string) error {
	if !sb.Config.APIServer {
		return os.Remove(filepath.Join(sb.Topology.ManifestDir(), podFile(name)))
	}
	c, err := sb.Client()
	if err != nil {
		return err
	}
	return c.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{})
}

// waitPodSeen waits until node n's agent holds Pod default/name in its
// cache (its local API's pod list): its CNI ADD waits for that, and a
// measure of ADD alone must not count the manifest's way to the agent.
func (sb *Sandbox) waitPodSeen(n Node, name string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sb.Topology.APISocket(n))
		}}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		pods := map[string]json.RawMessage{}
		resp, err := hc.Get("http://agent" + policy.PodsPath)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&pods)
			resp.Body.Close()
		}
		if _, ok := pods["default/"+name]; ok && err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("not listed")
			}
			return fmt.Errorf("pod default/%s: not in agent %s's cache after %s: %w", name, n.Name, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
