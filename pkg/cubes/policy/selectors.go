package policy

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// selectorIndex files the policies by their distinct selectors, so that
// a change finds the policies it touches by matching each distinct
// selector once instead of every policy: 10,000 policies hold a few
// hundred distinct selectors, most often far fewer (Cilium's
// SelectorCache rests on the same observation). What it returns is a
// superset: the caller still asks each policy which of its rules match
// (peersHold, by the selectors matched; selects).
//   - peers: each distinct pod-selecting peer, by the namespace it looks
//     in (its policy's) or, with a namespace selector, among the wide
//     ones; ipBlock peers by their CIDR (a class is in a block only if
//     the CIDR is in its signature).
//   - subjects: each namespace's distinct policy pod selectors (whom a
//     policy applies to).
type selectorIndex struct {
	peers      map[string]*selectorUsers // by selectorKey
	peersByNS  map[string]map[*selectorUsers]struct{}
	widePeers  map[*selectorUsers]struct{}
	blockPeers map[netip.Prefix]map[*policyState]int
	subjects   map[string]map[string]*selectorUsers // namespace, selectorKey
	seen       map[*policyState]struct{}            // peerPolicies', kept from call to call
	matched    map[*selectorUsers]struct{}          // the peer selectors matching peerPolicies' class
}

// ruleSels are the peer selectors of one rule of a policy, in the order
// of its peers (nil for an ipBlock peer): a rule's match against a class
// is then a lookup of the selectors peerPolicies matched, not labels
// matched again for each of hundreds of policies.
type ruleSels struct {
	rule *model.PolicyRule
	sels []*selectorUsers
}

// selectorUsers is one distinct selector and the policies holding it
// (counted: a policy may name it more than once). Policies are filed by
// their compiled state, not their ID: a new identity asks a thousand
// policies at 10,000, and a pointer is hashed without reading the two
// strings of an ID, nor looked up again to reach the state.
type selectorUsers struct {
	key   string
	ns    string          // the namespace it looks in, when nsSel is nil
	nsSel labels.Selector // nil: ns alone
	pods  labels.Selector // nil: every pod
	users map[*policyState]int
}

func newSelectorIndex() *selectorIndex {
	return &selectorIndex{peers: map[string]*selectorUsers{}, peersByNS: map[string]map[*selectorUsers]struct{}{},
		widePeers: map[*selectorUsers]struct{}{}, blockPeers: map[netip.Prefix]map[*policyState]int{},
		subjects: map[string]map[string]*selectorUsers{}}
}

// add files policy ps (delta 1) or takes it out (delta -1).
func (x *selectorIndex) add(ps *policyState, delta int) {
	pol := ps.pol
	id := pol.ID
	subjects := x.subjects[id.Namespace]
	if subjects == nil {
		subjects = map[string]*selectorUsers{}
		x.subjects[id.Namespace] = subjects
	}
	key := selectorKey(pol.Pods)
	s := subjects[key]
	if s == nil {
		s = &selectorUsers{key: key, ns: id.Namespace, pods: pol.Pods, users: map[*policyState]int{}}
		subjects[key] = s
	}
	if count(s.users, ps, delta) {
		if delete(subjects, key); len(subjects) == 0 {
			delete(x.subjects, id.Namespace)
		}
	}
	if delta > 0 {
		ps.ruleSels = ps.ruleSels[:0]
	}
	for _, rules := range [][]model.PolicyRule{pol.Ingress, pol.Egress} {
		for i := range rules {
			r := &rules[i]
			var sels []*selectorUsers
			if delta > 0 && len(r.Peers) > 0 {
				sels = make([]*selectorUsers, len(r.Peers))
				ps.ruleSels = append(ps.ruleSels, ruleSels{r, sels})
			}
			for j, peer := range r.Peers {
				if peer.Block != nil {
					users := x.blockPeers[peer.Block.CIDR]
					if users == nil {
						users = map[*policyState]int{}
						x.blockPeers[peer.Block.CIDR] = users
					}
					if count(users, ps, delta) {
						delete(x.blockPeers, peer.Block.CIDR)
					}
					continue
				}
				if s := x.addPeer(ps, peer, delta); sels != nil {
					sels[j] = s
				}
			}
		}
	}
}

