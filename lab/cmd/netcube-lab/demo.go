package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

// demoCmd (re)starts the sandbox with the example Services and sends real
// requests from a pod to each frontend, printing who answered.
func demoCmd(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	name := fs.String("name", "nc", "sandbox name")
	socketLB := fs.Bool("socket-lb", true, "socket-level LB (off: per-packet tc path only)")
	routing := fs.String("routing", "native", "how pods reach other nodes' pods: native or vxlan")
	requests := fs.Int("requests", 12, "requests per frontend")
	_ = fs.Parse(args)

	_ = sandbox.Down(*name, &bytes.Buffer{}) // a demo always starts clean
	sb, err := sandbox.Up(sandbox.Config{Name: *name, SocketLB: *socketLB, Routing: *routing}, os.Stdout)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	client := sb.Topology.ClientPod()
	fmt.Printf("\nrequests from pod %s (%s, %s):\n", client.Name, client.IP4, client.IP6)
	type target struct {
		service, ip, proto string
		port               int
	}
	var targets []target
	for _, ip := range sandbox.EchoIPs {
		for _, p := range sandbox.EchoPorts {
			targets = append(targets, target{"echo", ip, strings.ToLower(p.Protocol), p.Port})
		}
	}
	for _, ip := range sandbox.EmptyIPs {
		targets = append(targets, target{"empty", ip, "tcp", 80}, target{"empty", ip, "udp", sandbox.PodPort})
	}
	failed := 0
	for _, tg := range targets {
		addr := net.JoinHostPort(tg.ip, strconv.Itoa(tg.port))
		out, err := sb.Output(client.Name, self, "pod", "request", "--proto", tg.proto,
			"--count", strconv.Itoa(*requests), addr)
		if err != nil {
			return err
		}
		answered, errs := map[string]int{}, map[string]int{}
		var worst float64
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var r traffic.Result
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return fmt.Errorf("request output %q: %w", sc.Text(), err)
			}
			if r.Err != "" {
				errs[shortErr(r.Err)]++
			} else {
				answered[r.Backend]++
			}
			worst = max(worst, r.Micros)
		}
		fmt.Printf("  %-6s %-4s %-24s ", tg.service, strings.ToUpper(tg.proto), addr)
		if tg.service == "empty" {
			fmt.Printf("refused: %s (slowest %.1f ms)\n", formatCounts(errs), worst/1000)
			if len(answered) > 0 {
				failed++
			}
			continue
		}
		fmt.Printf("answered by %s\n", formatCounts(answered))
		if len(errs) > 0 {
			fmt.Printf("         errors: %s\n", formatCounts(errs))
			failed++
		}
	}
	podFailures, err := demoPodNetwork(sb, self)
	if err != nil {
		return err
	}
	failed += podFailures
	printOperatorCommands(sb)
	fmt.Printf("\nthe sandbox stays up: netcube-lab sandbox status; netcube-lab sandbox down\n")
	if failed > 0 {
		return fmt.Errorf("%d frontends did not behave as expected", failed)
	}
	return nil
}

func shortErr(e string) string {
	if i := strings.LastIndex(e, ": "); i >= 0 {
		return e[i+2:]
	}
	return e
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// demoPodNetwork sends requests from the client pod to every other pod
// directly, on its node and on the other, and to a server outside the
// cluster, which says whose address it saw (the node's: masqueraded).
func demoPodNetwork(sb *sandbox.Sandbox, self string) (failed int, err error) {
	client := sb.Topology.ClientPod()
	outside, err := sb.StartOutsideServer()
	if err != nil {
		return 0, err
	}
	fmt.Printf("\npod network (%s routing), from pod %s:\n", sb.Config.Routing, client.Name)
	type target struct{ what, addr string }
	var targets []target
	for _, p := range sb.Topology.Pods() {
		if p.Name == client.Name {
			continue
		}
		where := "same node"
		if p.Node != client.Node {
			where = "other node"
		}
		for _, a := range []string{p.IP4.String(), p.IP6.String()} {
			targets = append(targets, target{fmt.Sprintf("pod %s (%s)", p.Name, where), net.JoinHostPort(a, strconv.Itoa(sandbox.PodPort))})
		}
	}
	for _, o := range outside {
		targets = append(targets, target{"outside the cluster", o})
	}
	for _, tg := range targets {
		out, err := sb.Output(client.Name, self, "pod", "request", "--count", "3", "--timeout", "1s", tg.addr)
		if err != nil {
			return failed, err
		}
		seen, errs := map[string]int{}, map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var r traffic.Result
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return failed, fmt.Errorf("request output %q: %w", sc.Text(), err)
			}
			if r.Err != "" {
				errs[shortErr(r.Err)]++
			} else {
				seen[r.Peer]++
			}
		}
		fmt.Printf("  %-26s %-26s ", tg.what, tg.addr)
		if len(errs) > 0 {
			fmt.Printf("errors: %s\n", formatCounts(errs))
			failed++
			continue
		}
		fmt.Printf("answered, seeing the client as %s\n", formatCounts(seen))
	}
	return failed, nil
}
