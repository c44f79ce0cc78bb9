package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// TestUpdateMatchesCompile: random changes to a cluster (pods created,
// deleted, relabelled, given another's freed address or other named
// ports, moved to host networking; namespaces relabelled, created and
// deleted; policies created, replaced and deleted, ipBlocks among them),
// a few at a time. After each batch, the tables Update keeps must equal
// those a fresh compiler builds from the whole cluster (identities and
// endpoints compared by what they stand for, not their numbers), and the
// maps written from Changes alone must equal the tables.
func TestUpdateMatchesCompile(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := &clusterGen{rng: rand.New(rand.NewPCG(seed, 7)), cl: NewCluster()}
			g.seed()
			local := func(p *model.Pod) bool { return p.Node == "n1" }
			host := []netip.Addr{netip.MustParseAddr("172.30.0.11")}
			inc := NewCompiler()
			inc.Compile(g.cl, local, host)
			maps := newTablesSim()
			maps.apply(inc.Tables(), inc.Changes())
			recompiled := 0
			for step := 0; step < 150; step++ {
				pods, nss, pols := g.mutate(1 + g.rng.IntN(3))
				inc.Update(pods, nss, pols)
				maps.apply(inc.Tables(), inc.Changes())
				full := NewCompiler()
				full.Compile(g.cl, local, host)
				got, want := inc.canonical(inc.Tables()), full.canonical(full.Tables())
				if diff := want.diff(got); diff != "" {
					t.Fatalf("step %d (pods %v, namespaces %v, policies %v): Update differs from Compile:\n%s", step, pods, nss, pols, diff)
				}
				if err := inc.checkRefs(); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				maps.t.Warnings = inc.Tables().Warnings // not in the maps
				if diff := inc.canonical(inc.Tables()).diff(inc.canonical(maps.tables())); diff != "" {
					t.Fatalf("step %d: the maps written from Changes differ from the tables:\n%s", step, diff)
				}
				if len(pols) > 0 {
					recompiled++
				}
			}
			if len(inc.Tables().Entries) == 0 || recompiled == 0 {
				t.Fatalf("the random cluster never had an entry (%d) or a policy change (%d): the test checks nothing",
					len(inc.Tables().Entries), recompiled)
			}
		})
	}
}

// checkRefs recounts the holders of every entry (the selections of
// every policy) against what ref and unref keep: the table holds an
// entry once with any holder, sharedRefs the holders beyond the first.
func (c *Compiler) checkRefs() error {
	holders := map[Entry]int{}
	for _, ps := range c.policies {
		for _, sel := range ps.bySet {
			for e := range sel.entries {
				holders[e]++
			}
		}
	}
	for e, n := range holders {
		if _, ok := c.t.Entries[e]; !ok {
			return fmt.Errorf("entry %+v: %d holders, not in the table", e, n)
		}
		if got := c.sharedRefs[e]; got != n-1 {
			return fmt.Errorf("entry %+v: %d holders, counted %d beyond the first", e, n, got)
		}
	}
	for e := range c.t.Entries {
		if holders[e] == 0 {
			return fmt.Errorf("entry %+v: in the table, no holder", e)
		}
	}
	for e := range c.sharedRefs {
		if holders[e] == 0 {
			return fmt.Errorf("entry %+v: counted shared, no holder", e)
		}
	}
	return nil
}

// canonicalTables are tables with identities as their class keys and
// endpoints as their pods: two compilers' tables compare equal when they
// say the same.
type canonicalTables struct {
	peers     map[netip.Prefix]string
	endpoints map[netip.Addr]string
	entries   map[string]bool
	warnings  map[string]bool
}

func (c *Compiler) canonical(t *Tables) canonicalTables {
	names := map[Identity]string{AnyPeer: "any", Host: "host", World: "world"}
	for key, id := range c.ids.ids {
		names[id] = key
	}
	eps, sets := map[uint32]string{}, map[uint32]string{}
	for pod, n := range c.endpoints {
		eps[n] = pod.String()
	}
	for key, rs := range c.ruleSets {
		sets[rs.id] = fmt.Sprintf("%q", key)
	}
	out := canonicalTables{peers: map[netip.Prefix]string{}, endpoints: map[netip.Addr]string{}, entries: map[string]bool{}, warnings: map[string]bool{}}
	for p, id := range t.Peers {
		out.peers[p] = names[id]
	}
	for a, ep := range t.Endpoints {
		out.endpoints[a] = fmt.Sprintf("%s rules %s in=%v eg=%v", eps[ep.ID], sets[ep.RuleSet], ep.IsolatedIngress, ep.IsolatedEgress)
	}
	for e := range t.Entries {
		out.entries[fmt.Sprintf("%s %s %s %q %d/%d", sets[e.RuleSet], e.Dir, e.Proto, names[e.Peer], e.Port, e.PortBits)] = true
	}
	for _, w := range t.Warnings {
		out.warnings[w.Policy.String()+": "+w.Msg] = true
	}
	return out
}

