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
// superset: the caller still asks each policy (peersMatch, selects).
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
	for _, rules := range [][]model.PolicyRule{pol.Ingress, pol.Egress} {
		for _, r := range rules {
			for _, peer := range r.Peers {
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
				x.addPeer(ps, peer, delta)
			}
		}
	}
}

func (x *selectorIndex) addPeer(ps *policyState, peer model.PolicyPeer, delta int) {
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
}

// peerPolicies calls fn with each policy holding a peer that may match
// class k (a pod class: in namespace k.ns, labelled k.labels; nsLabels
// are that namespace's labels), once per policy.
func (x *selectorIndex) peerPolicies(k *class, nsLabels map[string]string, fn func(*policyState)) {
	if x.seen == nil {
		x.seen = map[*policyState]struct{}{}
	}
	seen := x.seen
	defer clear(seen)
	each := func(users map[*policyState]int) {
		for ps := range users {
			if _, ok := seen[ps]; !ok {
				seen[ps] = struct{}{}
				fn(ps)
			}
		}
	}
	podLabels, nsSet := labelSet(k.labels), labelSet(nsLabels)
	for s := range x.peersByNS[k.ns] {
		if s.pods == nil || s.pods.Matches(podLabels) {
			each(s.users)
		}
	}
	for s := range x.widePeers {
		if s.nsSel.Matches(nsSet) && (s.pods == nil || s.pods.Matches(podLabels)) {
			each(s.users)
		}
	}
	for _, b := range k.sig {
		each(x.blockPeers[b])
	}
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
