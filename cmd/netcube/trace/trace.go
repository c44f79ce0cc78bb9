// Package trace is `netcube trace SRC DST:PORT/PROTO`: what the node's
// datapath does with a packet from SRC (a pod, namespace/name, or an
// address) to DST, and with its reply, cube by cube, without sending
// traffic: the packet runs through the node's real programs over a copy
// of its maps (pkg/trace).
package trace

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/netcube/netcube/cmd/netcube/internal/agentapi"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/trace"
)

const usage = `Usage: netcube trace [flags] SRC DST:PORT[/PROTO]

SRC is a pod (namespace/name, as the agent knows it) or an address, with an
optional :port (default 40000); DST an address and port, PROTO tcp (default)
or udp. A SRC that is a pod of this node is traced from its veth (from_pod);
any other as arriving on the node's uplink (from_net).

`

// Run is the verb; args follow "trace".
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netcube trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node agentapi.Node
	node.Flags(fs)
	output := fs.String("o", "text", "output: text or json")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "netcube trace: -o %q: want text or json\n", *output)
		return 2
	}
	p, err := packet(node, fs.Arg(0), fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "netcube trace: %v\n", err)
		return 2
	}
	tr, err := trace.New(node.BPFRoot)
	if err != nil {
		fmt.Fprintf(stderr, "netcube trace: %v\n", err)
		return 1
	}
	defer tr.Close()
	r, err := tr.Trace(p)
	if err != nil {
		fmt.Fprintf(stderr, "netcube trace: %v\n", err)
		return 1
	}
	namePolicies(node, &r)
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return 0
	}
	owners := map[string]string{}
	_ = node.GetJSON(lb.ServicesPath, &owners) // names only: the trace stands without them
	_, err = os.Stat(filepath.Join(node.BPFRoot, "links", "cgroup-connect4"))
	printText(stdout, r, owners, err == nil)
	return 0
}

// namePolicies asks the agent which policies are behind each policy
// verdict of the trace (the programs report the kind of rule, the agent
// knows the NetworkPolicy or the ClusterNetworkPolicy and its tier); the
// trace stands without the names when no agent answers.
func namePolicies(node agentapi.Node, r *trace.Result) {
	legs := []*trace.Leg{&r.Way}
	if r.Reply != nil {
		legs = append(legs, r.Reply)
	}
	for _, l := range legs {
		for i := range l.Hops {
			for j := range l.Hops[i].Events {
				e := &l.Hops[i].Events[j]
				p := e.Policy
				if p == nil || !e.Src.IsValid() || !e.Dst.IsValid() {
					continue
				}
				local, peer, egress := e.Dst.Addr(), e.Src.Addr(), p.Direction == "egress"
				if egress {
					local, peer = peer, local
				}
				q := url.Values{"local": {local.String()}, "peer": {peer.String()}, "proto": {fmt.Sprint(uint8(e.L4()))},
					"port": {fmt.Sprint(e.Dst.Port())}, "egress": {fmt.Sprint(egress)}, "allowed": {fmt.Sprint(e.Type != "drop")}}
				var names []string
				if node.GetJSON(policy.VerdictPath+"?"+q.Encode(), &names) != nil {
					return
				}
				p.Policies = names
			}
		}
	}
}

// packet turns the arguments into the packet to trace.
func packet(node agentapi.Node, srcArg, dstArg string) (trace.Packet, error) {
	p := trace.Packet{Proto: "TCP", SYN: true}
	dst, proto, _ := strings.Cut(dstArg, "/")
	switch strings.ToLower(proto) {
	case "", "tcp":
	case "udp":
		p.Proto, p.SYN = "UDP", false
	default:
		return p, fmt.Errorf("destination %q: protocol %q is not tcp or udp", dstArg, proto)
	}
	d, err := addrPort(dst, -1)
	if err != nil {
		return p, fmt.Errorf("destination %q: %v", dstArg, err)
	}
	p.Dst = d
	if src, err := addrPort(srcArg, 40000); err == nil {
		p.Src = src
	} else if ns, name, isPod := strings.Cut(srcArg, "/"); isPod && ns != "" && name != "" && !strings.Contains(name, "/") {
		pods := map[string]policy.PodInfo{}
		if err := node.GetJSON(policy.PodsPath, &pods); err != nil {
			return p, fmt.Errorf("source %q is a pod name, and pods are named by the agent: %v", srcArg, err)
		}
		info, ok := pods[srcArg]
		if !ok {
			return p, fmt.Errorf("source: no pod %q (the agent knows %d pods)", srcArg, len(pods))
		}
		for _, a := range info.IPs {
			if a.Is4() == d.Addr().Is4() {
				p.Src = netip.AddrPortFrom(a, 40000)
			}
		}
		if !p.Src.IsValid() {
			return p, fmt.Errorf("source: pod %q has no address of the destination's family", srcArg)
		}
	} else {
		return p, fmt.Errorf("source %q: %v (or give a pod as namespace/name)", srcArg, err)
	}
	if p.Src.Addr().Is4() != p.Dst.Addr().Is4() {
		return p, fmt.Errorf("source %s and destination %s are of different families", p.Src.Addr(), p.Dst.Addr())
	}
	return p, nil
}

