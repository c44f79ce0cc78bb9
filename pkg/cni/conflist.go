package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
)

// ConfListFile is the conflist the agent installs. "10-" sorts it before
// the usual names of other providers' files, as runtimes take the first.
const ConfListFile = "10-netcube.conflist"

// NetworkName is the conflist's network name.
const NetworkName = "netcube"

// ConfList is what the agent's conflist says of this node's pods.
type ConfList struct {
	PodCIDRs  []netip.Prefix // their addresses
	MTU       int            // 0: DefaultMTU
	PodDevice string         // "": veth
	DataDir   string         // the address allocations
	Socket    string         // the agent's
	// Chained are plugins run after netcube's (by type, e.g. "portmap":
	// a pod's hostPorts).
	Chained []string
}

// WriteConfList installs (or replaces, atomically) the conflist c in dir.
func WriteConfList(dir string, c ConfList) error {
	var cidrs []string
	for _, p := range c.PodCIDRs {
		cidrs = append(cidrs, p.String())
	}
	plugin := map[string]any{"type": PluginType, "podCIDRs": cidrs, "dataDir": c.DataDir, "agentSocket": c.Socket}
	if c.MTU != 0 {
		plugin["mtu"] = c.MTU
	}
	if c.PodDevice != "" {
		plugin["podDevice"] = c.PodDevice
	}
	// Runtimes whose libcni reads cniVersions (CNI 1.1) pick the highest
	// they support; older ones take cniVersion and reject a result of a
	// version they do not know (containerd 1.6 knows up to 1.0.0).
	b, err := json.MarshalIndent(map[string]any{
		"cniVersion":  "1.0.0",
		"cniVersions": []string{"1.0.0", "1.1.0"},
		"name":        NetworkName,
		"plugins":     append([]any{plugin}, chainedPlugins(c.Chained)...),
	}, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, ConfListFile), append(b, '\n'), 0o644)
}

// RemoveConfList removes the conflist: the runtime then reports the
// network not ready, and starts no pod on this node.
func RemoveConfList(dir string) error {
	err := os.Remove(filepath.Join(dir, ConfListFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// InstallPlugin copies the plugin binary into the runtime's CNI bin
// directory, atomically, so a runtime never executes a half-written file.
func InstallPlugin(binary, binDir string) error {
	src, err := os.Open(binary)
	if err != nil {
		return fmt.Errorf("install %s: %w", PluginType, err)
	}
	defer src.Close()
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(binDir, PluginType), b, 0o755)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// chainedPlugins are the conflist entries of chained plugins; portmap
// asks the runtime for the pod's port mappings (its hostPorts).
func chainedPlugins(types []string) []any {
	var out []any
	for _, t := range types {
		p := map[string]any{"type": t}
		if t == "portmap" {
			p["capabilities"] = map[string]bool{"portMappings": true}
		}
		out = append(out, p)
	}
	return out
}
