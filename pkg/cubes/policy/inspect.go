package policy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// Applied is what the datapath enforces for a pod's address, read from
// the policy maps (netcube policy get; the agent may be down).
type Applied struct {
	Address netip.Addr `json:"address"`
	// Selected: some NetworkPolicy selects the pod; without, everything
	// passes (and nothing below applies).
	Selected        bool   `json:"selected"`
	Endpoint        uint32 `json:"endpoint,omitempty"`
	RuleSet         uint32 `json:"rule_set,omitempty"` // its rules' number in the entries (shared by pods alike)
	IsolatedIngress bool   `json:"isolated_ingress"`
	IsolatedEgress  bool   `json:"isolated_egress"`
	// Rules allow; in an isolated direction, anything no rule allows is
	// dropped.
	Rules []Rule `json:"rules"`
	// Peers are the addresses of each identity the rules name.
	Peers map[uint32][]netip.Prefix `json:"peers,omitempty"`
}

// Rule is one policy entry: traffic of a direction, from or to a peer
// identity, of a protocol, on a port range.
type Rule struct {
	Direction string `json:"direction"` // ingress or egress
	Peer      uint32 `json:"peer"`      // identity; 0: any peer
	Proto     string `json:"proto"`     // TCP, UDP, SCTP; "any": every protocol and port
	PortFrom  uint16 `json:"port_from,omitempty"`
	PortTo    uint16 `json:"port_to,omitempty"`
	// Verdict: allow, or deny (only a ClusterNetworkPolicy's tier set has
	// entries that deny).
	Verdict string `json:"verdict"`
}

// PeerName names the reserved identities.
func PeerName(id uint32) string {
	switch Identity(id) {
	case AnyPeer:
		return "any peer"
	case Host:
		return "this node"
	case World:
		return "outside the pods and every ipBlock (world)"
	}
	return fmt.Sprintf("identity %d", id)
}

// Inspect reads what the maps enforce for addr.
func Inspect(maps *cube.Maps, addr netip.Addr) (Applied, error) {
	a := Applied{Address: addr, Rules: []Rule{}}
	var ep datapath.PolicyEndpoint
	if err := maps.Map(MapEndpoints).Lookup(datapath.AddrFrom(addr), &ep); err != nil {
		return a, nil // no policy selects it
	}
	a.Selected, a.Endpoint, a.RuleSet = true, ep.Id, ep.RuleSet
	a.IsolatedIngress = ep.Flags&datapath.IsolatedIngress != 0
	a.IsolatedEgress = ep.Flags&datapath.IsolatedEgress != 0
	named := map[uint32]bool{}
	var k datapath.PolicyEntryKey
	var v datapath.PolicyEntry
	for _, table := range []string{MapRules, MapEntries} {
		it := maps.Map(table).Iterate()
		for it.Next(&k, &v) {
			if k.RuleSet != ep.RuleSet {
				continue
			}
			r := Rule{Direction: "ingress", Peer: uint32(k.Peer), Proto: "any", Verdict: "allow"}
			if v.Allow == 0 {
				r.Verdict = "deny"
			}
			if datapath.PolicyDir(k.Dir) == datapath.PolicyEgress {
				r.Direction = "egress"
			}
			if k.Proto != 0 {
				r.Proto = map[uint8]string{6: "TCP", 17: "UDP", 132: "SCTP"}[k.Proto]
				bits := int(k.Prefixlen) - int(datapath.PolicyEntryBits)
				port := datapath.HostPort(k.Port)
				mask := uint16(0xffff) << (16 - bits)
				if bits == 0 {
					mask = 0
				}
				r.PortFrom, r.PortTo = port&mask, port|^mask
			}
			a.Rules = append(a.Rules, r)
			named[r.Peer] = true
		}
		if err := it.Err(); err != nil {
			return a, err
		}
	}
	slices.SortFunc(a.Rules, func(x, y Rule) int {
		return cmp.Or(strings.Compare(x.Direction, y.Direction), cmp.Compare(x.Peer, y.Peer), strings.Compare(x.Proto, y.Proto), cmp.Compare(x.PortFrom, y.PortFrom))
	})
	name := func(id datapath.Identity, p netip.Prefix) {
		if named[uint32(id)] {
			if a.Peers == nil {
				a.Peers = map[uint32][]netip.Prefix{}
			}
			a.Peers[uint32(id)] = append(a.Peers[uint32(id)], p)
		}
	}
	var hk datapath.Addr
	var pv datapath.PolicyPeer
	hit := maps.Map(MapHosts).Iterate()
	for hit.Next(&hk, &pv) {
		ip := hk.IP()
		name(pv.Identity, netip.PrefixFrom(ip, ip.BitLen()))
	}
	if err := hit.Err(); err != nil {
		return a, err
	}
	var pk datapath.Prefix
	pit := maps.Map(MapPeers).Iterate()
	for pit.Next(&pk, &pv) {
		name(pv.Identity, pk.Prefix())
	}
	return a, pit.Err()
}

// IdentitiesPath is where the agent's local API says what each identity
// stands for: {"257": "pods in default with app=client,pod=n1p1", ...}.
const IdentitiesPath = "/v1/identities"

func (r *Reconciler) identitiesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		out := make(map[string]string, len(r.compiler.ids.ids))
		for key, id := range r.compiler.ids.ids {
			out[fmt.Sprint(uint32(id))] = describeClass(key)
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// describeClass renders an identity's class key (Compiler.Compile) for
// people.
func describeClass(key string) string {
	parts := strings.Split(key, "\x00")
	switch {
	case len(parts) >= 2 && parts[0] == "pod":
		var labels []string
		sig := ""
		for _, p := range parts[2:] {
			if strings.Contains(p, "=") {
				labels = append(labels, p)
			} else if strings.TrimSpace(p) != "" {
				sig = strings.TrimSpace(p)
			}
		}
		s := "pods in " + parts[1]
		if len(labels) > 0 {
			s += " with " + strings.Join(labels, ",")
		}
		if sig != "" {
			s += ", in blocks " + sig
		}
		return s
	case len(parts) >= 1 && parts[0] == "world":
		if len(parts) > 1 && strings.TrimSpace(parts[1]) != "" {
			return "outside the pods, in blocks " + strings.TrimSpace(parts[1])
		}
		return "outside the pods"
	}
	return key
}
