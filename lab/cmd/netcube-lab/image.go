package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/netcube/netcube/lab/images"
)

// imageCmd builds netcube's agent image, cilium's hubble-relay (from
// hack/build-tools.sh's directory), or the pause (pod sandbox) image, into an archive a container runtime imports (`ctr -n k8s.io
// images import FILE`): there is no registry to push to or pull from here.
func imageCmd(args []string) error {
	if len(args) == 0 || (args[0] != "agent" && args[0] != "hubble-relay" && args[0] != "pause") {
		return errors.New("usage: netcube-lab image agent|hubble-relay|pause [--bin DIR] --out FILE")
	}
	fs := flag.NewFlagSet("image "+args[0], flag.ExitOnError)
	bin := fs.String("bin", "bin/static", "agent: directory with static (CGO_ENABLED=0) netcube-agent and netcube-cni; hubble-relay: hack/build-tools.sh's directory")
	out := fs.String("out", "bin/images/"+args[0]+".tar", "archive to write")
	_ = fs.Parse(args[1:])
	spec := images.Agent(*bin)
	if args[0] == "hubble-relay" {
		spec = images.HubbleRelay(*bin)
	}
	if args[0] == "pause" {
		dir, err := os.MkdirTemp("", "netcube-pause-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if spec, err = images.Pause(dir); err != nil {
			return err
		}
	}
	img, err := images.Build(spec)
	if err != nil {
		return err
	}
	if err := images.WriteArchive(*out, img, spec.Refs()...); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s (%s) -> %s\n", spec.Ref, d, *out)
	return nil
}
