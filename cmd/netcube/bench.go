package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/netcube/netcube/pkg/bench"
)

func benchCmd(args []string) error {
	if len(args) > 0 && args[0] == "sync" {
		return benchSync(args[1:])
	}
	if len(args) == 0 || args[0] != "datapath" {
		return errors.New("usage: netcube bench datapath|sync [flags]")
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

func benchSync(args []string) error {
	fs := flag.NewFlagSet("bench sync", flag.ExitOnError)
	services := fs.String("services", "1000,10000,30000,100000", "cluster sizes (Services), ascending")
	endpoints := fs.String("endpoints", "1,10", "endpoints per Service")
	cfg := bench.SyncConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Changes, "changes", 100, "endpoint changes timed per size")
	fs.IntVar(&cfg.Starts, "starts", 3, "agent starts (and restarts) per size; full-sync figures are their medians")
	fs.BoolVar(&cfg.Merge, "merge", false, "add to the points already in the report instead of replacing it")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for sync.json and sync.md (\"\": none)")
	_ = fs.Parse(args)
	var err error
	if cfg.Services, err = ints(*services); err != nil {
		return err
	}
	if cfg.Endpoints, err = ints(*endpoints); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	results, err := bench.Sync(cfg)
	if err != nil {
		return err
	}
	fmt.Print(bench.SyncMarkdown(cfg, results, time.Now()))
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}
