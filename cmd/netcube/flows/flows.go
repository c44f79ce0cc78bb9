// Package flows is `netcube flows map`: which workloads talk to which
// Services and pods, drawn from a Hubble API server's flows (a node's
// agent, or a Hubble Relay) over a time window. Nodes are workloads (the
// pods of one app), Services and the world outside; an edge is what a
// source sent to a Service (when the flow names one) or a pod, with how
// many flows were forwarded and dropped and why. As an SVG, a page (the
// SVG and a table of edges), JSON, or a page served until interrupted.
package flows

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// DefaultServer is the node's agent's Hubble socket (its --hubble-socket).
const DefaultServer = "unix:///run/netcube/hubble.sock"

// Run is the verb; args follow "flows".
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "map" {
		fmt.Fprint(stderr, "Usage: netcube flows map [flags]\n\nWhich workloads talk to which Services and pods, from a Hubble server's flows (-h for the flags).\n")
		return 2
	}
	return runMap(args[1:], stdout, stderr)
}

type options struct {
	srv     server
	win     window
	group   Grouping
	output  string
	serve   string
	refresh time.Duration
}

func runMap(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netcube flows map", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.srv.addr, "server", envOr("HUBBLE_SERVER", DefaultServer), "the Hubble API server: unix:///path (a node's agent) or host:port (a Hubble Relay); default from $HUBBLE_SERVER")
	fs.BoolVar(&o.srv.tls, "tls", false, "connect to the server with TLS")
	fs.BoolVar(&o.srv.allowInsecure, "tls-allow-insecure", false, "with --tls, do not verify the server's certificate (a test server only)")
	var caFiles string
	fs.StringVar(&caFiles, "tls-ca-cert-files", "", "with --tls, the CA certificates (PEM files, comma-separated) the server's certificate is checked against")
	fs.StringVar(&o.srv.certFile, "tls-client-cert-file", "", "with --tls, the client certificate (PEM) for a server that asks for one")
	fs.StringVar(&o.srv.keyFile, "tls-client-key-file", "", "with --tls, the client certificate's key (PEM)")
	fs.StringVar(&o.srv.serverName, "tls-server-name", "", "with --tls, the name the server's certificate must have (default: the --server host)")
	fs.DurationVar(&o.win.since, "since", 0, "the flows of this last while, e.g. 5m (default 5m unless --last or --follow)")
	fs.Uint64Var(&o.win.last, "last", 0, "the last N flows (with --since: the last N of that while)")
	fs.BoolVar(&o.win.follow, "follow", false, "the flows that come from now on, for --duration (or until interrupted)")
	fs.DurationVar(&o.win.duration, "duration", 0, "with --follow, how long to gather flows, e.g. 30s")
	fs.StringVar(&o.group.Label, "group-by", "app", `the pod label whose value names a pod's workload; pods without it go by their name's prefix ("pod": each pod its own)`)
	fs.StringVar(&o.output, "o", "svg", "output: svg, html or json")
	fs.StringVar(&o.serve, "serve", "", "serve the page at this loopback address (127.0.0.1:PORT) until interrupted, drawn anew on each load")
	fs.DurationVar(&o.refresh, "refresh", 10*time.Second, "with --serve, how often the page reloads itself")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: netcube flows map [flags]\n\nWhich workloads talk to which Services and pods, from a Hubble server's flows.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "netcube flows map: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	for _, f := range strings.Split(caFiles, ",") {
		if f = strings.TrimSpace(f); f != "" {
			o.srv.caFiles = append(o.srv.caFiles, f)
		}
	}
	if err := o.check(fs); err != nil {
		fmt.Fprintf(stderr, "netcube flows map: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.serve != "" {
		if err := o.serveUntil(ctx, stderr); err != nil {
			fmt.Fprintf(stderr, "netcube flows map: %v\n", err)
			return 1
		}
		return 0
	}
	g, err := o.graph(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "netcube flows map: %v\n", err)
		return 1
	}
	if g.Lost > 0 {
		fmt.Fprintf(stderr, "netcube flows map: the server lost %d flows: the map is short of them\n", g.Lost)
	}
	switch o.output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(g)
	case "html":
		err = HTML(stdout, g, o.srv.addr, 0)
	default:
		_, err = io.WriteString(stdout, SVG(g))
	}
	if err != nil {
		fmt.Fprintf(stderr, "netcube flows map: %v\n", err)
		return 1
	}
	return 0
}

// check refuses flags that do not go together, naming them; the window
// defaults to the last five minutes.
func (o *options) check(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.output != "svg" && o.output != "html" && o.output != "json":
		return fmt.Errorf("-o %q: want svg, html or json", o.output)
	case set["since"] && o.win.since <= 0:
		return fmt.Errorf("--since %s: want a positive duration, e.g. 5m", o.win.since)
	case set["duration"] && !o.win.follow:
		return fmt.Errorf("--duration is for --follow: give --follow --duration %s", o.win.duration)
	case o.win.duration < 0:
		return fmt.Errorf("--duration %s: want a positive duration, e.g. 30s", o.win.duration)
	case o.win.follow && o.serve != "":
		return fmt.Errorf("--follow with --serve: the served page is drawn anew from --since or --last on each load")
	case set["refresh"] && o.serve == "":
		return fmt.Errorf("--refresh is for --serve")
	case o.refresh < time.Second:
		return fmt.Errorf("--refresh %s: want at least 1s", o.refresh)
	case set["o"] && o.serve != "":
		return fmt.Errorf("-o with --serve: the served page is HTML (its graph as JSON at /graph.json)")
	case o.group.Label == "":
		return fmt.Errorf(`--group-by "": want a label key (app) or "pod"`)
	}
	if err := o.srv.checkFlags(); err != nil {
		return err
	}
	if !set["since"] && !set["last"] && !o.win.follow {
		o.win.since = 5 * time.Minute
	}
	if o.serve != "" {
		return checkLoopback(o.serve)
	}
	return nil
}

// graph gathers the window's flows into the map.
func (o *options) graph(ctx context.Context) (Graph, error) {
	b := newBuilder(o.group)
	err := o.srv.flows(ctx, o.win, func(r *observerpb.GetFlowsResponse) { b.add(r) })
	return b.graph(), err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
