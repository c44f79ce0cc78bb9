// Package monitor is `netcube monitor`: the node's datapath events, live,
// from the agent's local API: each dropped packet with its reason and the
// cube that decided, each connection a policy allowed, and (with the
// agent's --monitor-trace) each flow a cube translated. Filters in the
// manner of `hubble observe`; one line per event, or JSON (-o json).
package monitor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"

	"github.com/netcube/netcube/cmd/netcube/internal/agentapi"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/events"
)

type filter struct {
	typ, reason, cube, proto string
	ip                       netip.Addr
	port                     uint
	pod, namespace, service  string
}

// nameMatches: a pod named namespace/name-prefix, as hubble's --pod (a
// bare name is in the default namespace).
func nameMatches(pattern, pod string) bool {
	if !strings.Contains(pattern, "/") {
		pattern = "default/" + pattern
	}
	return pod != "" && strings.HasPrefix(pod, pattern)
}

func (f filter) match(e events.Event) bool {
	switch {
	case f.pod != "" && !nameMatches(f.pod, e.SrcPod) && !nameMatches(f.pod, e.DstPod),
		f.namespace != "" && !strings.HasPrefix(e.SrcPod, f.namespace+"/") && !strings.HasPrefix(e.DstPod, f.namespace+"/"),
		f.service != "" && e.Service != f.service:
		return false
	case f.typ != "" && e.Type != f.typ,
		f.reason != "" && e.Drop != f.reason,
		f.cube != "" && e.Cube != f.cube,
		f.proto != "" && !strings.EqualFold(e.Proto, f.proto),
		f.ip.IsValid() && e.Src.Addr() != f.ip && e.Dst.Addr() != f.ip && e.To.Addr() != f.ip,
		f.port != 0 && uint(e.Src.Port()) != f.port && uint(e.Dst.Port()) != f.port && uint(e.To.Port()) != f.port:
		return false
	}
	return true
}

// Run is the verb; args follow "monitor".
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netcube monitor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node agentapi.Node
	fs.StringVar(&node.Socket, "socket", agentapi.SocketDefault(), "the agent's local API socket (its --api-socket; default from $"+agentapi.EnvSocket+")")
	output := fs.String("o", "compact", "output: compact (a line per event) or json (an object per line)")
	count := fs.Int("n", 0, "stop after this many events (0: until interrupted)")
	var f filter
	var ip string
	fs.StringVar(&f.typ, "type", "", "only events of this type: drop or trace")
	fs.StringVar(&f.reason, "drop-reason", "", "only drops of this reason (netcube_drops_total's reason label, e.g. no-endpoints)")
	fs.StringVar(&f.cube, "cube", "", "only events of this cube: lb, ct, nat, router, policy")
	fs.StringVar(&f.pod, "pod", "", "only events from or to this pod (namespace/name prefix; a bare name is in default)")
	fs.StringVar(&f.namespace, "namespace", "", "only events from or to pods of this namespace")
	fs.StringVar(&f.service, "service", "", "only events of this Service (namespace/name)")
	fs.StringVar(&f.proto, "protocol", "", "only this protocol: tcp, udp, icmp, icmpv6, sctp")
	fs.StringVar(&ip, "ip", "", "only events with this address as source, destination or translation")
	fs.UintVar(&f.port, "port", 0, "only events with this port as source, destination or translation")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: netcube monitor [flags]\n\nThe node's datapath events, live, from its agent.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "netcube monitor: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *output != "compact" && *output != "json" {
		fmt.Fprintf(stderr, "netcube monitor: -o %q: want compact or json\n", *output)
		return 2
	}
	if f.typ != "" && f.typ != "drop" && f.typ != "trace" {
		fmt.Fprintf(stderr, "netcube monitor: --type %q: want drop or trace\n", f.typ)
		return 2
	}
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			fmt.Fprintf(stderr, "netcube monitor: --ip %q is not an IP address\n", ip)
			return 2
		}
		f.ip = a.Unmap()
	}
	if f.port > 65535 {
		fmt.Fprintf(stderr, "netcube monitor: --port %d is out of range (1-65535)\n", f.port)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := stream(ctx, node, f, *output == "json", *count, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "netcube monitor: %v\n", err)
		return 1
	}
	return 0
}

func stream(ctx context.Context, node agentapi.Node, f filter, asJSON bool, count int, stdout, stderr io.Writer) error {
	resp, err := node.Get(ctx, monitor.APIPath)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	socket := node.Socket
	fmt.Fprintf(stderr, "Listening for events on %s (Ctrl-C to stop)\n", socket)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for sc.Scan() {
		line := sc.Bytes()
		var loss events.Loss
		if json.Unmarshal(line, &loss) == nil && loss != (events.Loss{}) {
			if loss.Subscriber != 0 {
				fmt.Fprintf(stderr, "LOST %d events: this monitor read slower than they came\n", loss.Subscriber)
			}
			if loss.Datapath != 0 {
				fmt.Fprintf(stderr, "LOST %d events: the datapath's ring buffer was full (packets were not lost)\n", loss.Datapath)
			}
			continue
		}
		var e events.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("agent sent %q: %w", line, err)
		}
		if !f.match(e) {
			continue
		}
		if asJSON {
			fmt.Fprintf(stdout, "%s\n", line)
		} else {
			fmt.Fprintln(stdout, e.String())
		}
		if seen++; count > 0 && seen >= count {
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the agent ended the stream (stopped?)")
}
