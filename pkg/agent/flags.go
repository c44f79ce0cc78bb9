package agent

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes"
)

// ParseFlags reads the agent's command line over base (the defaults, with
// the node name from the environment): the --config file, if one is given,
// then every flag given, so that a flag on the command line wins over the
// file, and the file over the defaults. cleanup is --cleanup.
func ParseFlags(name string, args []string, base Config) (cfg Config, cleanup bool, err error) {
	first := clone(base)
	fs, file, clean := flagSet(name, &first)
	if err := fs.Parse(args); err != nil {
		return Config{}, false, err
	}
	if *file == "" {
		return first, *clean, nil
	}
	// Again, over the file: the flags given overwrite what it set.
	cfg = clone(base)
	if err := LoadFile(*file, &cfg); err != nil {
		return Config{}, false, err
	}
	fs, _, _ = flagSet(name, &cfg)
	if err := fs.Parse(args); err != nil {
		return Config{}, false, err
	}
	return cfg, *clean, nil
}

func clone(c Config) Config {
	c.MapSizes = maps.Clone(c.MapSizes)
	c.NodeInterfaces = slices.Clone(c.NodeInterfaces)
	c.NoMasquerade = slices.Clone(c.NoMasquerade)
	c.L2HeartbeatAddrs = slices.Clone(c.L2HeartbeatAddrs)
	c.HubbleMetrics = slices.Clone(c.HubbleMetrics)
	c.Hubble.TLSClientCAFiles = slices.Clone(c.Hubble.TLSClientCAFiles)
	return c
}

