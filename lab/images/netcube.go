package images

import "path/filepath"

// AgentRef is the agent image's name, as the Helm chart's default values
// ask for it (deploy/helm/netcube/values.yaml).
const AgentRef = "ghcr.io/netcube/netcube-agent:0.1.0"

// Agent is netcube's agent image: the agent, the CNI plugin (which the
// agent copies onto the node), netcube-operator (the chart's
// Deployment runs it from the same image) and the netcube CLI (kubectl
// exec ds/netcube-agent -- netcube status: its defaults are the chart's
// paths), from binDir, which must hold static builds
// (CGO_ENABLED=0: the image has no libc).
func Agent(binDir string) Spec {
	return Spec{
		Ref: AgentRef,
		Files: []File{
			{Source: filepath.Join(binDir, "netcube-agent"), Path: "/usr/local/bin/netcube-agent", Mode: 0o755},
			{Source: filepath.Join(binDir, "netcube-cni"), Path: "/usr/local/bin/netcube-cni", Mode: 0o755},
			{Source: filepath.Join(binDir, "netcube-operator"), Path: "/usr/local/bin/netcube-operator", Mode: 0o755},
			{Source: filepath.Join(binDir, "netcube"), Path: "/usr/local/bin/netcube", Mode: 0o755},
		},
		Entrypoint: []string{"/usr/local/bin/netcube-agent"},
	}
}

// HubbleRelayRef is the hubble-relay image's name, as the Helm chart's
// default values ask for it (hubble.relay.image).
const HubbleRelayRef = "ghcr.io/netcube/hubble-relay:1.20.2"

// HubbleRelay is cilium's hubble-relay (built by hack/build-tools.sh, a
// static binary) as an image, for the chart's hubble.relay Deployment:
// binDir holds hubble-relay.
func HubbleRelay(binDir string) Spec {
	return Spec{
		Ref:        HubbleRelayRef,
		Files:      []File{{Source: filepath.Join(binDir, "hubble-relay"), Path: "/usr/local/bin/hubble-relay", Mode: 0o755}},
		Entrypoint: []string{"/usr/local/bin/hubble-relay"},
	}
}
