package cni

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

// TestConfList: the conflist libcni reads names netcube's plugin first,
// then the chained hostPort plugin with the portMappings capability (the
// runtime passes a pod's hostPorts only to plugins that ask), and offers
// CNI 1.0.0 to runtimes that know nothing newer (containerd 1.6) and 1.1.0
// to those that do.
func TestConfList(t *testing.T) {
	dir := t.TempDir()
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	for _, c := range []struct {
		chained []string
		types   []string
	}{
		{nil, []string{PluginType}},
		{[]string{"portmap"}, []string{PluginType, "portmap"}},
	} {
		if err := WriteConfList(dir, ConfList{PodCIDRs: cidrs, DataDir: "/var/lib/netcube/ipam", Socket: "/run/netcube/cni.sock", Chained: c.chained}); err != nil {
			t.Fatal(err)
		}
		list, err := libcni.ConfListFromFile(filepath.Join(dir, ConfListFile))
		if err != nil {
			t.Fatal(err)
		}
		if list.CNIVersion != "1.1.0" { // libcni 1.3 picks the highest of cniVersions
			t.Errorf("version %s, want 1.1.0 from cniVersions", list.CNIVersion)
		}
		var types []string
		for _, p := range list.Plugins {
			types = append(types, p.Network.Type)
			if p.Network.Type == "portmap" && !p.Network.Capabilities["portMappings"] {
				t.Errorf("portmap without the portMappings capability")
			}
		}
		if len(types) != len(c.types) || types[0] != c.types[0] || types[len(types)-1] != c.types[len(c.types)-1] {
			t.Errorf("chained %v: plugins %v, want %v", c.chained, types, c.types)
		}
	}
}
