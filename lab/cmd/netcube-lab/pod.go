package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/netcube/netcube/lab/traffic"
)

// podCmd holds the tools that run inside sandbox pods.
func podCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: netcube-lab pod serve|request|load|hold|send|sniff|capture|slowloris|synflood")
	}
	fs := flag.NewFlagSet("pod "+args[0], flag.ExitOnError)
	switch args[0] {
	case "serve":
		name := fs.String("name", "", "name to answer with")
		port := fs.Int("port", 8080, "TCP and UDP port")
		sequential := fs.Bool("sequential", false, "TCP only, one connection at a time from one thread (benchmark server)")
		_ = fs.Parse(args[1:])
		if *sequential {
			return traffic.ServeSequential(*name, *port)
		}
		return traffic.Serve(*name, *port)
	case "send":
		dev := fs.String("dev", "", "send the Ethernet frames as they are out of this device (default: their IP packets, through the routes)")
		_ = fs.Parse(args[1:])
		if fs.NArg() == 0 {
			return errors.New("usage: netcube-lab pod send [--dev DEV] FRAME-HEX... (crafted packets: spoofed, cut short, not IP)")
		}
		var frames [][]byte
		for i, h := range fs.Args() {
			f, err := hex.DecodeString(h)
			if err != nil || len(f) < 14 {
				return fmt.Errorf("frame %d: not the hex of an Ethernet frame", i)
			}
			frames = append(frames, f)
		}
		if *dev != "" {
			dropped, err := traffic.SendFrame(*dev, frames)
			if dropped > 0 {
				fmt.Printf("%d of %d frames dropped by %s's egress\n", dropped, len(frames), *dev)
			}
			return err
		}
		for i := range frames {
			frames[i] = frames[i][14:]
		}
		return traffic.SendIP(frames)
	case "sniff":
		dev := fs.String("dev", "eth0", "the device to read")
		port := fs.Int("port", 0, "the TCP or UDP destination port to catch")
		vxlan := fs.Int("vxlan-port", 0, "catch VXLAN packets on this UDP port carrying the port: the outer and the inner DSCP (0: plain packets)")
		n := fs.Int("n", 5, "packets to catch")
		timeout := fs.Duration("timeout", 5*time.Second, "give up after")
		_ = fs.Parse(args[1:])
		seen, err := traffic.SniffDSCP(*dev, uint16(*port), uint16(*vxlan), *n, *timeout)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(seen)
	case "capture":
		dev := fs.String("dev", "eth0", "the device to read")
		marker := fs.String("marker", "", "count the frames whose bytes hold this string")
		d := fs.Duration("for", 3*time.Second, "how long to read")
		_ = fs.Parse(args[1:])
		enc := json.NewEncoder(os.Stdout)
		// A first line once the socket is bound: a sender started after
		// it is seen.
		caught, err := traffic.Capture(*dev, []byte(*marker), *d, func() { _ = enc.Encode(map[string]bool{"listening": true}) })
		if err != nil {
			return err
		}
		return enc.Encode(caught)
	case "slowloris":
		conns := fs.Int("conns", 100, "connections to hold")
		interval := fs.Duration("interval", 200*time.Millisecond, "pause between the bytes of each request")
		d := fs.Duration("for", 10*time.Second, "how long to attack")
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return errors.New("usage: netcube-lab pod slowloris [flags] HOST:PORT (a line once every connection was tried, then the report)")
		}
		enc := json.NewEncoder(os.Stdout)
		return enc.Encode(traffic.Slowloris(fs.Arg(0), *conns, *interval, *d, func(r traffic.SlowReport) { _ = enc.Encode(r) }))
	case "synflood":
		from := fs.String("from", "198.18.0.0/15", "spoofed sources: a new address (then port) of this prefix each SYN")
		rate := fs.Float64("rate", 10000, "SYNs a second")
		d := fs.Duration("for", 10*time.Second, "how long to flood")
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return errors.New("usage: netcube-lab pod synflood [flags] IPV4:PORT (a JSON line a second, then the report)")
		}
		to, err := netip.ParseAddrPort(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("synflood: %w", err)
		}
		src, err := netip.ParsePrefix(*from)
		if err != nil {
			return fmt.Errorf("synflood --from: %w", err)
		}
		enc := json.NewEncoder(os.Stdout)
		rep, err := traffic.SYNFlood(to, src, *rate, *d, func(r traffic.FloodReport) { _ = enc.Encode(r) })
		if err != nil {
			return err
		}
		return enc.Encode(rep)
	case "hold":
		c := traffic.Client{}
		fs.StringVar(&c.Proto, "proto", "tcp", "tcp or udp")
		fs.DurationVar(&c.Timeout, "timeout", 2*time.Second, "per-request timeout")
		count := fs.Int("count", 1000, "connections to hold")
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return errors.New("usage: netcube-lab pod hold [flags] HOST:PORT (then a line on stdin per check; EOF closes)")
		}
		c.Addr = fs.Arg(0)
		return hold(c, *count)
	case "request", "load":
		c := &traffic.Client{}
		fs.StringVar(&c.Proto, "proto", "tcp", "tcp or udp")
		fs.BoolVar(&c.CloseWithFIN, "fin", false, "TCP: close each connection with a FIN (default: a reset, so a client never runs out of ports to TIME_WAIT)")
		fs.BoolVar(&c.Persistent, "persistent", false, "one connection for all requests (default: a new one each)")
		fs.Float64Var(&c.Rate, "rate", 0, "load, TCP: requests a second (default: back to back)")
		fs.DurationVar(&c.Timeout, "timeout", 2*time.Second, "per-request timeout")
		count := fs.Int("count", 1, "requests to send (request; 0 = until killed)")
		interval := fs.Duration("interval", 0, "pause between requests (request)")
		duration := fs.Duration("duration", 5*time.Second, "how long to run (load)")
		source := fs.String("source", "", "local address to send from")
		fs.Func("source-port", "local port of request 0; request i uses this plus i (request)", func(v string) error {
			p, err := strconv.ParseUint(v, 10, 16)
			c.SourcePort = uint16(p)
			return err
		})
		_ = fs.Parse(args[1:])
		if *source != "" {
			ip, err := netip.ParseAddr(*source)
			if err != nil {
				return fmt.Errorf("--source: %w", err)
			}
			c.Source = ip
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: netcube-lab pod %s [flags] HOST:PORT", args[0])
		}
		c.Addr = fs.Arg(0)
		enc := json.NewEncoder(os.Stdout)
		if args[0] == "load" {
			return enc.Encode(traffic.Load(c, *duration))
		}
		// One JSON line per request, flushed at once, so a watcher sees
		// each result as it happens.
		for i := 0; *count == 0 || i < *count; i++ {
			if err := enc.Encode(c.Do(i)); err != nil {
				return err
			}
			time.Sleep(*interval)
		}
		c.Close()
		return nil
	}
	return fmt.Errorf("unknown pod command %q", args[0])
}

// hold opens count connections, prints their report (one JSON line), then
// checks them all for each line read on stdin, until EOF.
func hold(c traffic.Client, count int) error {
	h, rep := traffic.Hold(c, count)
	defer h.Close()
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(rep); err != nil {
		return err
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if err := enc.Encode(h.Check()); err != nil {
			return err
		}
	}
	return sc.Err()
}
