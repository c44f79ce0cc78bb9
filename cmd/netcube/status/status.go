// Package status is `netcube status`: the node's datapath as it is now,
// read from the kernel and the pinned maps (it works while the agent is
// down), and the agent's own view when it answers: kernel and its
// features, attach points, each cube's maps and how full they are,
// conntrack pressure, drops by reason, and the events lost.
package status

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/cmd/netcube/internal/agentapi"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/localapi"
)

// Report is what `netcube status -o json` prints.
type Report struct {
	Agent      *localapi.Status `json:"agent,omitempty"`
	AgentError string           `json:"agent_error,omitempty"`
	// BGP is the node's BGP speaker, when the agent answers.
	BGP     *localapi.BGPStatus `json:"bgp,omitempty"`
	Kernel  Kernel              `json:"kernel"`
	BPFRoot string              `json:"bpf_root"`
	// Attached are the datapath's pinned links (uplinks, the pods'
	// cgroup, pods' veths an earlier agent attached) by name, and the
	// pods' veths that carry its tc filters.
	Attached  []string          `json:"attached"`
	Cubes     []CubeMaps        `json:"cubes"`
	Conntrack Conntrack         `json:"conntrack"`
	Drops     map[string]uint64 `json:"drops"` // by reason, since the maps were made
	Events    Events            `json:"events"`
}

// Kernel is the running kernel and whether it has what the datapath needs.
type Kernel struct {
	Release  string `json:"release"`
	Features string `json:"features"` // "ok", or what is missing
}

// CubeMaps are a cube's maps and, for the cubes packets cross, what it
// handled since the maps were made (counted while monitor.cubes is on).
type CubeMaps struct {
	Cube    string           `json:"cube"`
	Maps    []MapFill        `json:"maps"`
	Traffic *monitor.Traffic `json:"traffic,omitempty"`
}

// MapFill is a map's size and, for maps whose keys can be counted,
// its entries.
type MapFill struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Max     uint32 `json:"max_entries"`
	Entries *int   `json:"entries,omitempty"`
}

// Conntrack is conntrack's pressure: flows held of the table's size,
// the new flows it could not hold, and the unanswered ones it gave up
// for new ones (early drop).
type Conntrack struct {
	Entries      int     `json:"entries"`
	Max          uint32  `json:"max_entries"`
	Fill         float64 `json:"fill_percent"`
	InsertFailed uint64  `json:"insert_failed"`
	EarlyDropped uint64  `json:"early_dropped"`
}

// Events are the monitor's events: written to the ring buffer, or lost
// because it was full.
type Events struct {
	Sent uint64 `json:"sent"`
	Lost uint64 `json:"lost"`
}

// Run is the verb; args follow "status".
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netcube status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node agentapi.Node
	node.Flags(fs)
	output := fs.String("o", "text", "output: text or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "netcube status: -o %q: want text or json\n", *output)
		return 2
	}
	r, err := collect(node)
	if err != nil {
		fmt.Fprintf(stderr, "netcube status: %v\n", err)
		return 1
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return 0
	}
	printText(stdout, r)
	return 0
}

