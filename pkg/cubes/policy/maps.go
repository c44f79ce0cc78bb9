package policy

import (
	"iter"
	"net/netip"
	"sync"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// The policy cube's maps (bpf/cubes/policy/policy_maps.h).
const (
	MapHosts     = "pol_hosts"     // the identity cache's single addresses (pods', this node's)
	MapPeers     = "pol_peers"     // the identity cache's prefixes (IP block regions)
	MapEndpoints = "pol_endpoints" // this node's pods some policy selects
	MapRules     = "pol_rules"     // what each may send and receive: one port, or every protocol (exact)
	MapEntries   = "pol_entries"   // what each may send and receive: port ranges (longest prefix)
	MapRevision  = "pol_revision"  // the rules' revision (verdicts in conntrack hold theirs)
	MapScratch   = "pol_scratch"   // the datapath's room for a conntrack key and entry
	MapDrops     = "pol_drops"     // drops per endpoint and reason (the datapath's)
)

// Changes are the keys of the tables that changed: each is written as
// the tables hold it now (put), or removed if they do not hold it.
type Changes struct {
	Peers     map[netip.Prefix]struct{}
	Entries   map[Entry]struct{}
	Endpoints map[netip.Addr]struct{}
}

// Len is how many keys changed.
func (ch Changes) Len() int { return len(ch.Peers) + len(ch.Entries) + len(ch.Endpoints) }

func (ch *Changes) peer(p netip.Prefix) { ch.Peers = add(ch.Peers, p) }
func (ch *Changes) entry(e Entry)       { ch.Entries = add(ch.Entries, e) }
func (ch *Changes) endpoint(a netip.Addr) {
	ch.Endpoints = add(ch.Endpoints, a)
}

func add[K comparable](s map[K]struct{}, k K) map[K]struct{} {
	if s == nil {
		s = map[K]struct{}{}
	}
	s[k] = struct{}{}
	return s
}

// clear empties the maps, keeping them.
func (ch *Changes) clear() {
	clear(ch.Peers)
	clear(ch.Entries)
	clear(ch.Endpoints)
}

func (ch *Changes) merge(o Changes) {
	for p := range o.Peers {
		ch.peer(p)
	}
	for e := range o.Entries {
		ch.entry(e)
	}
	for a := range o.Endpoints {
		ch.endpoint(a)
	}
}

// diffTables are the keys whose values differ between have (nil: empty)
// and want.
func diffTables(have, want *Tables) Changes {
	if have == nil {
		have = &Tables{}
	}
	var ch Changes
	for p, id := range want.Peers {
		if old, ok := have.Peers[p]; !ok || old != id {
			ch.peer(p)
		}
	}
	for p := range have.Peers {
		if _, ok := want.Peers[p]; !ok {
			ch.peer(p)
		}
	}
	for e := range want.Entries {
		if _, ok := have.Entries[e]; !ok {
			ch.entry(e)
		}
	}
	for e := range have.Entries {
		if _, ok := want.Entries[e]; !ok {
			ch.entry(e)
		}
	}
	for e, v := range want.Verdicts {
		if old, ok := have.Verdicts[e]; !ok || old != v {
			ch.entry(e)
		}
	}
	for e := range have.Verdicts {
		if _, ok := want.Verdicts[e]; !ok {
			ch.entry(e)
		}
	}
	for a, ep := range want.Endpoints {
		if old, ok := have.Endpoints[a]; !ok || old != ep {
			ch.endpoint(a)
		}
	}
	for a := range have.Endpoints {
		if _, ok := want.Endpoints[a]; !ok {
			ch.endpoint(a)
		}
	}
	return ch
}

// Sync writes want into the maps, which hold have (nil: nothing): only
// what differs (SyncChanges).
func Sync(m *cube.Maps, have, want *Tables) error {
	return SyncChanges(m, want, diffTables(have, want))
}

// SyncChanges writes the changed keys of t into the maps. New entries and
// identities go in before the endpoints that use them, and stale ones
// leave after, so a pod is never judged by a half written policy: during
// a change it has the union of the old rules and the new. Each map's
// writes, and its deletes, are one batch call (a new identity's entries
// are hundreds of keys, and a system call per key costs more than the key).
//
// A key that cannot be written (a full map) does not stop the others:
// every delete is still made (a revoked rule never stays in force
// because another key did not fit), and each endpoint the unwritten keys
// concern is written quarantined instead (failclosed.go): isolated both
// ways under a rule set that allows nothing. The error is then a
// *SyncError naming them. Calling it again with the same changes, and
// the quarantined endpoints, converges (every write is idempotent).
func SyncChanges(m *cube.Maps, t *Tables, ch Changes) error {
	w := batchPool.Get().(*syncBatches)
	defer batchPool.Put(w)
	w.fill(t, ch)
	se := w.write(m, t)
	if ch.Len() == 0 && se == nil {
		return nil
	}
	if err := raiseRevision(m); err != nil {
		if se == nil {
			return err
		}
		se.errs = append(se.errs, err)
	}
	if se == nil {
		return nil
	}
	return se
}

// batchPool keeps the batches of the last SyncChanges for the next: a new
// identity's writes fill them with hundreds of keys, and what each change
// allocates decides how often the collector runs (and slows the changes
// it runs beside). The batches hold no pointers.
var batchPool = sync.Pool{New: func() any { return new(syncBatches) }}

// fill empties w, then files the changed keys of t in it by the map they
// go to, to write (in t) or to delete (gone from t).
func (w *syncBatches) fill(t *Tables, ch Changes) {
	*w = syncBatches{
		hosts: w.hosts[:0], hostVals: w.hostVals[:0], peers: w.peers[:0], peerVals: w.peerVals[:0],
		rules: w.rules[:0], entries: w.entries[:0], endpoints: w.endpoints[:0], endpointVals: w.endpointVals[:0],
		staleHosts: w.staleHosts[:0], stalePeers: w.stalePeers[:0], staleRules: w.staleRules[:0],
		staleEntries: w.staleEntries[:0], staleEndpoints: w.staleEndpoints[:0],
		ruleVals: w.ruleVals[:0], entryVals: w.entryVals[:0],
	}
	for p := range ch.Peers {
		id, ok := t.Peers[p]
		v := datapath.PolicyPeer{Identity: datapath.Identity(id)}
		switch {
		case p.IsSingleIP() && ok:
			w.hosts = append(w.hosts, datapath.AddrFrom(p.Addr()))
			w.hostVals = append(w.hostVals, v)
		case p.IsSingleIP():
			w.staleHosts = append(w.staleHosts, datapath.AddrFrom(p.Addr()))
		case ok:
			w.peers = append(w.peers, datapath.PrefixFrom(p))
			w.peerVals = append(w.peerVals, v)
		default:
			w.stalePeers = append(w.stalePeers, datapath.PrefixFrom(p))
		}
	}
	for e := range ch.Entries {
		allow, ok := t.verdict(e)
		v := datapath.PolicyEntry{}
		if allow {
			v.Allow = 1
		}
		switch {
		case e.exact() && ok:
			w.rules = append(w.rules, entryKey(e))
			w.ruleVals = append(w.ruleVals, v)
		case e.exact():
			w.staleRules = append(w.staleRules, entryKey(e))
		case ok:
			w.entries = append(w.entries, entryKey(e))
			w.entryVals = append(w.entryVals, v)
		default:
			w.staleEntries = append(w.staleEntries, entryKey(e))
		}
	}
	for a := range ch.Endpoints {
		if ep, ok := t.Endpoints[a]; ok {
			w.endpoints = append(w.endpoints, datapath.AddrFrom(a))
			w.endpointVals = append(w.endpointVals, endpointValue(ep))
		} else {
			w.staleEndpoints = append(w.staleEndpoints, datapath.AddrFrom(a))
		}
	}
}

// syncBatches are one SyncChanges' keys, by map, to write and to delete.
// An identity-cache key that is a single address goes to pol_hosts (an
// exact lookup), a wider prefix to pol_peers (the trie); an entry for one
// port or every protocol to pol_rules (exact), a port range to
// pol_entries (the trie).
type syncBatches struct {
	hosts          []datapath.Addr
	hostVals       []datapath.PolicyPeer
	peers          []datapath.Prefix
	peerVals       []datapath.PolicyPeer
	rules          []datapath.PolicyEntryKey
	entries        []datapath.PolicyEntryKey
	endpoints      []datapath.Addr
	endpointVals   []datapath.PolicyEndpoint
	staleHosts     []datapath.Addr
	stalePeers     []datapath.Prefix
	staleRules     []datapath.PolicyEntryKey
	staleEntries   []datapath.PolicyEntryKey
	staleEndpoints []datapath.Addr
	ruleVals       []datapath.PolicyEntry // the rules' values: allow, or (a tier set's) deny
	entryVals      []datapath.PolicyEntry // the entries' values
}

// write puts the batches in the order SyncChanges promises: identities
// and entries, then endpoints (those the keys not written concern,
// quarantined); then the stale endpoints, entries and identities out,
// whatever failed before. nil: everything written.
func (w *syncBatches) write(m *cube.Maps, t *Tables) *SyncError {
	var se SyncError
	putEach(m, MapHosts, w.hosts, w.hostVals, func(i int, err error) { se.host(w.hosts[i].IP(), err) })
	putEach(m, MapPeers, w.peers, w.peerVals, func(_ int, err error) { se.peer(err) })
	putEach(m, MapRules, w.rules, w.ruleVals, func(i int, err error) { se.ruleSet(w.rules[i].RuleSet, err) })
	putEach(m, MapEntries, w.entries, w.entryVals, func(i int, err error) { se.ruleSet(w.entries[i].RuleSet, err) })
	if se.failed() {
		w.quarantine(t, &se)
	}
	putEach(m, MapEndpoints, w.endpoints, w.endpointVals, func(i int, err error) { se.endpoint(w.endpoints[i].IP(), err) })
	for _, step := range []func() error{
		func() error { return remove(m, MapEndpoints, w.staleEndpoints) },
		func() error { return remove(m, MapEntries, w.staleEntries) },
		func() error { return remove(m, MapRules, w.staleRules) },
		func() error { return remove(m, MapPeers, w.stalePeers) },
		func() error { return remove(m, MapHosts, w.staleHosts) },
	} {
		if err := step(); err != nil {
			se.errs = append(se.errs, err)
		}
	}
	if !se.failed() && len(se.errs) == 0 {
		return nil
	}
	return &se
}

// putEach writes keys[i]=values[i] in batches; a key the map refuses is
// passed to failed and the rest still written.
func putEach[K, V any](m *cube.Maps, name string, keys []K, values []V, failed func(i int, err error)) {
	for lo := 0; lo < len(keys); {
		n, err := cube.PutBatch(m, name, keys[lo:], values[lo:])
		if err == nil {
			return
		}
		failed(lo+n, err)
		lo += n + 1
	}
}

func remove[K any](m *cube.Maps, name string, keys []K) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := cube.RemoveBatch(m, name, keys)
	return err
}

