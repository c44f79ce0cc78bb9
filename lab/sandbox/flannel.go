package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The pod-network benchmark's reference peer: flannel (VXLAN backend, kube
// subnet manager against the sandbox's API server) with the reference
// bridge and host-local CNI plugins, the kernel bridge/VXLAN path most
// clusters run. No netcube agent runs in such a sandbox. hack/build-flannel.sh
// builds the binaries (Config.FlannelDir).

// PodNetworkFlannel is Config.PodNetwork for the flannel reference.
const PodNetworkFlannel = "flannel"

// flannelNetwork is the conflist's network name in flannel mode.
const flannelNetwork = "flannel-ref"

// flannelMTU: the uplink's 1500 less VXLAN's 50 (flannel's own choice).
const flannelMTU = 1450

func (t Topology) flannelSubnetFile(n Node) string {
	return filepath.Join(t.StateDir, n.Name, "flannel-subnet.env")
}

// startFlannel runs flanneld on every node and installs the bridge
// conflist flannel's CNI plugin would generate from each node's subnet.
func (sb *Sandbox) startFlannel() error {
	t := sb.Topology
	netConf := filepath.Join(t.StateDir, "flannel-net-conf.json")
	b, _ := json.Marshal(map[string]any{
		"Network": "10.244.0.0/16", "EnableIPv6": true, "IPv6Network": "fd00:10:244::/48",
		"Backend": map[string]any{"Type": "vxlan"},
	})
	if err := os.WriteFile(netConf, b, 0o644); err != nil {
		return err
	}
	for _, n := range t.Nodes {
		if err := os.MkdirAll(filepath.Join(t.StateDir, n.Name), 0o755); err != nil {
			return err
		}
		// flanneld reads its node's name from the environment.
		args := []string{"env", "NODE_NAME=" + n.Name, filepath.Join(sb.Config.FlannelDir, "flanneld"),
			"--kube-subnet-mgr", "--kubeconfig-file", t.Kubeconfig(), "--iface", "eth0",
			"--net-config-path", netConf, "--subnet-file", t.flannelSubnetFile(n), "--ip-masq=false"}
		if err := spawn(t, "flanneld-"+n.Name, n.Netns, "", args...); err != nil {
			return err
		}
	}
	for _, n := range t.Nodes {
		if err := waitFile(t, t.flannelSubnetFile(n), "flanneld-"+n.Name, readyTimeout); err != nil {
			return err
		}
		if err := t.writeBridgeConf(n); err != nil {
			return err
		}
	}
	return nil
}

// writeBridgeConf is the conflist of the bridge plugin with host-local
// addresses from the node's pod CIDRs (gateway .1 on the bridge).
func (t Topology) writeBridgeConf(n Node) error {
	ranges := [][]map[string]string{{{"subnet": n.PodNet.String()}}, {{"subnet": n.PodNet6.String()}}}
	b, _ := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0", "name": flannelNetwork,
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true,
			"hairpinMode": true, "mtu": flannelMTU,
			"ipam": map[string]any{"type": "host-local", "ranges": ranges,
				"dataDir": filepath.Join(t.StateDir, n.Name, "host-local")},
		}},
	}, "", "  ")
	if err := os.MkdirAll(t.cniConfDir(n), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.cniConfDir(n), "10-flannel-ref.conflist"), b, 0o644)
}

// waitFlannelRoutes waits until each node routes the others' pod CIDRs
// through flannel's VXLAN device (flannel learns the others from their
// Node annotations).
func (sb *Sandbox) waitFlannelRoutes() error {
	deadline := time.Now().Add(readyTimeout)
	for _, n := range sb.Topology.Nodes {
		for _, peer := range sb.Topology.Nodes {
			if peer.Name == n.Name {
				continue
			}
			for {
				out, _ := outputIn(n.Netns, "ip", "route", "show", peer.PodNet.String())
				if len(out) > 0 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("flannel on %s: no route to %s's pods (%s) within %s", n.Name, peer.Name, peer.PodNet, readyTimeout)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}