// flagSet binds every flag to a field of cfg.
func flagSet(name string, cfg *Config) (fs *flag.FlagSet, configFile *string, cleanup *bool) {
	fs = flag.NewFlagSet(name, flag.ContinueOnError)
	configFile = fs.String("config", "", "config file (YAML, fields as in pkg/agent.Config); flags given override it")
	cleanup = fs.Bool("cleanup", false, "remove everything pinned under --bpf-root (detaches the datapath, drops flow state) and exit")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig of the API server (default: in-cluster config)")
	fs.BoolVar(&cfg.APICompression, "api-compression", cfg.APICompression, "ask the API server for gzip-compressed lists (saves bandwidth, costs the API server CPU per list)")
	fs.StringVar(&cfg.APIContentType, "api-content-type", cfg.APIContentType, "the encoding asked of the API server: protobuf or json")
	fs.BoolVar(&cfg.APIWatchList, "api-watch-list", cfg.APIWatchList, "list each resource as one watch that begins with every object (the API server's WatchList streaming) instead of paged lists then a watch")
	fs.Int64Var(&cfg.APIListPageSize, "api-list-page-size", cfg.APIListPageSize, "objects per list request (0: the default, 10,000); the API server walks the rest of the list for every page, so more pages cost it more")
	fs.StringVar(&cfg.PodSource, "pod-source", cfg.PodSource, "where NetworkPolicy's pods come from: pods (every Pod object) or nodepods (this node's Pods, and the NodePods other nodes' agents write)")
	fs.StringVar(&cfg.Manifests, "manifests", cfg.Manifests, "instead of the API: a directory of Service and EndpointSlice YAML, watched for changes")
	fs.StringVar(&cfg.ProxyName, "proxy-name", cfg.ProxyName, "handle only Services labelled service.kubernetes.io/service-proxy-name=<this> (default: unlabelled ones)")
	fs.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "this node's name (default $NODE_NAME, then the hostname)")
	fs.StringVar(&cfg.Datapath, "datapath", cfg.Datapath, "kernel (the BPF datapath) or memory (a hollow agent: maps in memory, nothing attached, no root; for control-plane scale tests)")
	fs.StringVar(&cfg.BPFRoot, "bpf-root", cfg.BPFRoot, "bpffs directory for this node's pinned maps and links")
	fs.BoolVar(&cfg.SocketLB, "socket-lb", cfg.SocketLB, "translate pod->Service at connect time (cgroup hooks); off: per-packet tc path only")
	fs.StringVar(&cfg.Cgroup, "cgroup", cfg.Cgroup, "cgroup v2 directory holding the pods (socket-LB attaches here, never to the root cgroup)")
	fs.StringVar(&cfg.PodIfacePrefix, "pod-iface-prefix", cfg.PodIfacePrefix, "host-side pod veths are named <prefix>*")
	fs.StringVar(&cfg.Routing, "routing", cfg.Routing, "how pods reach other nodes' pods: native (the underlay routes pod CIDRs; a route per node is installed), vxlan (an overlay), or kernel (native routes, the kernel forwarding every pod packet: the stack-routed reference)")
	fs.BoolVar(&cfg.Masquerade, "masquerade", cfg.Masquerade, "pods' traffic to outside the cluster leaves with the node's address")
	fs.Func("no-masquerade", "CIDRs, comma-separated, that pods reach with their own address besides the cluster's (nodes' pod CIDRs and addresses)", func(v string) error {
		cfg.NoMasquerade = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&cfg.CNISocket, "cni-socket", cfg.CNISocket, "unix socket where the CNI plugin reports pods (\"\": off)")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", cfg.CNIConfDir, "install the CNI conflist for this node's pod CIDRs here, e.g. /etc/cni/net.d (\"\": don't)")
	fs.StringVar(&cfg.HostPortPlugin, "host-port-plugin", cfg.HostPortPlugin, "CNI plugin chained for pods' hostPorts, when the CNI bin directory has it (\"portmap\"; \"\": none)")
	fs.StringVar(&cfg.CNIBinDir, "cni-bin-dir", cfg.CNIBinDir, "copy the netcube-cni plugin (beside the agent's binary) here, e.g. /opt/cni/bin (\"\": don't)")
	fs.StringVar(&cfg.IPAMDir, "ipam-dir", cfg.IPAMDir, "where the CNI plugin keeps pod address allocations (written into the conflist)")
	fs.StringVar(&cfg.PodDevice, "pod-device", cfg.PodDevice, "the device pair new pods get: veth, or netkit (Linux 6.7+: netcube's programs are the pair's own, a pod's packets enter the datapath as it transmits; pods keep the device they have)")
	fs.IntVar(&cfg.MTU, "mtu", cfg.MTU, "MTU of pod interfaces (0: the uplinks', less the overlay's overhead with --routing vxlan)")
	fs.StringVar(&cfg.APISocket, "api-socket", cfg.APISocket, "unix socket of the agent's local API, for the netcube CLI (\"\": off)")
	fs.StringVar(&cfg.HubbleSocket, "hubble-socket", cfg.HubbleSocket, "unix socket of the Hubble Observer API (hubble observe --server unix://<it>; \"\": off)")
	fs.Func("hubble-metrics", "Hubble metrics served on /metrics, comma-separated, as Cilium names them (default "+strings.Join(cfg.HubbleMetrics, ",")+"; \"\": none)", func(v string) error {
		cfg.HubbleMetrics = []string{} // none
		if v != "" {
			cfg.HubbleMetrics = strings.Split(v, ",")
		}
		return nil
	})
	fs.StringVar(&cfg.Hubble.ListenAddress, "hubble-listen-address", cfg.Hubble.ListenAddress, "TCP address of the Hubble Observer and Peer APIs, for hubble-relay (\"\": off); mutual TLS, so it needs --hubble-tls-cert-file, --hubble-tls-key-file and --hubble-tls-client-ca-files, or --hubble-disable-tls. The default takes effect only once those are given; another address without them is an error")
	fs.StringVar(&cfg.Hubble.TLSCertFile, "hubble-tls-cert-file", cfg.Hubble.TLSCertFile, "PEM certificate of the Hubble TCP listener (naming <node>.<cluster>.hubble-grpc.cilium.io, or *.<cluster>.hubble-grpc.cilium.io)")
	fs.StringVar(&cfg.Hubble.TLSKeyFile, "hubble-tls-key-file", cfg.Hubble.TLSKeyFile, "PEM key of --hubble-tls-cert-file")
	fs.Func("hubble-tls-client-ca-files", "PEM CA files, comma-separated, that a Hubble client's certificate must be signed by (a client without one is refused)", func(v string) error {
		cfg.Hubble.TLSClientCAFiles = strings.Split(v, ",")
		return nil
	})
	fs.BoolVar(&cfg.Hubble.DisableTLS, "hubble-disable-tls", cfg.Hubble.DisableTLS, "serve --hubble-listen-address as plain TCP: whoever reaches it reads every flow of the node")
	fs.StringVar(&cfg.ClusterName, "cluster-name", cfg.ClusterName, "the cluster's name, in the TLS server names the Hubble Peer service tells (<node>.<cluster>.hubble-grpc.cilium.io)")
	fs.BoolVar(&cfg.Monitor.Drops, "monitor-drops", cfg.Monitor.Drops, "report each dropped packet as an event (drops are counted either way)")
	fs.BoolVar(&cfg.Monitor.Policy, "monitor-policy", cfg.Monitor.Policy, "report each connection a NetworkPolicy allowed as an event")
	fs.BoolVar(&cfg.Monitor.Cubes, "monitor-cubes", cfg.Monitor.Cubes, "count the packets and bytes each cube handled (netcube_cube_packets_total, _bytes_total)")
	fs.BoolVar(&cfg.Monitor.Trace, "monitor-trace", cfg.Monitor.Trace, "report the first packet of each flow a cube translated (backend, SNAT, masquerade) as an event")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", cfg.MetricsBindAddress, "address of /metrics (\"\": off; host \"node\": the node's address, $NODE_IP)")
	fs.StringVar(&cfg.HealthzBindAddress, "healthz-bind-address", cfg.HealthzBindAddress, "address of /healthz and /readyz (\"\": off; host \"node\": the node's address, $NODE_IP)")
	fs.DurationVar(&cfg.APIUnreachableGrace.Duration, "api-unreachable-grace", cfg.APIUnreachableGrace.Duration,
		"how long the API server may be unreachable before /readyz fails (the datapath keeps its last state)")
	fs.StringVar(&cfg.ReadyFile, "ready-file", cfg.ReadyFile, "file written once the first sync is applied")
	fs.BoolVar(&cfg.Profiling, "profiling", cfg.Profiling, "serve /debug/pprof on the metrics address")
	fs.Func("node-ifaces", "the node's uplinks, comma-separated: NodePorts, ExternalIPs and LoadBalancer IPs are served there (default: the default routes' interfaces; none: no external access)", func(v string) error {
		cfg.NodeInterfaces = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&cfg.NodePortAcceleration, "nodeport-acceleration", cfg.NodePortAcceleration, "where the uplinks serve NodePort, ExternalIP and LoadBalancer traffic: none (tc) or xdp (XDP first, native where the driver has it, else generic: flows to backends on other nodes forwarded and walled sources dropped there, the rest passed to tc)")
	fs.StringVar(&cfg.NodePortMode, "nodeport-mode", cfg.NodePortMode, "how flows from outside reach backends on other nodes: snat (through the node they came in on), dsr (direct server return: the backend's node answers the client; the frontend in an IPv4 option / IPv6 destination option; needs --routing native or kernel), or hybrid (DSR for TCP, SNAT for UDP)")
	fs.StringVar(&cfg.LBAlgorithm, "lb-algorithm", cfg.LBAlgorithm, "how new flows pick a backend unless their Service's netcube.io/lb-algorithm annotation says: random or maglev")
	fs.StringVar(&cfg.NodePortRange, "nodeport-range", cfg.NodePortRange, "NodePort range (lo-hi) that the node's own processes may not bind (socket-LB)")
	fs.BoolVar(&cfg.LoadBalancerIPs, "load-balancer-ips", cfg.LoadBalancerIPs, "netcube-operator assigns LoadBalancer IPs from the NetworkLoadBalancerPools: serve only ingress addresses in a pool (false: another controller assigns them, every one is served)")
	fs.StringVar(&cfg.L2Announce, "l2-announce", cfg.L2Announce, "who answers ARP/NDP for a LoadBalancer IP on the uplinks: elected (one node per address, from UDP heartbeats between the agents; gratuitous ARP/NA on takeover) or all (every eligible node)")
	fs.IntVar(&cfg.L2HeartbeatPort, "l2-heartbeat-port", cfg.L2HeartbeatPort, "UDP port of the agents' heartbeats for --l2-announce elected, on the uplinks' addresses (0: none; every eligible node announces)")
	fs.DurationVar(&cfg.L2HeartbeatInterval.Duration, "l2-heartbeat-interval", cfg.L2HeartbeatInterval.Duration, "how often each agent sends its heartbeat to every other node for --l2-announce elected (a node is dead after 3 without one)")
	fs.Func("l2-heartbeat-addrs", "a hollow agent's (--datapath=memory) loopback addresses, comma-separated, to bind the heartbeats to: its Node object's InternalIPs (default: none, no election)", func(v string) error {
		cfg.L2HeartbeatAddrs = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&cfg.UplinkRate, "uplink-rate", cfg.UplinkRate, "what the uplinks send while network slices queue them, in bits per second (\"900M\"; \"\": each uplink's speed, 10G for a veth): a little under the real bottleneck, so the queue forms where the latency class goes first")
	fs.BoolVar(&cfg.Conntrack.EarlyDrop, "conntrack-early-drop", cfg.Conntrack.EarlyDrop, "a full conntrack table evicts its oldest flow not yet answered for a new flow (false: it refuses new flows until entries time out)")
	fs.IntVar(&cfg.GCPercent, "gc-percent", cfg.GCPercent, "Go GC target percentage (GOGC); the GOGC environment variable wins")
	for _, d := range []struct {
		flag, help string
		v          *time.Duration
	}{
		{"conntrack-tcp-timeout-established", "idle time after which an answered TCP flow is forgotten", &cfg.Conntrack.TCPEstablished.Duration},
		{"conntrack-tcp-timeout-close", "idle time after which a reset TCP flow, or one closed without its last ACK seen, is forgotten", &cfg.Conntrack.TCPClose.Duration},
		{"conntrack-tcp-timeout-syn", "idle time after which a TCP flow never answered is forgotten", &cfg.Conntrack.TCPSyn.Duration},
		{"conntrack-udp-timeout", "idle time after which a UDP flow never answered is forgotten", &cfg.Conntrack.UDP.Duration},
		{"conntrack-udp-timeout-stream", "idle time after which an answered UDP flow is forgotten", &cfg.Conntrack.UDPStream.Duration},
		{"conntrack-gc-interval", "how often timed-out conntrack entries are removed", &cfg.Conntrack.GCInterval.Duration},
	} {
		fs.DurationVar(d.v, d.flag, *d.v, d.help)
	}
	for f, ms := range sizeFlags(cubes.All) {
		fs.Func(f, fmt.Sprintf("entries of map %s (default %d)", strings.Join(ms.maps, ", "), ms.size), func(v string) error {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return err
			}
			if cfg.MapSizes == nil {
				cfg.MapSizes = map[string]uint32{}
			}
			for _, m := range ms.maps {
				cfg.MapSizes[m] = uint32(n)
			}
			return nil
		})
	}
	return fs, configFile, cleanup
}

// sizedMaps are the maps one size flag sizes, and their default.
type sizedMaps struct {
	maps []string
	size uint32
}

// sizeFlags collects the size flags the cubes declare: a flag may size
// several maps (of one cube or of several).
func sizeFlags(cs []cube.Cube) map[string]sizedMaps {
	out := map[string]sizedMaps{}
	for _, c := range cs {
		for _, m := range c.Maps() {
			if m.SizeFlag == "" {
				continue
			}
			f := out[m.SizeFlag]
			f.maps = append(f.maps, m.Name)
			slices.Sort(f.maps)
			f.size = max(f.size, m.DefaultSize)
			out[m.SizeFlag] = f
		}
	}
	return out
}
