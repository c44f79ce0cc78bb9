package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/netcube/netcube/pkg/images"
)

// imageCmd builds netcube's agent image into an archive a container
// runtime imports (`ctr -n k8s.io images import FILE`): there is no
// registry to push to or pull from here.
func imageCmd(args []string) error {
	if len(args) == 0 || args[0] != "agent" {
		return errors.New("usage: netcube image agent --bin DIR --out FILE")
	}
	fs := flag.NewFlagSet("image agent", flag.ExitOnError)
	bin := fs.String("bin", "bin/static", "directory with static (CGO_ENABLED=0) netcube-agent and netcube-cni")
	out := fs.String("out", "bin/images/netcube-agent.tar", "archive to write")
	_ = fs.Parse(args[1:])
	img, err := images.Build(images.Agent(*bin))
	if err != nil {
		return err
	}
	if err := images.WriteArchive(*out, images.AgentRef, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s (%s) -> %s\n", images.AgentRef, d, *out)
	return nil
}