// raiseRevision tells the datapath the rules changed: the verdicts its
// connections hold (conntrack's CT_POLICY entries) are judged again on
// their next packet. Raised after the writes, so that they are judged by
// the new rules; a write that failed is retried, and raises it again.
func raiseRevision(m *cube.Maps) error {
	v, _, err := cube.Get[uint32, datapath.PolicyRevision](m, MapRevision, 0)
	if err != nil {
		return err
	}
	v.Rev++
	return cube.Put(m, MapRevision, uint32(0), v)
}

// verdict is what the tables say of entry e: whether it is there (ok),
// and then whether it allows (a NetworkPolicy entry always does).
func (t *Tables) verdict(e Entry) (allow, ok bool) {
	if _, ok := t.Entries[e]; ok {
		return true, true
	}
	allow, ok = t.Verdicts[e]
	return allow, ok
}

// allEntries are the keys of Entries and of Verdicts.
func (t *Tables) allEntries() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for e := range t.Entries {
			if !yield(e) {
				return
			}
		}
		for e := range t.Verdicts {
			if !yield(e) {
				return
			}
		}
	}
}

// exact says whether e is kept in pol_rules, the exact table: an entry
// for one port, or for every protocol (and so every port); the others,
// port ranges, in pol_entries' trie.
func (e Entry) exact() bool { return e.PortBits == 16 || e.Proto == 0 }

// entryKey is e's key in its table (exact: as the datapath's lookups
// build it, with every port bit and, for every protocol, port 0).
func entryKey(e Entry) datapath.PolicyEntryKey {
	port, bits := e.Port, e.PortBits
	if e.Proto == 0 {
		port, bits = 0, 16
	}
	if bits < 16 {
		port &^= 1<<(16-bits) - 1
	}
	return datapath.PolicyEntryKey{
		Prefixlen: datapath.PolicyEntryBits + datapath.EntryBits(bits),
		RuleSet:   e.RuleSet,
		Dir:       datapath.PolicyDir(e.Dir),
		Proto:     uint8(e.Proto),
		Peer:      datapath.Identity(e.Peer),
		Port:      datapath.Port(port),
	}
}

func endpointValue(ep Endpoint) datapath.PolicyEndpoint {
	v := datapath.PolicyEndpoint{Id: ep.ID, RuleSet: ep.RuleSet}
	if ep.IsolatedIngress {
		v.Flags |= datapath.IsolatedIngress
	}
	if ep.IsolatedEgress {
		v.Flags |= datapath.IsolatedEgress
	}
	return v
}
