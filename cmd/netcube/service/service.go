// Package service is `netcube service list`: every frontend the node's
// datapath serves and the backends new flows may get, read from the
// pinned maps (it works while the agent is down), named by the Service
// that owns each when the agent answers.
package service

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/netcube/netcube/cmd/netcube/internal/agentapi"
	"github.com/netcube/netcube/pkg/cubes/lb"
)

// Run is the verb; args follow "service".
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprintf(stderr, "Usage: netcube service list [-o json] [--bpf-root DIR] [--socket PATH]\n")
		return 2
	}
	fs := flag.NewFlagSet("netcube service list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node agentapi.Node
	node.Flags(fs)
	output := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "netcube service list: -o %q: want table or json\n", *output)
		return 2
	}
	maps, closeMaps, err := node.Maps()
	if err != nil {
		fmt.Fprintf(stderr, "netcube service list: %v\n", err)
		return 1
	}
	defer closeMaps()
	svcs, err := lb.Inspect(maps)
	if err != nil {
		fmt.Fprintf(stderr, "netcube service list: reading the maps: %v\n", err)
		return 1
	}
	owners := map[string]string{}
	if err := node.GetJSON(lb.ServicesPath, &owners); err != nil {
		if !errors.Is(err, agentapi.ErrNoAgent) {
			fmt.Fprintf(stderr, "netcube service list: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "netcube service list: %v; Service names unknown, the datapath's state follows\n", err)
	}
	for i := range svcs {
		svcs[i].Service = owners[svcs[i].Frontend]
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(svcs); err != nil {
			return 1
		}
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tFRONTEND\tSERVICE\tFLAGS\tBACKENDS")
	for _, s := range svcs {
		name := s.Service
		if name == "" {
			name = "-"
		}
		flags := strings.Join(s.Flags, ",")
		if s.AffinitySeconds != 0 {
			flags = strings.Trim(flags+fmt.Sprintf(",affinity=%ds", s.AffinitySeconds), ",")
		}
		if flags == "" {
			flags = "-"
		}
		var bs []string
		for _, b := range s.Backends {
			if b.Slots > 1 {
				bs = append(bs, fmt.Sprintf("%s (%d slots)", b.Addr, b.Slots))
			} else {
				bs = append(bs, b.Addr)
			}
		}
		backends := strings.Join(bs, ", ")
		if backends == "" {
			backends = "(none: refused)"
			if strings.Contains(flags, "local") {
				backends = "(none here: dropped)"
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", s.ID, s.Frontend, name, flags, backends)
	}
	w.Flush()
	return 0
}
