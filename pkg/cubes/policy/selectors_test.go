package policy

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"github.com/netcube/netcube/pkg/model"
)

// TestSelectorIndex: a class change asks only the policies whose
// selectors may match it, each once; the index holds each distinct
// selector once however many policies share it, and forgets every
// policy deleted.
func TestSelectorIndex(t *testing.T) {
	cl := ScaleCluster(3, 10, 40, []string{"node1", "node2"})
	c := NewCompiler()
	c.Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")})

	// ScaleCluster's peers: app=a0..a4 in the policy's namespace, or with
	// one of 3 team namespace selectors; its subjects app=a0..a4.
	x := c.selectors
	if n := len(x.peers); n < 5 || n > 3*5+3*5 {
		t.Errorf("%d distinct peer selectors for 120 policies, want the distinct ones (5 to 30)", n)
	}
	if n := len(x.subjects["ns1"]); n != 5 {
		t.Errorf("ns1's 40 policies apply to %d distinct selectors, want 5", n)
	}

	// A class of ns1 labelled app=a2: the policies whose peers name
	// app=a2 in ns1 (pol1, pol6, ... of ns1) and those of any namespace
	// whose team selector matches ns1's team t1 with app=a2.
	k := &class{ns: "ns1", labels: map[string]string{"app": "a2", "tier": "t0"}, members: map[model.PodID]int{}}
	var asked []model.PolicyID
	x.peerPolicies(k, cl.nsLabels("ns1"), func(ps *policyState) { asked = append(asked, ps.pol.ID) })
	var want []model.PolicyID
	for _, ps := range c.policies {
		for _, rules := range [][]model.PolicyRule{ps.pol.Ingress, ps.pol.Egress} {
			for i := range rules {
				if c.peersMatch(ps.pol, &rules[i], k) && !slices.Contains(want, ps.pol.ID) {
					want = append(want, ps.pol.ID)
				}
			}
		}
	}
	slices.SortFunc(asked, comparePolicyIDs)
	slices.SortFunc(want, comparePolicyIDs)
	if len(want) == 0 || len(want) >= len(c.policies)/2 {
		t.Fatalf("%d of %d policies match the class: not a test of the index", len(want), len(c.policies))
	}
	if !slices.Equal(asked, want) {
		t.Errorf("the index asked %d policies %v, want the %d whose peers match %v", len(asked), asked, len(want), want)
	}

	// Every policy deleted, those without ipBlocks one by one (Update's
	// own path: the index is not rebuilt), then the rest: nothing left
	// filed.
	for _, blocks := range []bool{false, true} {
		for id, pol := range cl.Policies {
			if (len(policyBlocks(pol)) > 0) == blocks {
				cl.SetPolicy(id, nil)
				c.Update(nil, nil, []model.PolicyID{id})
			}
		}
		if blocks {
			continue
		}
		if c.selectors != x {
			t.Fatal("deleting policies without ipBlocks rebuilt the index: not Update's own path")
		}
		filed := 0
		for _, s := range slices.Concat(slices.Collect(maps.Values(x.peers)), slices.Collect(maps.Values(x.subjects["ns1"]))) {
			for ps := range s.users {
				filed++
				if id := ps.pol.ID; cl.Policies[id] == nil || c.policies[id] != ps {
					t.Errorf("policy %v filed under %q by a state that is not its current one (deleted or replaced)", id, s.key)
				}
			}
		}
		if filed == 0 {
			t.Error("the policies with ipBlocks left are filed nowhere")
		}
	}
	x = c.selectors
	if len(cl.Policies) != 0 || len(x.peers)+len(x.peersByNS)+len(x.widePeers)+len(x.blockPeers)+len(x.subjects) != 0 {
		t.Errorf("after every policy was deleted the index holds %d peers (%d by namespace, %d wide), %d blocks, %d namespaces of subjects",
			len(x.peers), len(x.peersByNS), len(x.widePeers), len(x.blockPeers), len(x.subjects))
	}
}

// TestPeersHold: for every class of a cluster (pods', and those of the
// ipBlocks' regions), the rules peersHold names inside peerPolicies are
// exactly those whose peers match the class as peersMatch judges them
// with the labels, and no policy left out holds one.
func TestPeersHold(t *testing.T) {
	cl := ScaleCluster(3, 10, 40, []string{"node1", "node2"})
	c := NewCompiler()
	c.Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")})
	type ruleOf struct {
		pol  model.PolicyID
		rule *model.PolicyRule
	}
	held, blocks := 0, 0
	for _, k := range c.classes {
		var want, got []ruleOf
		for _, ps := range c.policies {
			for _, rules := range [][]model.PolicyRule{ps.pol.Ingress, ps.pol.Egress} {
				for i := range rules {
					if c.peersMatch(ps.pol, &rules[i], k) {
						want = append(want, ruleOf{ps.pol.ID, &rules[i]})
					}
				}
			}
		}
		c.selectors.peerPolicies(k, cl.nsLabels(k.ns), func(ps *policyState) {
			for _, rules := range [][]model.PolicyRule{ps.pol.Ingress, ps.pol.Egress} {
				for i := range rules {
					if c.selectors.peersHold(ps, &rules[i], k) {
						got = append(got, ruleOf{ps.pol.ID, &rules[i]})
					}
				}
			}
		})
		order := func(a, b ruleOf) int {
			if n := comparePolicyIDs(a.pol, b.pol); n != 0 {
				return n
			}
			return cmp.Compare(uintptr(unsafe.Pointer(a.rule)), uintptr(unsafe.Pointer(b.rule)))
		}
		slices.SortFunc(want, order)
		slices.SortFunc(got, order)
		if !slices.Equal(got, want) {
			t.Errorf("class %q: peersHold named %d rules, want the %d whose peers match it", k.key, len(got), len(want))
		}
		held += len(got)
		if k.members == nil {
			blocks += len(got)
		}
	}
	if held == 0 || blocks == 0 || blocks == held {
		t.Fatalf("%d rules held a class, %d of them by an ipBlock: want both pod selectors and blocks to hold some", held, blocks)
	}
}