// diff describes how got differs from c (the expected), or "".
func (c canonicalTables) diff(got canonicalTables) string {
	var out []string
	for p, v := range c.peers {
		if got.peers[p] != v {
			out = append(out, fmt.Sprintf("peer %s: %q, want %q", p, got.peers[p], v))
		}
	}
	for p, v := range got.peers {
		if _, ok := c.peers[p]; !ok {
			out = append(out, fmt.Sprintf("peer %s: %q, want none", p, v))
		}
	}
	for a, v := range c.endpoints {
		if got.endpoints[a] != v {
			out = append(out, fmt.Sprintf("endpoint %s: %q, want %q", a, got.endpoints[a], v))
		}
	}
	for a, v := range got.endpoints {
		if _, ok := c.endpoints[a]; !ok {
			out = append(out, fmt.Sprintf("endpoint %s: %q, want none", a, v))
		}
	}
	for e := range c.entries {
		if !got.entries[e] {
			out = append(out, "missing entry "+e)
		}
	}
	for e := range got.entries {
		if !c.entries[e] {
			out = append(out, "extra entry "+e)
		}
	}
	if c.warnings != nil && got.warnings != nil {
		for w := range c.warnings {
			if !got.warnings[w] {
				out = append(out, "missing warning "+w)
			}
		}
		for w := range got.warnings {
			if !c.warnings[w] {
				out = append(out, "extra warning "+w)
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	if len(out) > 12 {
		out = append(out[:12], fmt.Sprintf("... and %d more", len(out)-12))
	}
	return fmt.Sprint(out)
}

// tablesSim is the policy maps as SyncChanges writes them.
type tablesSim struct{ t *Tables }

func newTablesSim() *tablesSim {
	return &tablesSim{&Tables{Peers: map[netip.Prefix]Identity{}, Endpoints: map[netip.Addr]Endpoint{}, Entries: map[Entry]struct{}{}}}
}

func (s *tablesSim) apply(t *Tables, ch Changes) {
	for p := range ch.Peers {
		if id, ok := t.Peers[p]; ok {
			s.t.Peers[p] = id
		} else {
			delete(s.t.Peers, p)
		}
	}
	for e := range ch.Entries {
		if _, ok := t.Entries[e]; ok {
			s.t.Entries[e] = struct{}{}
		} else {
			delete(s.t.Entries, e)
		}
	}
	for a := range ch.Endpoints {
		if ep, ok := t.Endpoints[a]; ok {
			s.t.Endpoints[a] = ep
		} else {
			delete(s.t.Endpoints, a)
		}
	}
}

// tables are what the simulated maps hold (no warnings: not in maps).
func (s *tablesSim) tables() *Tables { return s.t }

// clusterGen makes and changes a small random cluster whose objects
// collide often: few labels, overlapping ipBlocks, a deleted pod's
// addresses given to the next. (No two live pods share an address: what
// the tables say then depends on which came last.)
type clusterGen struct {
	rng   *rand.Rand
	cl    *Cluster
	freed []netip.Addr // addresses of deleted pods, given again
	next  int
}

var (
	genNamespaces = []string{"x", "y", "z"}
	genBlocks     = []string{"10.9.0.0/16", "10.9.1.0/24", "10.9.2.0/25", "192.168.0.0/24"}
)

func (g *clusterGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *clusterGen) seed() {
	for _, ns := range genNamespaces {
		g.setNamespace(ns)
	}
	for range 12 {
		g.newPod()
	}
	for i := range 6 {
		g.setPolicy(fmt.Sprintf("p%d", i))
	}
}

func (g *clusterGen) setNamespace(name string) {
	g.cl.SetNamespace(name, &model.Namespace{Name: name, Labels: map[string]string{"team": g.pick([]string{"a", "b"})}})
}

func (g *clusterGen) addr() netip.Addr {
	if len(g.freed) > 0 && g.rng.IntN(2) == 0 {
		a := g.freed[0]
		g.freed = g.freed[1:]
		return a
	}
	g.next++
	return netip.AddrFrom4([4]byte{10, 9, byte(g.next % 3), byte(g.next)})
}

func (g *clusterGen) podLabels() map[string]string {
	l := map[string]string{"app": g.pick([]string{"web", "db", "cache"})}
	if g.rng.IntN(2) == 0 {
		l["tier"] = g.pick([]string{"front", "back"})
	}
	return l
}

func (g *clusterGen) ports() []model.NamedPort {
	switch g.rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return []model.NamedPort{{Name: "http", Port: 80, Proto: model.TCP}}
	}
	return []model.NamedPort{{Name: "http", Port: 8080, Proto: model.TCP}, {Name: "dns", Port: 53, Proto: model.UDP}}
}

func (g *clusterGen) newPod() model.PodID {
	id := model.PodID{Namespace: g.pick(genNamespaces), Name: fmt.Sprintf("pod%d", g.rng.IntN(40))}
	p := &model.Pod{ID: id, Labels: g.podLabels(), Node: g.pick([]string{"n1", "n2"}), Ports: g.ports(),
		IPs: []netip.Addr{g.addr()}}
	if g.rng.IntN(4) == 0 {
		g.next++
		p.IPs = append(p.IPs, netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(g.next), 14: byte(g.next >> 8)}))
	}
	if old := g.cl.Pods[id]; old != nil {
		g.freed = append(g.freed, old.IPs...)
	}
	g.cl.SetPod(id, p)
	return id
}

