package lbipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

func pool(name string, created int64, sel string, cidrs ...string) *model.LBPool {
	p := &model.LBPool{Name: name, Created: created, Services: labels.Everything()}
	if sel != "" {
		p.Services = labels.SelectorFromSet(labels.Set{"pool": sel})
	}
	for _, c := range cidrs {
		p.CIDRs = append(p.CIDRs, netip.MustParsePrefix(c))
	}
	return p
}

// svc is a LoadBalancer Service; opts: "v4", "v6", "dual" (families),
// "pool=x" (label), "ask=ip" (requested), "has=ip" (status), "type=ClusterIP",
// "class=other", "hold".
func svc(name string, created int64, opts ...string) *model.LBService {
	s := &model.LBService{ID: model.ServiceID{Namespace: "ns", Name: name}, Created: created, Wants: true, Ours: true,
		Families: []model.Family{model.IPv4}, Labels: labels.Set{}}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "v6":
			s.Families = []model.Family{model.IPv6}
		case "dual":
			s.Families = []model.Family{model.IPv4, model.IPv6}
		case "pool":
			s.Labels["pool"] = v
		case "ask":
			s.Requested = append(s.Requested, netip.MustParseAddr(v))
		case "has":
			s.Current = append(s.Current, netip.MustParseAddr(v))
		case "type":
			s.Wants = false
		case "class":
			s.Wants, s.Ours = false, false
		case "hold":
			s.Hold = true
		}
	}
	return s
}

func show(r Result) string {
	var lines []string
	for id, as := range r.Status {
		lines = append(lines, fmt.Sprintf("%s=%v", id.Name, as))
	}
	for id, why := range r.Services {
		lines = append(lines, fmt.Sprintf("%s!%s", id.Name, why))
	}
	for p, why := range r.Pools {
		lines = append(lines, fmt.Sprintf("pool %s!%s", p, why))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestAssign: the table of what a user meets: addresses given in order,
// kept across runs, requested ones honoured or refused with the reason,
// exhaustion and overlap reported with nothing moved, selectors, dual
// stack, and addresses taken back when a Service stops being a
// LoadBalancer (but never another class's).
func TestAssign(t *testing.T) {
	v4 := pool("v4", 1, "", "192.0.2.0/30") // two usable: .1 and .2
	dual := pool("dual", 1, "", "198.51.100.8/31", "2001:db8::/126")
	for _, c := range []struct {
		name  string
		pools []*model.LBPool
		svcs  []*model.LBService
		want  []string // sorted lines of show()
	}{
		{"first free addresses, older Service first; the network and broadcast addresses are never given",
			[]*model.LBPool{v4}, []*model.LBService{svc("b", 2), svc("a", 1)},
			[]string{"a=[192.0.2.1]", "b=[192.0.2.2]"}},
		{"an address held stays, and a newer Service takes the next",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "has=192.0.2.2"), svc("b", 2)},
			[]string{"b=[192.0.2.1]"}},
		{"pool exhausted: the newest Service gets nothing and the reason; nothing else moves",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "has=192.0.2.1"), svc("b", 2, "has=192.0.2.2"), svc("c", 3)},
			[]string{"c!every IPv4 address of NetworkLoadBalancerPool v4 is assigned (pool exhausted)"}},
		{"a requested address is given",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "ask=192.0.2.2")},
			[]string{"a=[192.0.2.2]"}},
		{"a requested address outside every pool: nothing assigned",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "ask=203.0.113.9")},
			[]string{"a!the requested address 203.0.113.9 is in no NetworkLoadBalancerPool that selects this Service"}},
		{"a requested address taken by an older Service: nothing assigned, the holder keeps it",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "has=192.0.2.1"), svc("b", 2, "ask=192.0.2.1")},
			[]string{"b!the requested address 192.0.2.1 is taken by Service ns/a"}},
		{"a held address that is not the requested one is replaced by it",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "has=192.0.2.1", "ask=192.0.2.2")},
			[]string{"a=[192.0.2.2]"}},
		{"a pool selecting by label serves only its Services",
			[]*model.LBPool{pool("gold", 1, "gold", "203.0.113.0/30"), v4},
			[]*model.LBService{svc("a", 1, "pool=gold"), svc("b", 2)},
			[]string{"a=[203.0.113.1]", "b=[192.0.2.1]"}},
		{"no pool of the family selects the Service",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "v6")},
			[]string{"a!no NetworkLoadBalancerPool with IPv6 addresses selects this Service"}},
		{"dual stack: one address per family, in spec.ipFamilies order; a /31 gives both its addresses",
			[]*model.LBPool{dual}, []*model.LBService{svc("a", 1, "dual"), svc("b", 2, "dual")},
			[]string{"a=[198.51.100.8 2001:db8::]", "b=[198.51.100.9 2001:db8::1]"}},
		{"overlapping pools: the older is used, the newer reported; its Services are not moved",
			[]*model.LBPool{v4, pool("late", 2, "", "192.0.2.0/24")},
			[]*model.LBService{svc("a", 1, "has=192.0.2.1"), svc("b", 2)},
			[]string{"b=[192.0.2.2]", "pool late!spec.cidrs[0]: 192.0.2.0/24 overlaps 192.0.2.0/30 of NetworkLoadBalancerPool v4 (older, or first by name), which is used; this pool gives no address until the overlap is removed"}},
		{"a Service no longer of type LoadBalancer gives its address back; another class's is never touched",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "type=ClusterIP", "has=192.0.2.1"), svc("b", 2, "class=other", "has=192.0.2.2"), svc("c", 3)},
			[]string{"a=[]", "c=[192.0.2.1]"}},
		{"a pool deleted: its addresses are taken back, others given",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "has=203.0.113.1")},
			[]string{"a=[192.0.2.1]"}},
		{"an unreadable request holds what the Service has, assigning nothing",
			[]*model.LBPool{v4}, []*model.LBService{svc("a", 1, "hold", "has=203.0.113.1"), svc("b", 2, "hold")},
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := show(Assign(c.pools, c.svcs))
			if want := strings.Join(c.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}
