package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/netcube/netcube/pkg/datapath"
)

// quarantineRuleSet is the rule set of a quarantined endpoint: no entry
// is ever filed under it (below firstRuleSet, so never a compiled rule
// set's number; far above the endpoint numbers an agent before rule sets
// filed entries under), so an endpoint isolated both ways under it is
// allowed nothing but what the datapath admits to every pod (its node's
// own addresses). The sweep deletes anything filed under it.
const quarantineRuleSet = firstRuleSet - 1

// quarantinedEndpoint is the pol_endpoints value of a pod whose policy
// could not be written: its number (its drops are counted as its own),
// isolated both ways, no rule.
func quarantinedEndpoint(id uint32) datapath.PolicyEndpoint {
	return datapath.PolicyEndpoint{Id: id, RuleSet: quarantineRuleSet,
		Flags: datapath.IsolatedIngress | datapath.IsolatedEgress}
}

// SyncError is a sync that wrote what it could: the keys it could not
// write, and the endpoints they concern, which it quarantined.
type SyncError struct {
	// Hosts are the addresses whose identity (pol_hosts) was not written.
	Hosts map[netip.Addr]struct{}
	// RuleSets are the rule sets with an entry not written.
	RuleSets map[uint32]struct{}
	// Peers: an IP block region (pol_peers) was not written, so any
	// address may be judged as a wider region: every endpoint is
	// concerned.
	Peers bool
	// Quarantined are the endpoints written isolated with no rule: those
	// of a pod with an identity, a rule set entry or an endpoint not
	// written.
	Quarantined map[netip.Addr]struct{}
	// Open are the endpoints whose entry could not be written at all,
	// not even quarantined (pol_endpoints full): the datapath judges them
	// by what the map held before (a new one: no policy).
	Open map[netip.Addr]struct{}
	errs []error
}

func (e *SyncError) host(a netip.Addr, err error) { e.Hosts = add(e.Hosts, a); e.cause(err) }
func (e *SyncError) peer(err error)               { e.Peers = true; e.cause(err) }
func (e *SyncError) ruleSet(rs uint32, err error) {
	e.RuleSets = add(e.RuleSets, rs)
	e.cause(err)
}

func (e *SyncError) endpoint(a netip.Addr, err error) {
	delete(e.Quarantined, a)
	e.Open = add(e.Open, a)
	e.cause(err)
}

func (e *SyncError) quarantine(a netip.Addr) { e.Quarantined = add(e.Quarantined, a) }

// failed: some identity or entry was not written.
func (e *SyncError) failed() bool {
	return len(e.Hosts)+len(e.RuleSets)+len(e.Open) > 0 || e.Peers
}

// cause keeps the failures' distinct messages (a full map fails each of
// its new keys alike).
func (e *SyncError) cause(err error) {
	for _, have := range e.errs {
		if have.Error() == err.Error() {
			return
		}
	}
	e.errs = append(e.errs, err)
}

func (e *SyncError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy maps not fully written (%d identities, %d rule sets", len(e.Hosts), len(e.RuleSets))
	if e.Peers {
		b.WriteString(", IP block regions")
	}
	fmt.Fprintf(&b, " not written; %d pod addresses quarantined, %d left as they were): %v",
		len(e.Quarantined), len(e.Open), errors.Join(e.errs...))
	return strings.ReplaceAll(b.String(), "\n", "; ")
}

func (e *SyncError) Unwrap() []error { return e.errs }

// quarantine rewrites, in w's endpoint batch, every endpoint the keys
// not written concern as quarantined: one whose rule set lost an entry,
// or whose own address lost its identity (its packets would be judged
// as another's), or every one if an IP block region was lost. A pod's
// addresses go together (one endpoint number).
func (w *syncBatches) quarantine(t *Tables, se *SyncError) {
	concerned := map[uint32]bool{}
	for a, ep := range t.Endpoints {
		_, rs := se.RuleSets[ep.RuleSet]
		_, host := se.Hosts[a]
		if se.Peers || rs || host {
			concerned[ep.ID] = true
		}
	}
	if len(concerned) == 0 {
		return
	}
	at := make(map[datapath.Addr]int, len(w.endpoints))
	for i, k := range w.endpoints {
		at[k] = i
	}
	for a, ep := range t.Endpoints {
		if !concerned[ep.ID] {
			continue
		}
		k, v := datapath.AddrFrom(a), quarantinedEndpoint(ep.ID)
		if i, ok := at[k]; ok {
			w.endpointVals[i] = v
		} else {
			w.endpoints = append(w.endpoints, k)
			w.endpointVals = append(w.endpointVals, v)
		}
		se.quarantine(a)
	}
}