// addrPort parses ADDR:PORT or [V6]:PORT, or (with defPort >= 0) a bare
// address.
func addrPort(s string, defPort int) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if defPort < 0 {
			return netip.AddrPort{}, errors.New("no port: give ADDR:PORT")
		}
		return netip.AddrPortFrom(a.Unmap(), uint16(defPort)), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not ADDR:PORT", s)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not an IP address", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not a port", port)
	}
	if n < 1 || n > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %d is out of range (1-65535)", n)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(n)), nil
}

func printText(w io.Writer, r trace.Result, owners map[string]string, socketLB bool) {
	fmt.Fprintf(w, "Packet: %s\n", r.Packet)
	if socketLB && len(r.Way.Hops) > 0 && r.Way.Hops[0].Program == "from_pod" && traced(r.Way.Hops[0], "service-backend") {
		fmt.Fprintln(w, "Note: socket-LB is on: a pod's connect() to this Service is translated at its socket (to a backend")
		fmt.Fprintln(w, "      picked at random), and the packets leave already addressed to it; traced here is the per-packet")
		fmt.Fprintln(w, "      path, which serves what the socket does not translate.")
	}
	leg(w, "Way", r.Way, owners)
	if r.Reply != nil {
		leg(w, "Reply", *r.Reply, owners)
	}
}

func leg(w io.Writer, title string, l trace.Leg, owners map[string]string) {
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, h := range l.Hops {
		fmt.Fprintf(w, "  %s, in:  %s\n", h.Program, h.In)
		for _, e := range h.Events {
			if d := describe(e, owners); d != "" {
				fmt.Fprintf(w, "    %-7s %s\n", e.Cube, d)
			}
		}
		if h.Out != nil {
			if h.Out.Dst != h.In.Dst && h.Out.Src != h.In.Dst {
				fmt.Fprintf(w, "    rewrite destination %s -> %s\n", h.In.Dst, h.Out.Dst)
			}
			if h.Out.Src != h.In.Src && h.Out.Dst != h.In.Src {
				fmt.Fprintf(w, "    rewrite source %s -> %s\n", h.In.Src, h.Out.Src)
			}
			if l.Refused {
				fmt.Fprintf(w, "    answer  sent back to the client at once\n")
			} else {
				fmt.Fprintf(w, "    router  %s\n", h.Verdict)
			}
			fmt.Fprintf(w, "  %s, out: %s\n", h.Program, h.Out)
		} else {
			fmt.Fprintf(w, "  %s: dropped\n", h.Program)
		}
	}
	fmt.Fprintf(w, "  => %s\n", l.Outcome)
}

// policiesBehind names the policies the agent says are behind a verdict.
func policiesBehind(e events.Event) string {
	p := e.Policy
	if p == nil || len(p.Policies) == 0 {
		return ""
	}
	by := "allowed by"
	switch {
	case e.Type == "drop" && p.Rule == "denied":
		by = "denied by"
	case e.Type == "drop":
		by = "isolated by"
	}
	return ", " + by + " " + strings.Join(p.Policies, ", ")
}

func describe(e events.Event, owners map[string]string) string {
	switch {
	case e.Type == "drop":
		s := "DROPPED: " + e.Drop
		if p := e.Policy; p != nil && p.Rule == "denied" {
			s += fmt.Sprintf(" (a rule of endpoint %d denies %s with identity %d)", p.Endpoint, p.Direction, p.Peer)
		} else if p != nil {
			s += fmt.Sprintf(" (no rule of endpoint %d allows %s from identity %d)", p.Endpoint, p.Direction, p.Peer)
		}
		return s + policiesBehind(e)
	case e.Trace == "policy-allowed":
		return fmt.Sprintf("allowed by a rule (%s) of endpoint %d, %s, peer identity %d", e.Policy.Rule, e.Policy.Endpoint, e.Policy.Direction, e.Policy.Peer) +
			policiesBehind(e)
	case e.Trace == "service-backend":
		svc := ""
		if name, ok := owners[netip.AddrPortFrom(e.Dst.Addr(), e.Dst.Port()).String()+"/"+e.Proto]; ok {
			svc = " of " + name
		}
		return fmt.Sprintf("Service %s%s: backend %s (service id %d)", e.Dst, svc, e.To, e.ServiceID)
	case e.Trace == "snat":
		return "source translated to this node: " + e.To.String()
	case e.Trace == "masquerade":
		return "masqueraded (leaves the cluster) as " + e.To.String()
	case e.Trace == "route", e.Counts != nil:
		// Where the packet went is the hop's end (below); a flow's end
		// is the clone's, not the node's.
		return ""
	}
	return e.Trace
}

func traced(h trace.Hop, what string) bool {
	for _, e := range h.Events {
		if e.Trace == what {
			return true
		}
	}
	return false
}
