package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestConfigPrecedence: a flag on the command line wins over the --config
// file, the file over the defaults, whatever the order of the flags; a
// field neither sets keeps its default.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "netcube.yaml")
	if err := os.WriteFile(file, []byte("socketLB: false\nlbAlgorithm: maglev\nnodeName: from-file\n"+
		"mapSizes: {lb_services: 1000, ct_flows: 2000}\nnodeInterfaces: [eth9]\nmetricsBindAddress: 127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := Defaults()
	base.NodeName = "from-env"
	for _, c := range []struct {
		name string
		args []string
		edit func(*Config) // the expected config, from the defaults
	}{
		{"defaults", nil, func(c *Config) {}},
		{"flags alone", []string{"--socket-lb=false", "--lb-service-map-size", "77", "--api-list-page-size", "500"}, func(c *Config) {
			c.SocketLB, c.MapSizes, c.APIListPageSize = false, map[string]uint32{"lb_services": 77}, 500
		}},
		{"the file over the defaults", []string{"--config", file}, func(c *Config) {
			c.SocketLB, c.LBAlgorithm, c.NodeName, c.NodeInterfaces = false, "maglev", "from-file", []string{"eth9"}
			c.MapSizes, c.MetricsBindAddress = map[string]uint32{"lb_services": 1000, "ct_flows": 2000}, "127.0.0.1:1"
		}},
		{"flags over the file, before or after --config", []string{"--lb-algorithm", "random", "--config", file, "--socket-lb", "--node-name", "from-flag", "--ct-map-size", "5"},
			func(c *Config) {
				c.SocketLB, c.LBAlgorithm, c.NodeName, c.NodeInterfaces = true, "random", "from-flag", []string{"eth9"}
				// --ct-map-size sizes the table and its per-flow counters.
				c.MapSizes, c.MetricsBindAddress = map[string]uint32{"lb_services": 1000, "ct_flows": 5, "ct_acct": 5}, "127.0.0.1:1"
			}},
		{"Hubble's metrics: some, or none", []string{"--hubble-metrics", "drop,flow"}, func(c *Config) { c.HubbleMetrics = []string{"drop", "flow"} }},
		{"no Hubble metrics", []string{"--hubble-metrics="}, func(c *Config) { c.HubbleMetrics = []string{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := Defaults()
			want.NodeName = "from-env"
			c.edit(&want)
			got, _, err := ParseFlags("netcube-agent", c.args, base)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
	if base.MapSizes != nil {
		t.Errorf("parsing changed the base config: %+v", base.MapSizes)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("socketLoadBalancing: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ParseFlags("netcube-agent", []string{"--config", bad}, base); err == nil || !strings.Contains(err.Error(), "socketLoadBalancing") {
		t.Errorf("misspelt field in the config file: %v, want it named", err)
	}
}
