package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/netcube/netcube/pkg/bench"
)

func benchCmd(args []string) error {
	if len(args) == 0 || args[0] != "datapath" {
		return errors.New("usage: netcube bench datapath [--duration 5s] [--runs 5] [--out docs/benchmarks]")
	}
	fs := flag.NewFlagSet("bench datapath", flag.ExitOnError)
	cfg := bench.DatapathConfig{Log: os.Stdout}
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of each measurement")
	fs.IntVar(&cfg.Runs, "runs", 5, "repetitions (medians are reported)")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for datapath.json and datapath.md (\"\": none)")
	_ = fs.Parse(args[1:])
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	results, err := bench.Datapath(&cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(bench.Markdown(cfg, results))
	return nil
}
