package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PodPort is where every sandbox pod serves TCP and UDP (netcube-lab pod serve).
const PodPort = 8080

// Example Services the sandbox starts with.
var (
	EchoIPs  = []string{"10.96.0.10", "fd00:10:96::10"} // backends on every node
	EmptyIPs = []string{"10.96.0.20", "fd00:10:96::20"} // no endpoints: refuses
)

// PortSpec is a Service or EndpointSlice port.
type PortSpec struct {
	Name       string
	Port       int
	Protocol   string // TCP or UDP
	TargetPort string // Service only: a number or an EndpointSlice port name
}

// EchoPorts are the example Service's ports: TCP 80 -> named port "http",
// UDP 8080 -> 8080.
var EchoPorts = []PortSpec{
	{Name: "http", Port: 80, Protocol: "TCP", TargetPort: "http"},
	{Name: "udp", Port: PodPort, Protocol: "UDP", TargetPort: fmt.Sprint(PodPort)},
}

// EndpointPorts are the matching EndpointSlice ports.
var EndpointPorts = []PortSpec{
	{Name: "http", Port: PodPort, Protocol: "TCP"},
	{Name: "udp", Port: PodPort, Protocol: "UDP"},
}

// ServiceYAML renders a dual-stack ClusterIP Service.
func ServiceYAML(name string, clusterIPs []string, ports []PortSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n", name)
	fmt.Fprintf(&b, "  type: ClusterIP\n  ipFamilyPolicy: PreferDualStack\n  clusterIP: %s\n  clusterIPs:\n", clusterIPs[0])
	for _, ip := range clusterIPs {
		fmt.Fprintf(&b, "  - %s\n", ip)
	}
	b.WriteString("  ports:\n")
	for _, p := range ports {
		fmt.Fprintf(&b, "  - name: %s\n    port: %d\n    protocol: %s\n    targetPort: %s\n", p.Name, p.Port, p.Protocol, p.TargetPort)
	}
	return b.String()
}

// SliceYAML renders the EndpointSlice of service for one address family,
// with the given pods as ready endpoints.
func SliceYAML(service string, ipv6 bool, ports []PortSpec, pods []Pod) string {
	family, suffix := "IPv4", "ipv4"
	if ipv6 {
		family, suffix = "IPv6", "ipv6"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-%s\n  namespace: default\n", service, suffix)
	fmt.Fprintf(&b, "  labels:\n    kubernetes.io/service-name: %s\naddressType: %s\nports:\n", service, family)
	for _, p := range ports {
		fmt.Fprintf(&b, "- name: %s\n  port: %d\n  protocol: %s\n", p.Name, p.Port, p.Protocol)
	}
	b.WriteString("endpoints:")
	if len(pods) == 0 {
		b.WriteString(" []")
	}
	b.WriteString("\n")
	for _, p := range pods {
		addr := p.IP4.String()
		if ipv6 {
			addr = p.IP6.String()
		}
		fmt.Fprintf(&b, "- addresses: [\"%s\"]\n  conditions: {ready: true}\n  nodeName: %s\n  targetRef: {kind: Pod, name: %s}\n", addr, p.Node, p.Name)
	}
	return b.String()
}

// ClientPod is the pod the demo and tests send from; every other pod backs
// the echo Service.
func (t Topology) ClientPod() Pod { return t.Nodes[0].Pods[0] }

// EchoBackends are the pods behind the echo Service.
func (t Topology) EchoBackends() []Pod {
	var out []Pod
	for _, p := range t.Pods() {
		if p.Name != t.ClientPod().Name {
			out = append(out, p)
		}
	}
	return out
}

// ExampleManifests renders the example Services and their EndpointSlices.
func (t Topology) ExampleManifests() map[string]string {
	return map[string]string{
		"echo.yaml": "# Dual-stack echo Service, TCP and UDP, with backends on every node.\n" +
			ServiceYAML("echo", EchoIPs, EchoPorts) + "---\n" +
			SliceYAML("echo", false, EndpointPorts, t.EchoBackends()) + "---\n" +
			SliceYAML("echo", true, EndpointPorts, t.EchoBackends()),
		"empty.yaml": "# A Service without endpoints: connections are refused at once.\n" +
			ServiceYAML("empty", EmptyIPs, EchoPorts),
	}
}

// PodLabels are a sandbox pod's labels: app=client for the client pod,
// app=echo for the echo Service's backends, and pod=<its name> (what
// NetworkPolicies select them by).
func (t Topology) PodLabels(p Pod) map[string]string {
	app := "echo"
	if p.Name == t.ClientPod().Name {
		app = "client"
	}
	return map[string]string{"app": app, "pod": p.Name}
}

// PodsYAML renders the sandbox's pods as Pod objects in the default
// namespace (and the namespace itself): their nodes, addresses, labels
// and the named ports they serve, what NetworkPolicy is enforced from.
func (t Topology) PodsYAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n  labels: {kubernetes.io/metadata.name: default}\n")
	for _, p := range t.Pods() {
		l := t.PodLabels(p)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  labels: {app: %s, pod: %s}\n", p.Name, l["app"], l["pod"])
		fmt.Fprintf(&b, "spec:\n  nodeName: %s\n  containers:\n  - name: pod\n    image: netcube\n    ports:\n", p.Node)
		for _, port := range EndpointPorts {
			fmt.Fprintf(&b, "    - {name: %s, containerPort: %d, protocol: %s}\n", port.Name, port.Port, port.Protocol)
		}
		fmt.Fprintf(&b, "status:\n  phase: Running\n  podIP: \"%s\"\n  podIPs: [{ip: \"%s\"}, {ip: \"%s\"}]\n", p.IP4, p.IP4, p.IP6)
	}
	return b.String()
}

// NodesYAML renders the nodes' Node objects: their pod CIDRs (read by
// their agents and the CNI plugin) and addresses.
func (t Topology) NodesYAML() string {
	var b strings.Builder
	for i, n := range t.Nodes {
		if i > 0 {
			b.WriteString("---\n")
		}
		// (An annotation, as kubelet always leaves some: flannel writes
		// its own into the map it finds.)
		labels := ""
		if n.Rack > 0 { // a routed sandbox's rack (its NetworkBGPPeering selects it)
			labels = fmt.Sprintf("  labels: {%s: %s}\n", RackLabel, RackName(n.Rack))
		}
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n%s  annotations: {netcube.io/sandbox: \"true\"}\nspec:\n  podCIDRs: [\"%s\", \"%s\"]\n"+
			"status:\n  addresses:\n  - {type: InternalIP, address: \"%s\"}\n  - {type: InternalIP, address: \"%s\"}\n",
			n.Name, labels, n.PodNet, n.PodNet6, n.IP4, n.IP6)
	}
	return b.String()
}

// WriteManifest atomically writes one manifest file the agents watch.
func (t Topology) WriteManifest(file, content string) error {
	tmp := filepath.Join(t.ManifestDir(), "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(t.ManifestDir(), file))
}