func (g *clusterGen) selector(keys ...string) labels.Selector {
	switch g.rng.IntN(4) {
	case 0:
		return labels.Everything()
	case 1:
		s, _ := labels.Parse("app in (web,db)")
		return s
	}
	s, _ := labels.Parse(keys[0] + "=" + g.pick(keys[1:]))
	return s
}

func (g *clusterGen) rule(egress bool) model.PolicyRule {
	var r model.PolicyRule
	for range g.rng.IntN(3) {
		var peer model.PolicyPeer
		switch g.rng.IntN(4) {
		case 0:
			cidr := netip.MustParsePrefix(g.pick(genBlocks))
			peer.Block = &model.IPBlock{CIDR: cidr}
			if cidr.Bits() == 16 && g.rng.IntN(2) == 0 {
				peer.Block.Except = []netip.Prefix{netip.MustParsePrefix("10.9.1.0/24")}
			}
		case 1:
			peer.Pods = labels.Everything()
			peer.Namespaces = g.selector("team", "a", "b")
		case 2:
			peer.Pods = g.selector("app", "web", "db", "cache")
			peer.Namespaces = g.selector("team", "a", "b")
		default:
			peer.Pods = g.selector("app", "web", "db", "cache")
		}
		r.Peers = append(r.Peers, peer)
	}
	for range g.rng.IntN(3) {
		switch g.rng.IntN(4) {
		case 0:
			r.Ports = append(r.Ports, model.PolicyPort{Proto: model.TCP, Port: 80})
		case 1:
			r.Ports = append(r.Ports, model.PolicyPort{Proto: model.TCP, Port: 1000, EndPort: 1010})
		case 2:
			r.Ports = append(r.Ports, model.PolicyPort{Proto: model.TCP, Name: "http"})
		default:
			r.Ports = append(r.Ports, model.PolicyPort{Proto: model.UDP, Name: "dns"})
		}
	}
	return r
}

func (g *clusterGen) setPolicy(name string) model.PolicyID {
	id := model.PolicyID{Namespace: g.pick(genNamespaces), Name: name}
	p := &model.Policy{ID: id, Pods: g.selector("app", "web", "db", "cache")}
	p.IsolatesIngress = g.rng.IntN(3) > 0
	p.IsolatesEgress = g.rng.IntN(2) == 0
	if p.IsolatesIngress {
		for range g.rng.IntN(3) {
			p.Ingress = append(p.Ingress, g.rule(false))
		}
	}
	if p.IsolatesEgress {
		for range g.rng.IntN(3) {
			p.Egress = append(p.Egress, g.rule(true))
		}
	}
	g.cl.SetPolicy(id, p)
	return id
}

// mutate makes n changes and returns what they changed, by name.
func (g *clusterGen) mutate(n int) (pods []model.PodID, nss []string, pols []model.PolicyID) {
	for range n {
		switch k := g.rng.IntN(10); {
		case k < 2:
			pods = append(pods, g.newPod())
		case k < 5:
			ids := g.podIDs()
			if len(ids) == 0 {
				continue
			}
			id := ids[g.rng.IntN(len(ids))]
			p := *g.cl.Pods[id]
			switch g.rng.IntN(5) {
			case 0:
				g.freed = append(g.freed, p.IPs...)
				g.cl.SetPod(id, nil)
			case 1:
				p.Ports = g.ports()
				g.cl.SetPod(id, &p)
			case 2:
				p.HostNetwork = !p.HostNetwork
				g.cl.SetPod(id, &p)
			default:
				p.Labels = g.podLabels()
				g.cl.SetPod(id, &p)
			}
			pods = append(pods, id)
		case k < 6:
			name := g.pick(append(genNamespaces, "w"))
			if g.rng.IntN(4) == 0 {
				g.cl.SetNamespace(name, nil)
			} else {
				g.setNamespace(name)
			}
			nss = append(nss, name)
		case k < 9:
			pols = append(pols, g.setPolicy(fmt.Sprintf("p%d", g.rng.IntN(8))))
		default:
			ids := make([]model.PolicyID, 0, len(g.cl.Policies))
			for id := range g.cl.Policies {
				ids = append(ids, id)
			}
			if len(ids) == 0 {
				continue
			}
			slices.SortFunc(ids, comparePolicyIDs)
			id := ids[g.rng.IntN(len(ids))]
			g.cl.SetPolicy(id, nil)
			pols = append(pols, id)
		}
	}
	return pods, nss, pols
}

func (g *clusterGen) podIDs() []model.PodID {
	ids := make([]model.PodID, 0, len(g.cl.Pods))
	for id := range g.cl.Pods {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, comparePodIDs)
	return ids
}
