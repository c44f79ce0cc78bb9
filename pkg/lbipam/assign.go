package lbipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/model"
)

// Result is what Assign decided.
type Result struct {
	// Status: the addresses each Service's status should hold, for the
	// Services whose status changes (empty: cleared).
	Status map[model.ServiceID][]netip.Addr
	// Services and Pools: why a Service got no address (nothing new was
	// assigned to it), why a pool is not used.
	Services map[model.ServiceID]string
	Pools    map[string]string
}

// Assign gives each Service that wants LoadBalancer IPs one address per
// family from the pools that select it, in this order: an address a
// Service already has stays while a pool that selects it holds it (and it
// is the one requested, if any); older Services, then older pools, are
// served first. A Service whose request cannot be met (the address is
// in no pool for it, or taken; every pool of a family it needs is full
// or none selects it) gets nothing new and a reason, and nothing else
// moves. Of two pools that overlap, the older is used and the newer
// reported. A Service that no longer wants addresses (another type) has
// its status cleared.
func Assign(pools []*model.LBPool, svcs []*model.LBService) Result {
	res := Result{Status: map[model.ServiceID][]netip.Addr{}, Services: map[model.ServiceID]string{}, Pools: map[string]string{}}
	pools = slices.SortedFunc(slices.Values(pools), func(a, b *model.LBPool) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), strings.Compare(a.Name, b.Name))
	})
	svcs = slices.SortedFunc(slices.Values(svcs), func(a, b *model.LBService) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), strings.Compare(a.ID.String(), b.ID.String()))
	})
	usable := usablePools(pools, res.Pools)

	used := map[netip.Addr]model.ServiceID{}
	kept := map[model.ServiceID][]netip.Addr{}
	for _, s := range svcs {
		if !s.Wants {
			continue
		}
		if s.Hold {
			kept[s.ID] = slices.Clone(s.Current)
			for _, a := range s.Current {
				used[a] = s.ID
			}
			continue
		}
		for _, a := range s.Current {
			_, taken := used[a]
			ok := !taken && slices.Contains(s.Families, model.FamilyOf(a)) && !hasFamily(kept[s.ID], model.FamilyOf(a)) &&
				(len(s.Requested) == 0 || slices.Contains(s.Requested, a)) && inPoolFor(pools, s, a)
			if ok {
				kept[s.ID] = append(kept[s.ID], a)
				used[a] = s.ID
			}
		}
	}
	for _, s := range svcs {
		want := kept[s.ID]
		if s.Wants && !s.Hold {
			added, why := fill(usable, s, want, used)
			if why != "" {
				res.Services[s.ID] = why
			} else {
				for _, a := range added {
					used[a] = s.ID
				}
				want = append(want, added...)
			}
		}
		want = inFamilyOrder(want, s.Families)
		if !slices.Equal(want, s.Current) && (s.Wants || s.Ours) {
			res.Status[s.ID] = want
		}
	}
	return res
}

