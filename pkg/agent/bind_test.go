package agent

import (
	"strings"
	"testing"
)

// TestResolveBindAddress: "node" is the node's address from $NODE_IP, in
// either family; any other address is kept; "node" without $NODE_IP is
// refused, naming the flag and the variable (never 0.0.0.0 instead).
func TestResolveBindAddress(t *testing.T) {
	for _, c := range []struct{ env, addr, want, err string }{
		{"192.0.2.7", "node:10256", "192.0.2.7:10256", ""},
		{"fd00::7", "node:10249", "[fd00::7]:10249", ""},
		{"192.0.2.7", "127.0.0.1:10249", "127.0.0.1:10249", ""},
		{"", "0.0.0.0:10256", "0.0.0.0:10256", ""},
		{"", "", "", ""},
		{"", "node:10256", "", "--healthz-bind-address \"node:10256\": the node's address comes from $NODE_IP"},
		{"not-an-ip", "node:10256", "", "$NODE_IP \"not-an-ip\" is not an IP address"},
		{"", "10256", "", "--healthz-bind-address \"10256\""},
	} {
		t.Setenv(NodeIPEnv, c.env)
		got, err := resolveBindAddress("healthz-bind-address", c.addr)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q with NODE_IP=%q: %q, %v; want an error saying %q", c.addr, c.env, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q with NODE_IP=%q: %q, %v; want %q", c.addr, c.env, got, err, c.want)
		}
	}
}