func collect(node agentapi.Node) (Report, error) {
	r := Report{BPFRoot: node.BPFRoot, Drops: map[string]uint64{}}
	var st localapi.Status
	if err := node.GetJSON(localapi.StatusPath, &st); err != nil {
		if !errors.Is(err, agentapi.ErrNoAgent) {
			return r, err
		}
		r.AgentError = err.Error()
	} else {
		r.Agent = &st
		var b localapi.BGPStatus
		if node.GetJSON(localapi.BGPPath, &b) == nil {
			r.BGP = &b
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Kernel.Release = unix.ByteSliceToString(u.Release[:])
	}
	r.Kernel.Features = "ok"
	if err := datapath.CheckKernel(); err != nil {
		r.Kernel.Features = err.Error()
	}
	maps, closeMaps, err := node.Maps()
	if err != nil {
		return r, err
	}
	defer closeMaps()
	links, _ := os.ReadDir(filepath.Join(node.BPFRoot, "links"))
	for _, l := range links {
		r.Attached = append(r.Attached, l.Name())
	}
	pods, _ := datapath.PodAttachments() // pods' veths: tc filters, not links
	for _, p := range pods {
		r.Attached = append(r.Attached, "pod-"+p+" (tc)")
	}
	var traffic map[string]monitor.Traffic
	if maps.Has(monitor.MapCubes) { // not: a datapath older than the counters
		traffic, _ = monitor.CubeTraffic(maps.Map(monitor.MapCubes))
	}
	for _, c := range cubes.All {
		cm := CubeMaps{Cube: c.Name()}
		if t, ok := traffic[c.Name()]; ok {
			cm.Traffic = &t
		}
		for _, spec := range c.Maps() {
			if !maps.Has(spec.Name) {
				continue // not pinned: the agent's process holds it alone
			}
			cm.Maps = append(cm.Maps, fill(maps.Map(spec.Name)))
		}
		r.Cubes = append(r.Cubes, cm)
	}
	flows := fill(maps.Map(ct.MapFlows))
	if flows.Entries != nil {
		r.Conntrack.Entries = *flows.Entries
	}
	r.Conntrack.Max = flows.Max
	if flows.Max > 0 {
		r.Conntrack.Fill = 100 * float64(r.Conntrack.Entries) / float64(flows.Max)
	}
	r.Conntrack.InsertFailed = cube.PerCPUSum(maps.Map(ct.MapStats), uint32(datapath.CTStatInsertFailed))
	r.Conntrack.EarlyDropped = cube.PerCPUSum(maps.Map(ct.MapStats), uint32(datapath.CTStatEarlyDrop))
	for _, d := range events.DropReasons() {
		if n := cube.PerCPUSum(maps.Map(monitor.MapDrops), uint32(d)); n > 0 {
			r.Drops[events.DropReason(d).Name] = n
		}
	}
	r.Events.Sent = cube.PerCPUSum(maps.Map(monitor.MapStats), uint32(datapath.MonStatSent))
	r.Events.Lost = cube.PerCPUSum(maps.Map(monitor.MapStats), uint32(datapath.MonStatLost))
	return r, nil
}

// fill reads a map's size, and counts the keys of the maps that have
// some to count (hashes, tries; not arrays, ring buffers, socket storage).
func fill(m cube.Map) MapFill {
	f := MapFill{Name: m.Name(), Max: m.MaxEntries(), Type: "?"}
	km, ok := m.(interface{ Unwrap() *ebpf.Map })
	if !ok {
		return f
	}
	em := km.Unwrap()
	f.Type = em.Type().String()
	switch em.Type() {
	case ebpf.Hash, ebpf.LRUHash, ebpf.LPMTrie, ebpf.PerCPUHash, ebpf.LRUCPUHash, ebpf.HashOfMaps:
	default:
		return f
	}
	n := 0
	key := make([]byte, em.KeySize())
	var prev any
	for {
		if err := em.NextKey(prev, &key); err != nil {
			break
		}
		n++
		k := append([]byte(nil), key...)
		prev = k
	}
	f.Entries = &n
	return f
}

func printText(w io.Writer, r Report) {
	if a := r.Agent; a != nil {
		sync := "first sync not applied yet"
		if a.Synced {
			sync = "synced"
		}
		if !a.LastSync.IsZero() {
			sync += fmt.Sprintf(", last sync %s ago", time.Since(a.LastSync).Round(time.Second))
		}
		if a.PolicySynced != nil && !*a.PolicySynced {
			sync += "; first NetworkPolicy sync not written yet (CNI ADD refused)"
		}
		fmt.Fprintf(w, "Agent:      node %s, up %s, %s\n", a.Node, time.Since(a.Started).Round(time.Second), sync)
		for id, err := range a.Failing {
			fmt.Fprintf(w, "            failing: %s: %s\n", id, err)
		}
		for _, id := range slices.Sorted(maps.Keys(a.NotApplied)) {
			fmt.Fprintf(w, "            policy: %s: %s\n", id, a.NotApplied[id])
		}
	} else {
		fmt.Fprintf(w, "Agent:      not answering: %s\n            the datapath keeps forwarding with the state below\n", r.AgentError)
	}
	if b := r.BGP; b != nil && b.Active {
		writeBGP(w, b)
	}
	fmt.Fprintf(w, "Kernel:     %s, features: %s\n", r.Kernel.Release, r.Kernel.Features)
	fmt.Fprintf(w, "Datapath:   %s, %d attach points\n", r.BPFRoot, len(r.Attached))
	for _, l := range r.Attached {
		fmt.Fprintf(w, "            %s\n", l)
	}
	fmt.Fprintln(w, "Cubes:")
	for _, c := range r.Cubes {
		var parts []string
		for _, m := range c.Maps {
			if m.Entries != nil {
				parts = append(parts, fmt.Sprintf("%s %d/%d", m.Name, *m.Entries, m.Max))
			} else {
				parts = append(parts, fmt.Sprintf("%s (%s)", m.Name, strings.ToLower(m.Type)))
			}
		}
		fmt.Fprintf(w, "  %-8s  %s\n", c.Cube, strings.Join(parts, ", "))
		if t := c.Traffic; t != nil {
			fmt.Fprintf(w, "  %-8s  %d packets, %s\n", "", t.Packets, bytesText(t.Bytes))
		}
	}
	fmt.Fprintf(w, "Conntrack:  %d flows of %d (%.1f%%), %d new flows not held (table full), %d unanswered flows evicted for new ones\n",
		r.Conntrack.Entries, r.Conntrack.Max, r.Conntrack.Fill, r.Conntrack.InsertFailed, r.Conntrack.EarlyDropped)
	if len(r.Drops) == 0 {
		fmt.Fprintln(w, "Drops:      none")
	} else {
		names := make([]string, 0, len(r.Drops))
		for n := range r.Drops {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %d", n, r.Drops[n]))
		}
		fmt.Fprintf(w, "Drops:      %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "Events:     %d sent, %d lost (ring buffer full; packets are never lost for it)\n", r.Events.Sent, r.Events.Lost)
}

// bytesText is n bytes for people (1.2 MiB).
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// writeBGP writes the BGP lines of the status: the sessions' count, then
// each session's state, uptime and routes sent and received, so that a
// session that flaps or never comes up shows in the first command an
// operator runs.
func writeBGP(w io.Writer, b *localapi.BGPStatus) {
	up := 0
	for _, p := range b.Peers {
		if p.State == "established" {
			up++
		}
	}
	fmt.Fprintf(w, "BGP:        ASN %d, %d of %d sessions established, %d routes announced (netcube bgp peers)\n", b.LocalASN, up, len(b.Peers), len(b.Routes))
	for _, p := range b.Peers {
		since := ""
		if p.State == "established" {
			since = " " + p.Uptime.Round(time.Second).String()
		}
		fmt.Fprintf(w, "            peer %s AS %d: %s%s, %d sent, %d received\n", p.Address, p.ASN, p.State, since, p.Advertised, p.Received)
	}
	if b.Error != "" {
		fmt.Fprintf(w, "            last apply failed (retried): %s\n", b.Error)
	}
}
