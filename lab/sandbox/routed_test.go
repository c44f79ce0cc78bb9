package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoutedLayout(t *testing.T) {
	top := Layout(Config{Name: "x", Nodes: 3, Routed: true}, "/sys/fs/cgroup")
	if len(top.Racks) != 2 {
		t.Fatalf("racks: %+v", top.Racks)
	}
	want := map[string]string{"node1": "172.30.11.11 fd00:172:30:11::11 1", "node2": "172.30.12.12 fd00:172:30:12::12 2", "node3": "172.30.11.13 fd00:172:30:11::13 1"}
	for _, n := range top.Nodes {
		got := n.IP4.String() + " " + n.IP6.String() + " " + string(rune('0'+n.Rack))
		if got != want[n.Name] {
			t.Errorf("%s: %s, want %s", n.Name, got, want[n.Name])
		}
	}
	if k := top.Racks[0]; k.Router4.String() != "172.30.11.254" || k.Router6.String() != "fd00:172:30:11::254" || strings.Join(k.Nodes, ",") != "node1,node3" {
		t.Errorf("rack 1: %+v", k)
	}
	if !strings.Contains(top.NodesYAML(), "labels: {netcube.io/rack: r2}") {
		t.Errorf("no rack label:\n%s", top.NodesYAML())
	}
	if !strings.Contains(top.BGPPeeringsYAML(), "address: 172.30.12.254") {
		t.Errorf("peerings:\n%s", top.BGPPeeringsYAML())
	}
	plain := Layout(Config{Name: "x"}, "/sys/fs/cgroup")
	if plain.Routed() || plain.Nodes[0].IP4.String() != "172.30.0.11" || strings.Contains(plain.NodesYAML(), "labels") {
		t.Errorf("non-routed layout changed: %+v", plain.Nodes[0])
	}
	if _, err := exec.LookPath("bird"); err == nil {
		conf := filepath.Join(t.TempDir(), "bird.conf")
		if err := os.WriteFile(conf, []byte(top.BirdConf()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("bird", "-p", "-c", conf).CombinedOutput(); err != nil {
			t.Errorf("bird -p: %v: %s\n%s", err, out, top.BirdConf())
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("bird not found, so BIRD's own check of the config did not run: hack/install-deps.sh installs bird2")
	}
}

func TestParseBirdRoutes(t *testing.T) {
	out := `[{"dst":"10.244.1.0/24","gateway":"172.30.11.11","dev":"rack1","protocol":"bird","metric":32,"flags":[]},` +
		`{"dst":"10.96.0.10","protocol":"bird","metric":32,"flags":[],"nexthops":[{"gateway":"172.30.12.12","dev":"rack2","weight":1,"flags":[]},{"gateway":"172.30.11.11","dev":"rack1","weight":1,"flags":[]}]}]`
	m, err := parseBirdRoutes([]byte(out), 4)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(m["10.244.1.0/24"], ",") != "172.30.11.11" || strings.Join(m["10.96.0.10/32"], ",") != "172.30.11.11,172.30.12.12" {
		t.Errorf("%v", m)
	}
	p := parseBirdProtocols("Name       Proto      Table      State  Since         Info\ndevice1    Device     ---        up     10:00:00.000  \nnode1      BGP        ---        up     10:00:01.000  Established   \nnode2      BGP        ---        start  10:00:00.000  Passive\n")
	if p["node1"] != "Established" || p["node2"] != "Passive" || len(p) != 2 {
		t.Errorf("%v", p)
	}
}
