// Package bgp is `netcube bgp`: the node's BGP speaker as its agent runs
// it: whether a NetworkBGPPeering selects the node, each session's state,
// uptime and prefixes sent and received (none is ever accepted), and the
// routes it announces. It asks the agent (the speaker is in it).
package bgp

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netcube/netcube/cmd/netcube/internal/agentapi"
	"github.com/netcube/netcube/pkg/localapi"
)

const usage = "Usage: netcube bgp peers|routes [-o json] [--socket PATH]\n"

// Run is the verb; args follow "bgp".
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "peers" && args[0] != "routes") {
		fmt.Fprint(stderr, usage)
		return 2
	}
	what := args[0]
	fs := flag.NewFlagSet("netcube bgp "+what, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node agentapi.Node
	node.Flags(fs)
	output := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "netcube bgp %s: -o %q: want table or json\n", what, *output)
		return 2
	}
	var st localapi.BGPStatus
	if err := node.GetJSON(localapi.BGPPath, &st); err != nil {
		fmt.Fprintf(stderr, "netcube bgp %s: %v\n", what, err)
		return 1
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if what == "peers" {
			_ = enc.Encode(st)
		} else {
			_ = enc.Encode(st.Routes)
		}
		return 0
	}
	if !st.Active {
		fmt.Fprintln(stdout, "BGP: off on this node (no NetworkBGPPeering selects it)")
		if st.Error != "" {
			fmt.Fprintf(stdout, "last error: %s\n", st.Error)
		}
		return 0
	}
	fmt.Fprintf(stdout, "BGP: local ASN %d, router id %s, %d routes announced\n", st.LocalASN, st.RouterID, len(st.Routes))
	if st.Error != "" {
		fmt.Fprintf(stdout, "last apply failed (retried): %s\n", st.Error)
	}
	tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	if what == "peers" {
		fmt.Fprintln(tw, "PEER\tASN\tSTATE\tUPTIME\tSENT\tRECEIVED\tACCEPTED")
		for _, p := range st.Peers {
			up := "-"
			if p.Uptime > 0 {
				up = p.Uptime.Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\n", p.Address, p.ASN, p.State, up, p.Advertised, p.Received, p.Accepted)
		}
	} else {
		fmt.Fprintln(tw, "PREFIX\tNEXT HOP\tCOMMUNITIES\tLOCAL PREF")
		for _, r := range st.Routes {
			nh := r.NextHop
			if nh == "" {
				nh = "self"
			}
			lp := "-"
			if r.LocalPref != 0 {
				lp = fmt.Sprint(r.LocalPref)
			}
			comm := strings.Join(r.Communities, " ")
			if comm == "" {
				comm = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Prefix, nh, comm, lp)
		}
	}
	_ = tw.Flush()
	return 0
}
