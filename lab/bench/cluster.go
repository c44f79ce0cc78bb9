package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// The comparison's cluster: one sandbox node whose Service data plane is
// swapped between peers, four pods on it, and a client outside.
//
//	n1p1  client (and a second address for pod->pod runs)
//	n1p2  the "bench" Service's backend: request/response server and iperf3
//	n1p3, n1p4  the "churn" Service's replicas (the sandbox's echo servers)
type cluster struct {
	sb                     *sandbox.Sandbox
	env                    *kubeenv.Env
	controlPlane           controlPlane // its kube-apiserver and etcd
	node                   sandbox.Node
	client, server, r1, r2 sandbox.Pod
	binDir                 string
	log                    io.Writer
	fillers                int // other Services stored so far
	stopServers            func()
}

// The measured Services' addresses and ports.
var (
	benchIPs = []string{"10.96.0.100", "fd00:10:96::100"}
	churnIPs = []string{"10.96.0.101", "fd00:10:96::101"}
)

const (
	rrNodePort    = 30080
	iperfNodePort = 30201
	churnPort     = 80
	// Room for 100,000 dual-stack Services.
	compareServiceCIDRs = "10.96.0.0/12,fd00:10:96::/108"
)

func newCluster(name, binDir string, agentArgs []string, log io.Writer) (*cluster, error) {
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{
		Name: name, Nodes: 1, PodsPerNode: 4, SocketLB: true, APIServer: true, BinDir: binDir,
		ServiceCIDRs: compareServiceCIDRs,
		AgentArgs: append([]string{"--lb-service-map-size", "1000000", "--lb-backend-map-size", "500000", "--lb-revnat-map-size", "500000"},
			agentArgs...),
	}, log)
	if err != nil {
		return nil, err
	}
	c := &cluster{sb: sb, node: sb.Topology.Nodes[0], binDir: binDir, log: log}
	pods := c.node.Pods
	c.client, c.server, c.r1, c.r2 = pods[0], pods[1], pods[2], pods[3]
	if err := c.setup(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *cluster) setup() error {
	var err error
	if c.env, err = c.sb.Env(); err != nil {
		return err
	}
	if c.controlPlane, err = controlPlaneOf(c.env); err != nil {
		return err
	}
	// The sandbox's agent stops: each peer starts on a clean node.
	if err := (&netcubePeer{sb: c.sb, node: c.node}).stop(); err != nil {
		return err
	}
	ctx := context.Background()
	api := c.env.Client
	for _, name := range []string{"echo", "empty"} { // the sandbox's examples: not part of the measurement
		if err := api.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	node, err := api.CoreV1().Nodes().Get(ctx, c.node.Name, metav1.GetOptions{}) // the sandbox created it
	if err != nil {
		return err
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: c.node.IP4.String()}, {Type: corev1.NodeInternalIP, Address: c.node.IP6.String()}}
	if _, err := api.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	for _, s := range []*corev1.Service{
		measuredService("bench", benchIPs, corev1.ServiceTypeNodePort, []corev1.ServicePort{
			{Name: "rr", Port: 80, TargetPort: intstr.FromInt32(rrPort), NodePort: rrNodePort},
			{Name: "iperf", Port: iperfPort, TargetPort: intstr.FromInt32(iperfPort), NodePort: iperfNodePort},
		}),
		measuredService("churn", churnIPs, corev1.ServiceTypeClusterIP, []corev1.ServicePort{
			{Name: "echo", Port: churnPort, TargetPort: intstr.FromInt32(sandbox.PodPort)},
		}),
	} {
		if _, err := api.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Service %s: %w", s.Name, err)
		}
	}
	if err := c.setEndpoints("bench", bothFamilies, []int32{rrPort, iperfPort}, []string{"rr", "iperf"}, c.server); err != nil {
		return err
	}
	if err := c.setEndpoints("churn", bothFamilies, []int32{sandbox.PodPort}, []string{"echo"}, c.r1); err != nil {
		return err
	}
	if err := c.sb.Topology.AddPodAddress(c.client.Name, directSrc4, directSrc6); err != nil {
		return err
	}
	// Request/response server on CPU 1 with its client (unpinned,
	// cross-CPU wake-ups dominate latency); iperf3 server on CPU 1, its
	// client on CPU 0.
	servers := []*exec.Cmd{
		pinned(1, filepath.Join(c.binDir, sandbox.LabBinary), "pod", "serve", "--sequential", "--name", "bench", "--port", strconv.Itoa(rrPort)),
		exec.Command("iperf3", "-s", "-p", strconv.Itoa(iperfPort), "-A", "1"),
	}
	for _, s := range servers {
		if err := c.sb.Start(c.server.Name, s); err != nil {
			return err
		}
	}
	c.stopServers = func() {
		for _, s := range servers {
			_ = s.Process.Kill()
			_ = s.Wait()
		}
	}
	return nil
}

