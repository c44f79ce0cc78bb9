package agent

import (
	"strings"
	"testing"
	"time"
)

// TestCheckL2Announce: the defaults and a hollow agent given loopback
// heartbeat addresses are taken (the positive controls); each setting
// that cannot work is refused with an error naming its flag.
func TestCheckL2Announce(t *testing.T) {
	if err := checkL2Announce(Defaults()); err != nil {
		t.Fatalf("the defaults refused: %v", err)
	}
	hollow := Defaults()
	hollow.Datapath, hollow.L2HeartbeatAddrs = DatapathMemory, []string{"127.1.0.1", "::1"}
	hollow.L2HeartbeatInterval.Duration = time.Second
	if err := checkL2Announce(hollow); err != nil {
		t.Fatalf("a hollow agent with loopback heartbeat addresses refused: %v", err)
	}
	zero := Defaults()
	zero.L2HeartbeatInterval.Duration = 0 // a config file without it: the default
	if err := checkL2Announce(zero); err != nil {
		t.Fatalf("interval 0 (the default) refused: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"on a node's agent", func(c *Config) { c.L2HeartbeatAddrs = []string{"127.1.0.1"} },
			[]string{`--l2-heartbeat-addrs "127.1.0.1" without --datapath=memory`}},
		{"not addresses", func(c *Config) { c.Datapath, c.L2HeartbeatAddrs = DatapathMemory, []string{"127.1.0.1", "node-1"} },
			[]string{`--l2-heartbeat-addrs: "node-1" is not an IP address`}},
		{"not loopback", func(c *Config) { c.Datapath, c.L2HeartbeatAddrs = DatapathMemory, []string{"10.0.0.1", "fd00::1"} },
			[]string{"--l2-heartbeat-addrs: 10.0.0.1 is not a loopback address", "--l2-heartbeat-addrs: fd00::1 is not a loopback address"}},
		{"no election", func(c *Config) {
			c.Datapath, c.L2HeartbeatAddrs, c.L2Announce, c.L2HeartbeatPort = DatapathMemory, []string{"127.1.0.1"}, L2AnnounceAll, 0
		}, []string{"--l2-heartbeat-addrs \"127.1.0.1\" with --l2-announce=all", "--l2-heartbeat-addrs \"127.1.0.1\" with --l2-heartbeat-port 0"}},
		{"interval", func(c *Config) { c.L2HeartbeatInterval.Duration = time.Millisecond },
			[]string{"--l2-heartbeat-interval (l2HeartbeatInterval) 1ms: want at least 10ms"}},
		{"negative interval", func(c *Config) { c.L2HeartbeatInterval.Duration = -time.Second },
			[]string{"--l2-heartbeat-interval (l2HeartbeatInterval) -1s"}},
		{"mode and port", func(c *Config) { c.L2Announce, c.L2HeartbeatPort = "some", 70000 },
			[]string{`--l2-announce (l2Announce) "some": want elected or all`, "--l2-heartbeat-port (l2HeartbeatPort) 70000"}},
	} {
		cfg := Defaults()
		c.edit(&cfg)
		err := checkL2Announce(cfg)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v does not say %q", c.name, err, w)
			}
		}
	}
}

// TestL2HeartbeatFlags: the flags set the config as written.
func TestL2HeartbeatFlags(t *testing.T) {
	cfg, _, err := ParseFlags("netcube-agent", []string{"--l2-heartbeat-addrs", "127.1.0.1,127.1.0.2", "--l2-heartbeat-interval", "1s"}, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.L2HeartbeatAddrs, ","); got != "127.1.0.1,127.1.0.2" || cfg.L2HeartbeatInterval.Duration != time.Second {
		t.Errorf("addrs %q interval %s", got, cfg.L2HeartbeatInterval.Duration)
	}
}
