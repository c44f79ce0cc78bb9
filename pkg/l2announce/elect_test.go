package l2announce

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func nodes(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("node-%d", i))
	}
	return out
}

func ips(n int) []netip.Addr {
	var out []netip.Addr
	base := netip.MustParseAddr("172.30.100.0")
	for range n {
		base = base.Next()
		out = append(out, base)
	}
	return out
}

func electAll(addrs []netip.Addr, eligible []string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, ip := range addrs {
		out[ip] = Elect(ip, eligible)
	}
	return out
}

func TestElect(t *testing.T) {
	ip := addr("172.30.100.7")
	if got := Elect(ip, nil); got != "" {
		t.Errorf("none eligible: %q", got)
	}
	if got := Elect(ip, []string{"only"}); got != "only" {
		t.Errorf("one eligible: %q", got)
	}
	ns := nodes(10)
	want := Elect(ip, ns)
	for i := range 10 { // any order elects the same node
		rot := append(slices.Clone(ns[i:]), ns[:i]...)
		slices.Reverse(rot)
		if got := Elect(ip, rot); got != want {
			t.Fatalf("order %v elects %s, %v elects %s", rot, got, ns, want)
		}
	}
	if Elect(addr("fd00:172:30::7"), ns) == "" || Score(addr("172.30.100.7"), "a") != Score(addr("::ffff:172.30.100.7"), "a") {
		t.Error("families")
	}
}

// TestElectSpreads: on 10 nodes, 1000 addresses spread about evenly;
// a node's death moves only its addresses; a node joining takes only
// its share (about 1/N of them), all from the others.
func TestElectSpreads(t *testing.T) {
	const N, IPs = 10, 1000
	addrs, ns := ips(IPs), nodes(N)
	before := electAll(addrs, ns)
	per := map[string]int{}
	for _, n := range before {
		per[n]++
	}
	for _, n := range ns {
		if per[n] < IPs/N/2 || per[n] > IPs/N*2 {
			t.Errorf("%s announces %d of %d addresses, want about %d", n, per[n], IPs, IPs/N)
		}
	}
	t.Logf("addresses per node: %v", per)

	for _, dead := range ns {
		after := electAll(addrs, slices.DeleteFunc(slices.Clone(ns), func(n string) bool { return n == dead }))
		moved := 0
		for ip, was := range before {
			switch {
			case was == dead:
				moved++
				if after[ip] == dead {
					t.Fatalf("%s still elected for %s", dead, ip)
				}
			case after[ip] != was:
				t.Fatalf("%s died: %s moved from %s to %s", dead, ip, was, after[ip])
			}
		}
		if moved != per[dead] {
			t.Errorf("%s died: %d moved, it had %d", dead, moved, per[dead])
		}
	}

	joined := append(slices.Clone(ns), "node-new")
	after := electAll(addrs, joined)
	moved := 0
	for ip, was := range before {
		if now := after[ip]; now != was {
			moved++
			if now != "node-new" {
				t.Fatalf("node-new joined: %s moved from %s to %s", ip, was, now)
			}
		}
	}
	frac, want := float64(moved)/IPs, 1.0/(N+1)
	t.Logf("a node joining 10 takes %d of %d addresses (%.3f; 1/11 = %.3f)", moved, IPs, frac, want)
	if math.Abs(frac-want) > 0.04 {
		t.Errorf("a node joining took %.3f of the addresses, want about %.3f", frac, want)
	}
	// And a node's death moves about 1/N (its share).
	dead := electAll(addrs, ns[1:])
	moved = 0
	for ip, was := range before {
		if dead[ip] != was {
			moved++
		}
	}
	if frac := float64(moved) / IPs; math.Abs(frac-1.0/N) > 0.04 {
		t.Errorf("a node's death moved %.3f of the addresses, want about %.3f", frac, 1.0/N)
	}
}

// TestElector: Cluster elects among the alive nodes, Local among the
// alive nodes with endpoints; becameAnnouncer fires when this node takes
// an address over, once.
func TestElector(t *testing.T) {
	clock, fn, ms := cluster(t)
	step(clock, ms, 1200*time.Millisecond) // past the grace, every node heard
	ip := addr("172.30.100.1")
	// The nodes' order by score for ip: first is elected when alive.
	order := []string{"a", "b", "c"}
	slices.SortFunc(order, func(x, y string) int {
		if Score(ip, x) > Score(ip, y) {
			return -1
		}
		return 1
	})
	first, second, third := order[0], order[1], order[2]
	var took []string
	els := map[string]*Elector{}
	for n, m := range ms {
		els[n] = NewElector(m, func(got netip.Addr) {
			if got != ip {
				t.Errorf("announced %s", got)
			}
			took = append(took, n)
		})
	}
	elected := func(everyNode bool, withEndpoints ...string) []string {
		var out []string
		for _, n := range []string{"a", "b", "c"} {
			if fn.down[n] {
				continue // a dead node's own answer does not matter
			}
			if els[n].Elected(ip, everyNode, withEndpoints) {
				out = append(out, n)
			}
		}
		return out
	}
	for _, c := range []struct {
		name      string
		kill      string
		everyNode bool
		endpoints []string
		want      []string
		took      []string
	}{
		{name: "Cluster: the highest score", everyNode: true, want: []string{first}, took: []string{first}},
		{name: "asked again: no new announcement", everyNode: true, want: []string{first}},
		{name: "Local: the highest with an endpoint", endpoints: []string{second, third}, want: []string{second}, took: []string{second}},
		{name: "Local: no endpoint anywhere, nobody", want: nil},
		{name: "Cluster, first dies: second", kill: first, everyNode: true, want: []string{second}, took: []string{second}},
		{name: "Local, the endpoint's node is dead: nobody", endpoints: []string{first}, want: nil},
		{name: "Local, endpoints on the dead and third", endpoints: []string{first, third}, want: []string{third}, took: []string{third}},
	} {
		if c.kill != "" {
			fn.down[c.kill] = true
			step(clock, ms, 4*DefaultInterval)
		}
		took = nil
		if got := elected(c.everyNode, c.endpoints...); !slices.Equal(got, c.want) {
			t.Errorf("%s: elected %v, want %v", c.name, got, c.want)
		}
		if !slices.Equal(took, c.took) {
			t.Errorf("%s: took over %v, want %v", c.name, took, c.took)
		}
	}
	if got := els[third].Announcing(); !slices.Equal(got, []netip.Addr{ip}) {
		t.Errorf("%s announces %v", third, got)
	}
	if got := els[second].Announcing(); len(got) != 0 {
		t.Errorf("%s announces %v, it lost the address to Local", second, got)
	}
}