func (c *cluster) close() {
	if c.stopServers != nil {
		c.stopServers()
	}
	_ = sandbox.Down(c.sb.Config.Name, c.log)
}

func measuredService(name string, ips []string, typ corev1.ServiceType, ports []corev1.ServicePort) *corev1.Service {
	dual := corev1.IPFamilyPolicyRequireDualStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ips[0], ClusterIPs: ips, IPFamilyPolicy: &dual,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, Ports: ports},
	}
}

var bothFamilies = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}

// setEndpoints makes pods the ready endpoints of a measured Service in the
// given families (one EndpointSlice each), creating or replacing its slices.
func (c *cluster) setEndpoints(service string, fams []discoveryv1.AddressType, ports []int32, names []string, pods ...sandbox.Pod) error {
	ctx := context.Background()
	api := c.env.Client.DiscoveryV1().EndpointSlices(benchNS)
	for _, fam := range fams {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: service + "-" + strings.ToLower(string(fam)), Namespace: benchNS, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: fam,
		}
		for i := range ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &names[i], Port: &ports[i]})
		}
		for _, p := range pods {
			addr := p.IP4.String()
			if fam == discoveryv1.AddressTypeIPv6 {
				addr = p.IP6.String()
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: &p.Node,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: benchNS, Name: p.Name}})
		}
		old, err := api.Get(ctx, s.Name, metav1.GetOptions{})
		if err == nil {
			s.ResourceVersion = old.ResourceVersion
			_, err = api.Update(ctx, s, metav1.UpdateOptions{})
		} else {
			_, err = api.Create(ctx, s, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("EndpointSlice %s: %w", s.Name, err)
		}
	}
	return nil
}

// setChurnEndpoints changes the churn Service's endpoints in one family
// only: a change is one EndpointSlice write, as the timing assumes.
func (c *cluster) setChurnEndpoints(f family, pods ...sandbox.Pod) error {
	return c.setEndpoints("churn", []discoveryv1.AddressType{f.addressType}, []int32{sandbox.PodPort}, []string{"echo"}, pods...)
}

// grow stores other Services until the cluster has n of them: dual-stack
// ClusterIP Services with one endpoint per family, written to etcd
// directly (kubeenv.StoreDirect says why) with the IPAddress objects the
// API server's allocator would have made.
func (c *cluster) grow(n int) error {
	const chunk = 2000
	for lo := c.fillers; lo < n; lo += chunk {
		var objs []kubeenv.StoredObject
		for i := lo; i < min(lo+chunk, n); i++ {
			svc := fillerService(i)
			objs = append(objs, kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc})
			for fi, fam := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
				objs = append(objs,
					kubeenv.StoredObject{Resource: networkingv1.Resource("ipaddresses"), Version: networkingv1.SchemeGroupVersion, Object: ipAddressOf(svc, fi)},
					kubeenv.StoredObject{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: fillerSlice(i, fam)})
			}
		}
		if err := c.env.StoreDirect(context.Background(), objs); err != nil {
			return err
		}
		fmt.Fprintf(c.log, "    stored %d/%d other Services\n", min(lo+chunk, n), n)
	}
	if n > c.fillers {
		c.fillers = n
	}
	return waitListed(c.env.Client, n+3) // + kubernetes, bench, churn
}

func fillerName(i int) string { return fmt.Sprintf("other-%06d", i) }

