// Package policy is `netcube policy get POD`: what the node's datapath
// enforces for a pod of it: whether a NetworkPolicy selects it, which
// directions are isolated, and the rules that allow traffic, by peer
// identity, protocol and ports, with the addresses and (when the agent
// answers) the pods each identity stands for. Read from the pinned maps,
// so it works while the agent is down.
package policy

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/netcube/netcube/cmd/netcube/internal/agentapi"
	"github.com/netcube/netcube/pkg/cubes/policy"
)

// Run is the verb; args follow "policy".
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "get" {
		fmt.Fprintf(stderr, "Usage: netcube policy get POD|ADDRESS [-o json] [--bpf-root DIR] [--socket PATH]\n")
		return 2
	}
	fs := flag.NewFlagSet("netcube policy get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node agentapi.Node
	node.Flags(fs)
	output := fs.String("o", "text", "output: text or json")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "Usage: netcube policy get POD|ADDRESS: one pod (namespace/name) or address\n")
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "netcube policy get: -o %q: want text or json\n", *output)
		return 2
	}
	addrs, err := addresses(node, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "netcube policy get: %v\n", err)
		return 2
	}
	maps, closeMaps, err := node.Maps()
	if err != nil {
		fmt.Fprintf(stderr, "netcube policy get: %v\n", err)
		return 1
	}
	defer closeMaps()
	var out []policy.Applied
	for _, a := range addrs {
		ap, err := policy.Inspect(maps, a)
		if err != nil {
			fmt.Fprintf(stderr, "netcube policy get: reading the maps: %v\n", err)
			return 1
		}
		out = append(out, ap)
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return 0
	}
	names := map[string]string{}
	if err := node.GetJSON(policy.IdentitiesPath, &names); err != nil && !errors.Is(err, agentapi.ErrNoAgent) {
		fmt.Fprintf(stderr, "netcube policy get: %v\n", err)
	}
	tiers := map[string]policy.TierView{}
	if err := node.GetJSON(policy.TiersPath, &tiers); err != nil && !errors.Is(err, agentapi.ErrNoAgent) {
		fmt.Fprintf(stderr, "netcube policy get: %v\n", err)
	}
	for _, ap := range out {
		if tv, ok := tiers[ap.Address.String()]; ok {
			printTiers(stdout, ap, tv)
		}
		printText(stdout, ap, names)
	}
	return 0
}

// addresses resolves the argument: an address, or a pod the agent knows.
func addresses(node agentapi.Node, arg string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(arg); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("%q is neither an IP address nor a pod (namespace/name)", arg)
	}
	pods := map[string]policy.PodInfo{}
	if err := node.GetJSON(policy.PodsPath, &pods); err != nil {
		return nil, fmt.Errorf("%q is a pod name, and pods are named by the agent (give its address while it is down): %v", arg, err)
	}
	p, ok := pods[arg]
	if !ok {
		return nil, fmt.Errorf("no pod %q (the agent knows %d pods)", arg, len(pods))
	}
	if len(p.IPs) == 0 {
		return nil, fmt.Errorf("pod %q has no address yet", arg)
	}
	return p.IPs, nil
}

// printTiers prints the rules a pod some ClusterNetworkPolicy selects is
// judged by, each direction in evaluation order: the Admin tier, its
// NetworkPolicies, the Baseline tier; the first rule that matches decides.
func printTiers(w io.Writer, a policy.Applied, tv policy.TierView) {
	fmt.Fprintf(w, "%s (%s): judged in this order, the first match decides\n", a.Address, tv.Pod)
	for _, dir := range []string{"ingress", "egress"} {
		fmt.Fprintf(w, "  %s:\n", dir)
		n := 0
		step := func(format string, args ...any) {
			n++
			fmt.Fprintf(w, "    %d. %s\n", n, fmt.Sprintf(format, args...))
		}
		isolated := tv.IsolatedIngress
		if dir == "egress" {
			isolated = tv.IsolatedEgress
		}
		baseline := false
		for _, r := range tv.Rules {
			if r.Direction != dir {
				continue
			}
			if r.Tier == "Baseline" && !baseline {
				baseline = true
				networkPolicies(step, tv, isolated)
				if isolated {
					break
				}
			}
			name := ""
			if r.Name != "" {
				name = " " + r.Name
			}
			step("%s %s (priority %d) rule %d%s: %s %s, %s", r.Tier, r.Policy, r.Priority, r.Index, name, r.Action, r.Peers, r.Ports)
		}
		if !baseline {
			networkPolicies(step, tv, isolated)
		}
		if !isolated {
			step("nothing matched: allowed")
		}
	}
}

func networkPolicies(step func(string, ...any), tv policy.TierView, isolated bool) {
	switch {
	case isolated:
		step("NetworkPolicy %s: isolates it, allows what its rules allow and nothing else (final)", strings.Join(tv.Policies, ", "))
	case len(tv.Policies) > 0:
		step("NetworkPolicy %s: does not isolate this direction", strings.Join(tv.Policies, ", "))
	default:
		step("NetworkPolicy: none selects it")
	}
}

func printText(w io.Writer, a policy.Applied, names map[string]string) {
	fmt.Fprintf(w, "%s:\n", a.Address)
	if !a.Selected {
		fmt.Fprintln(w, "  no NetworkPolicy selects it (or it is not a pod of this node): everything passes")
		return
	}
	dir := func(isolated bool) string {
		if isolated {
			return "isolated: only what a rule allows passes"
		}
		return "not isolated: everything passes"
	}
	fmt.Fprintf(w, "  endpoint %d, rule set %#x (shared with this node's pods of its namespace, labels and named ports)\n  ingress: %s\n  egress:  %s\n",
		a.Endpoint, a.RuleSet, dir(a.IsolatedIngress), dir(a.IsolatedEgress))
	if len(a.Rules) == 0 {
		fmt.Fprintln(w, "  rules: none")
	}
	for _, r := range a.Rules {
		peer := policy.PeerName(r.Peer)
		if n, ok := names[fmt.Sprint(r.Peer)]; ok {
			peer += " (" + n + ")"
		}
		from := "from"
		if r.Direction == "egress" {
			from = "to"
		}
		ports := "every protocol and port"
		if r.Proto != "any" {
			ports = fmt.Sprintf("%s %d", r.Proto, r.PortFrom)
			if r.PortTo != r.PortFrom {
				ports = fmt.Sprintf("%s %d-%d", r.Proto, r.PortFrom, r.PortTo)
			}
		}
		fmt.Fprintf(w, "  %-5s %-7s %s %s, %s\n", r.Verdict, r.Direction, from, peer, ports)
	}
	for id, ps := range a.Peers {
		var s []string
		for _, p := range ps {
			s = append(s, p.String())
		}
		fmt.Fprintf(w, "  %s: %s\n", policy.PeerName(id), strings.Join(s, ", "))
	}
}
