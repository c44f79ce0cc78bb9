package kube

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// TestPodClaims: the pods a handler is given from this node's Pod objects
// and other nodes' NodePods, step by step: a pod moved between nodes, a
// stale NodePods withdrawing a pod that lives on elsewhere, the local Pod
// object winning over any NodePods, pods outside their Node's pod CIDRs
// or of a deleted Node not used (and reported), and nothing re-delivered
// that did not change.
func TestPodClaims(t *testing.T) {
	pod := func(name, node, ip string, labels ...string) *model.Pod {
		p := &model.Pod{ID: model.PodID{Namespace: "ns", Name: name}, Node: node, IPs: []netip.Addr{netip.MustParseAddr(ip)}, Labels: map[string]string{}}
		for i := 0; i+1 < len(labels); i += 2 {
			p.Labels[labels[i]] = labels[i+1]
		}
		return p
	}
	var got []string
	c := newPodClaims(func(k types.NamespacedName, p *model.Pod) {
		if p == nil {
			got = append(got, k.Name+" deleted")
		} else {
			got = append(got, fmt.Sprintf("%s on %s at %s %v", k.Name, p.Node, p.IPs[0], p.Labels))
		}
	})
	refused := map[string]string{}
	c.refuse = func(node, problem string) { refused[node] = problem }
	cidrs := func(s string) *model.NodeInfo {
		return &model.NodeInfo{PodCIDRs: []netip.Prefix{netip.MustParsePrefix(s)}}
	}
	// Before the Nodes are listed, a NodePods of a Node not known yet is
	// not used, and not reported either.
	c.setNode("b", []*model.Pod{pod("web-0", "b", "10.244.2.5", "app", "web")})
	if len(got) != 0 || len(refused) != 0 {
		t.Errorf("before the Nodes are listed: delivered %q, reported %q; want nothing", got, refused)
	}
	c.setNodeInfo("b", cidrs("10.244.2.0/24"))
	c.setNodeInfo("c", cidrs("10.244.3.0/24"))
	c.setNodesListed()
	c.setNode("b", nil)
	if want := []string{"web-0 on b at 10.244.2.5 map[app:web]", "web-0 deleted"}; !slices.Equal(got, want) || refused["b"] != "" {
		t.Errorf("its Node known: delivered %q, want %q; reported %q, want nothing", got, want, refused["b"])
	}
	got = nil
	local := func(k string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: k} }
	for _, step := range []struct {
		name string
		do   func()
		want []string
	}{
		{"another node's pods arrive", func() {
			c.setNode("b", []*model.Pod{pod("web-0", "b", "10.244.2.5", "app", "web"), pod("db-0", "b", "10.244.2.6")})
		}, []string{"db-0 on b at 10.244.2.6 map[]", "web-0 on b at 10.244.2.5 map[app:web]"}},
		{"its NodePods rewritten, unchanged: nothing", func() {
			c.setNode("b", []*model.Pod{pod("db-0", "b", "10.244.2.6"), pod("web-0", "b", "10.244.2.5", "app", "web")})
		}, nil},
		{"a label changes", func() {
			c.setNode("b", []*model.Pod{pod("web-0", "b", "10.244.2.5", "app", "web", "v", "2"), pod("db-0", "b", "10.244.2.6")})
		}, []string{"web-0 on b at 10.244.2.5 map[app:web v:2]"}},
		{"db-0 recreated on node c while b's NodePods still lists it: c's is newer", func() {
			c.setNode("c", []*model.Pod{pod("db-0", "c", "10.244.3.9")})
		}, []string{"db-0 on c at 10.244.3.9 map[]"}},
		{"b's NodePods, updated at last, withdraws db-0: c's stays", func() {
			c.setNode("b", []*model.Pod{pod("web-0", "b", "10.244.2.5", "app", "web", "v", "2")})
		}, nil},
		{"c's NodePods adds a pod at an address outside c's pod CIDRs: not used", func() {
			c.setNode("c", []*model.Pod{pod("db-0", "c", "10.244.3.9"), pod("admin", "c", "10.244.2.99", "role", "admin")})
		}, nil},
		{"c's Node deleted: none of its pods is used", func() { c.setNodeInfo("c", nil) }, []string{"db-0 deleted"}},
		{"c's Node back", func() { c.setNodeInfo("c", cidrs("10.244.3.0/24")) }, []string{"db-0 on c at 10.244.3.9 map[]"}},
		{"a local Pod object wins over NodePods", func() { c.setLocal(local("web-0"), pod("web-0", "self", "10.244.1.4", "app", "web")) },
			[]string{"web-0 on self at 10.244.1.4 map[app:web]"}},
		{"the local pod gone: the NodePods claim is given again", func() { c.setLocal(local("web-0"), nil) },
			[]string{"web-0 on b at 10.244.2.5 map[app:web v:2]"}},
		{"node b's NodePods deleted", func() { c.setNode("b", nil) }, []string{"web-0 deleted"}},
		{"a local pod with no address yet: nothing", func() { c.setLocal(local("new"), nil) }, nil},
		{"node c's NodePods emptied", func() { c.setNode("c", []*model.Pod{}) }, []string{"db-0 deleted"}},
	} {
		got = nil
		step.do()
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: delivered %q, want %q", step.name, got, step.want)
		}
		if strings.HasPrefix(step.name, "c's NodePods adds") && !strings.Contains(refused["c"], "ns/admin at [10.244.2.99]") {
			t.Errorf("%s: reported %q, want the pod named", step.name, refused["c"])
		}
		if strings.HasPrefix(step.name, "c's Node deleted") && !strings.Contains(refused["c"], "no Node c") {
			t.Errorf("%s: reported %q, want the missing Node named", step.name, refused["c"])
		}
	}
	if refused["b"] != "" || refused["c"] != "" {
		t.Errorf("problems left standing: %q", refused)
	}
	if n := c.nodes(); len(n) != 1 || n[0].Name != "c" {
		t.Errorf("nodes held %v, want c (emptied, not deleted)", n)
	}
	if len(c.order) != 0 || len(c.shown) != 0 {
		t.Errorf("claims left behind: order %v, shown %v", c.order, c.shown)
	}
}

// TestLocalPodChangesWakeTheWriter: the writer of this node's NodePods is
// woken by a change of what it writes, not by a pod's status change that
// leaves its address, labels and ports as they were.
func TestLocalPodChangesWakeTheWriter(t *testing.T) {
	c := newPodClaims(func(types.NamespacedName, *model.Pod) {})
	k := types.NamespacedName{Namespace: "ns", Name: "p"}
	p := &model.Pod{ID: model.PodID{Namespace: "ns", Name: "p"}, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	woken := func() bool {
		select {
		case <-c.changed:
			return true
		default:
			return false
		}
	}
	c.setLocal(k, p)
	if !woken() {
		t.Error("a new pod did not wake the writer")
	}
	same := *p
	c.setLocal(k, &same)
	if woken() {
		t.Error("an unchanged pod woke the writer")
	}
	c.setLocal(k, nil)
	if !woken() {
		t.Error("a deleted pod did not wake the writer")
	}
}