// usablePools are the pools new addresses come from: those with
// addresses, and of two that overlap the first (older); why records the
// others.
func usablePools(pools []*model.LBPool, why map[string]string) []*model.LBPool {
	var out []*model.LBPool
next:
	for _, p := range pools {
		if len(p.CIDRs) == 0 {
			why[p.Name] = "spec.cidrs: no CIDR netcube can read; the pool gives no address"
			continue
		}
		for i, c := range p.CIDRs {
			for _, q := range out {
				for _, d := range q.CIDRs {
					if c.Overlaps(d) {
						why[p.Name] = fmt.Sprintf("spec.cidrs[%d]: %s overlaps %s of NetworkLoadBalancerPool %s (older, or first by name), which is used; this pool gives no address until the overlap is removed", i, c, d, q.Name)
						continue next
					}
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// fill picks the addresses s lacks (one per family it has none of): the
// ones requested, else the first free ones of the pools that select it.
// It returns them, or why it can give none.
func fill(pools []*model.LBPool, s *model.LBService, have []netip.Addr, used map[netip.Addr]model.ServiceID) ([]netip.Addr, string) {
	var out []netip.Addr
	for _, r := range s.Requested {
		if !slices.Contains(s.Families, model.FamilyOf(r)) {
			return nil, fmt.Sprintf("the requested address %s is not of the Service's IP families (spec.ipFamilies)", r)
		}
	}
	taken := func(a netip.Addr) bool { _, t := used[a]; return t || slices.Contains(out, a) }
	for _, fam := range s.Families {
		if hasFamily(have, fam) {
			continue
		}
		if r, ok := requestedOf(s, fam); ok {
			if owner, t := used[r]; t {
				return nil, fmt.Sprintf("the requested address %s is taken by Service %s", r, owner)
			}
			if !inPoolFor(pools, s, r) {
				return nil, fmt.Sprintf("the requested address %s is in no NetworkLoadBalancerPool that selects this Service", r)
			}
			out = append(out, r)
			continue
		}
		if len(s.Requested) > 0 {
			continue // asked for some families only: those
		}
		var names []string
		found := false
		for _, p := range pools {
			if !p.Services.Matches(s.Labels) || !poolHasFamily(p, fam) {
				continue
			}
			names = append(names, p.Name)
			if a, ok := free(p, fam, taken); ok {
				out = append(out, a)
				found = true
				break
			}
		}
		switch {
		case found:
		case len(names) == 0:
			return nil, fmt.Sprintf("no NetworkLoadBalancerPool with IPv%d addresses selects this Service", fam)
		default:
			return nil, fmt.Sprintf("every IPv%d address of NetworkLoadBalancerPool %s is assigned (pool exhausted)", fam, strings.Join(names, ", "))
		}
	}
	return out, ""
}

func requestedOf(s *model.LBService, fam model.Family) (netip.Addr, bool) {
	for _, r := range s.Requested {
		if model.FamilyOf(r) == fam {
			return r, true
		}
	}
	return netip.Addr{}, false
}

func hasFamily(as []netip.Addr, fam model.Family) bool {
	return slices.ContainsFunc(as, func(a netip.Addr) bool { return model.FamilyOf(a) == fam })
}

func poolHasFamily(p *model.LBPool, fam model.Family) bool {
	return slices.ContainsFunc(p.CIDRs, func(c netip.Prefix) bool { return model.FamilyOf(c.Addr()) == fam })
}

// inPoolFor says whether a is in a pool that selects s.
func inPoolFor(pools []*model.LBPool, s *model.LBService, a netip.Addr) bool {
	for _, p := range pools {
		if p.Services.Matches(s.Labels) && slices.ContainsFunc(p.CIDRs, func(c netip.Prefix) bool { return c.Contains(a) }) {
			return true
		}
	}
	return false
}

// scanLimit bounds the search of one CIDR (a huge IPv6 prefix is never
// full; a /16 of IPv4 is searched whole).
const scanLimit = 1 << 20

// free is p's first address of family fam not taken. An IPv4 CIDR's first
// and last addresses (network, broadcast) are not given, but for a /31
// or /32.
func free(p *model.LBPool, fam model.Family, taken func(netip.Addr) bool) (netip.Addr, bool) {
	for _, c := range p.CIDRs {
		if model.FamilyOf(c.Addr()) != fam {
			continue
		}
		first, last := c.Addr(), lastOf(c)
		if fam == model.IPv4 && c.Bits() <= 30 {
			first, last = first.Next(), last.Prev()
		}
		for a, n := first, 0; a.IsValid() && a.Compare(last) <= 0 && n < scanLimit; a, n = a.Next(), n+1 {
			if !taken(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// lastOf is c's last address.
func lastOf(c netip.Prefix) netip.Addr {
	b := c.Addr().AsSlice()
	for i := c.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// inFamilyOrder sorts as by the order of families.
func inFamilyOrder(as []netip.Addr, families []model.Family) []netip.Addr {
	if len(as) == 0 {
		return nil
	}
	out := slices.Clone(as)
	slices.SortStableFunc(out, func(a, b netip.Addr) int {
		return cmp.Compare(slices.Index(families, model.FamilyOf(a)), slices.Index(families, model.FamilyOf(b)))
	})
	return out
}