// fillerService i has ClusterIPs 10.96.1.0 + i and fd00:10:96::1:0 + i.
func fillerService(i int) *corev1.Service {
	n := i + 256
	v4 := netip.AddrFrom4([4]byte{10, byte(96 + n>>16), byte(n >> 8), byte(n)})
	v6 := netip.MustParseAddr("fd00:10:96::").As16()
	m := i + 0x10000
	v6[13], v6[14], v6[15] = byte(m>>16), byte(m>>8), byte(m)
	ips := []string{v4.String(), netip.AddrFrom16(v6).String()}
	dual, cluster := corev1.IPFamilyPolicyRequireDualStack, corev1.ServiceInternalTrafficPolicyCluster
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fillerName(i), Namespace: benchNS},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, IPFamilyPolicy: &dual,
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: &cluster,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// ipAddressOf is the IPAddress object of the Service's ClusterIP of family fi.
func ipAddressOf(svc *corev1.Service, fi int) *networkingv1.IPAddress {
	ip := clusterIPAddress(svc)
	ip.Name = svc.Spec.ClusterIPs[fi]
	ip.Labels[networkingv1.LabelIPAddressFamily] = string(svc.Spec.IPFamilies[fi])
	return ip
}

// fillerSlice gives Service i one endpoint (an address nothing answers on:
// no traffic goes to other Services).
func fillerSlice(i int, fam discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	port, name := int32(8080), "http"
	addr := netip.AddrFrom4([4]byte{10, byte(128 + i>>16), byte(i >> 8), byte(i)})
	if fam == discoveryv1.AddressTypeIPv6 {
		a := netip.MustParseAddr("fd00:10:128::").As16()
		a[13], a[14], a[15] = byte(i>>16), byte(i>>8), byte(i)
		addr = netip.AddrFrom16(a)
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fillerName(i) + "-" + strings.ToLower(string(fam)), Namespace: benchNS,
			Labels: map[string]string{discoveryv1.LabelServiceName: fillerName(i)}},
		AddressType: fam,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr.String()}}},
	}
}

// family is one address family of the measured Services.
type family struct {
	name              string // IPv4, IPv6
	addressType       discoveryv1.AddressType
	bench, churn      string // ClusterIPs
	server, r1, r2    string // pod addresses
	nodeIP, directSrc string
}

func (c *cluster) families() []family {
	return []family{
		{"IPv4", discoveryv1.AddressTypeIPv4, benchIPs[0], churnIPs[0], c.server.IP4.String(), c.r1.IP4.String(), c.r2.IP4.String(), c.node.IP4.String(), directSrc4.String()},
		{"IPv6", discoveryv1.AddressTypeIPv6, benchIPs[1], churnIPs[1], c.server.IP6.String(), c.r1.IP6.String(), c.r2.IP6.String(), c.node.IP6.String(), directSrc6.String()},
	}
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// answers reports whether one request to addr from the client is answered
// by backend.
func (c *cluster) answers(addr, backend string) bool {
	out, err := c.sb.Output(c.client.Name, filepath.Join(c.binDir, sandbox.LabBinary), "pod", "request", "--timeout", "200ms", addr)
	return err == nil && strings.Contains(string(out), `"backend":"`+backend+`"`)
}

// waitServing waits until every measured Service answers in both families:
// a peer has programmed all Services (netcube and kube-proxy apply their
// initial state at once, so the last ones are in as well).
func (c *cluster) waitServing(timeout time.Duration, alive func() bool) error {
	for _, f := range c.families() {
		for _, t := range []struct{ addr, backend string }{
			{hostPort(f.bench, 80), "bench"}, {hostPort(f.churn, churnPort), c.r1.Name},
		} {
			ok := waitUntil(timeout, 20*time.Millisecond, func() bool { return !alive() || c.answers(t.addr, t.backend) })
			if !ok {
				return fmt.Errorf("%s not answered by %s after %s", t.addr, t.backend, timeout)
			}
			if !alive() {
				return fmt.Errorf("the data plane's process exited while syncing")
			}
		}
	}
	return nil
}