// addPeer files policy ps as a user of peer's selector (delta 1), or
// takes it out (-1), and returns the selector's record.
func (x *selectorIndex) addPeer(ps *policyState, peer model.PolicyPeer, delta int) *selectorUsers {
	id := ps.pol.ID
	key := selectorKey(peer.Pods)
	if peer.Namespaces != nil {
		key = "namespaces " + selectorKey(peer.Namespaces) + " pods " + key
	} else {
		key = "namespace " + id.Namespace + " pods " + key
	}
	s := x.peers[key]
	if s == nil {
		s = &selectorUsers{key: key, ns: id.Namespace, nsSel: peer.Namespaces, pods: peer.Pods, users: map[*policyState]int{}}
		x.peers[key] = s
		if s.nsSel != nil {
			x.widePeers[s] = struct{}{}
		} else {
			set(x.peersByNS, s.ns, s)
		}
	}
	if count(s.users, ps, delta) {
		delete(x.peers, key)
		if s.nsSel != nil {
			delete(x.widePeers, s)
		} else {
			unset(x.peersByNS, s.ns, s)
		}
	}
	return s
}

// peerPolicies calls fn with each policy holding a peer that may match
// class k (a pod class: in namespace k.ns, labelled k.labels; nsLabels
// are that namespace's labels), once per policy. Inside fn, peersHold
// says which of the policy's rules match k.
func (x *selectorIndex) peerPolicies(k *class, nsLabels map[string]string, fn func(*policyState)) {
	if x.seen == nil {
		x.seen, x.matched = map[*policyState]struct{}{}, map[*selectorUsers]struct{}{}
	}
	seen, matched := x.seen, x.matched
	defer clear(seen)
	defer clear(matched)
	// Every selector matching k first, then their users: a policy's rule
	// may name several.
	podLabels, nsSet := labelSet(k.labels), labelSet(nsLabels)
	for s := range x.peersByNS[k.ns] {
		if s.pods == nil || s.pods.Matches(podLabels) {
			matched[s] = struct{}{}
		}
	}
	for s := range x.widePeers {
		if s.nsSel.Matches(nsSet) && (s.pods == nil || s.pods.Matches(podLabels)) {
			matched[s] = struct{}{}
		}
	}
	each := func(users map[*policyState]int) {
		for ps := range users {
			if _, ok := seen[ps]; !ok {
				seen[ps] = struct{}{}
				fn(ps)
			}
		}
	}
	for s := range matched {
		each(s.users)
	}
	for _, b := range k.sig {
		each(x.blockPeers[b])
	}
}

// peersHold says whether some peer of rule r of policy ps matches class k:
// an ipBlock holding it, or a pod selector peerPolicies matched for k
// (only a class with pods: members). Only inside peerPolicies' fn. It
// answers as peersMatch does, without matching labels again.
func (x *selectorIndex) peersHold(ps *policyState, r *model.PolicyRule, k *class) bool {
	var sels []*selectorUsers
	for _, rs := range ps.ruleSels {
		if rs.rule == r {
			sels = rs.sels
			break
		}
	}
	for i := range r.Peers {
		if b := r.Peers[i].Block; b != nil {
			if k.inBlock(b) {
				return true
			}
			continue
		}
		if _, ok := x.matched[sels[i]]; ok && k.members != nil {
			return true
		}
	}
	return false
}

// subjectPolicies calls fn with each policy of namespace ns whose pod
// selector matches one of the label sets, once per policy.
func (x *selectorIndex) subjectPolicies(ns string, sets []map[string]string, fn func(*policyState)) {
	for _, s := range x.subjects[ns] {
		for _, l := range sets {
			if s.pods == nil || s.pods.Matches(labelSet(l)) {
				for ps := range s.users {
					fn(ps)
				}
				break
			}
		}
	}
}

// selectorKey names a selector by what it selects (labels' canonical
// form: requirements sorted).
func selectorKey(s labels.Selector) string {
	if s == nil {
		return "<every>"
	}
	return s.String()
}

// count adds delta to m[ps] and says whether m is left empty.
func count(m map[*policyState]int, ps *policyState, delta int) bool {
	if m[ps] += delta; m[ps] <= 0 {
		delete(m, ps)
	}
	return len(m) == 0
}
