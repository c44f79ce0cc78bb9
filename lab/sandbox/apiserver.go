package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/netcube/netcube/lab/kubeenv"
)

// The API server lives on the underlay, as on a control-plane node.
var (
	apiServerIP4 = netip.MustParseAddr("172.30.0.2")
	apiServerIP6 = netip.MustParseAddr("fd00:172:30::2")
)

const apiServerPort = 6443

// The underlay namespace, where the API server and the e2e runner live,
// reaches the LoadBalancer IPs from an address outside the nodes' subnet
// (and its /16), as a client of a real cluster does: the upstream tests
// of externalTrafficPolicy Local take a client in the nodes' /16 for a
// node's SNAT. The nodes route it back to the underlay.
var (
	lbClient4 = netip.MustParsePrefix("172.29.0.2/32")
	lbClient6 = netip.MustParsePrefix("fd00:172:29::2/128")
)

func (t Topology) kubeDir() string { return filepath.Join(t.StateDir, "kube") }

// Kubeconfig is the admin kubeconfig of the sandbox's API server (the agents
// use it too: its address is reachable from every node).
func (t Topology) Kubeconfig() string { return filepath.Join(t.kubeDir(), "kubeconfig") }

// startAPIServer runs etcd and kube-apiserver in the underlay namespace and
// creates the example Services through the API.
func startAPIServer(cfg Config, t Topology) (*kubeenv.Env, error) {
	if err := steps(
		func() error { return ip(t.Underlay, "addr", "add", apiServerIP4.String()+"/24", "dev", "br0") },
		func() error {
			return ip(t.Underlay, "-6", "addr", "add", apiServerIP6.String()+"/64", "dev", "br0", "nodad")
		},
		func() error { return routeLBClient(t) },
	); err != nil {
		return nil, err
	}
	env, err := kubeenv.Start(kubeenv.Options{
		Dir: t.kubeDir(), Netns: t.Underlay, Address: apiServerIP4.String(), Port: apiServerPort, Detach: true,
		ServiceCIDRs: cfg.ServiceCIDRs, ToolsDir: cfg.ToolsDir,
	})
	if err != nil {
		return nil, err
	}
	// Bulk loads (the benchmark's thousands of Services) write to etcd
	// directly; Env tells them where it listens.
	if err := os.WriteFile(filepath.Join(t.kubeDir(), "etcd-url"), []byte(env.EtcdURL), 0o644); err != nil {
		return nil, err
	}
	if cfg.Manifests != "" {
		return nil, fmt.Errorf("--manifests and --apiserver together are not supported: create objects with the API")
	}
	// The Node objects carry the pod CIDRs; a real node's kubelet adopts
	// its own when it registers.
	if err := createFromYAML(env.Client, t.NodesYAML()); err != nil {
		return nil, err
	}
	if cfg.Kubelet { // the example Services' backends are hand-made pods
		return env, nil // the chart installs the CRDs, then the pool is made
	}
	if err := kubeenv.InstallCRDs(env.Config); err != nil {
		return nil, err
	}
	if err := createLBPool(env.Config); err != nil {
		return nil, err
	}
	if t.Routed() {
		if err := createBGPPeerings(env.Config, t); err != nil {
			return nil, err
		}
	}
	// The sandbox's own pods, as a kubelet would report them.
	if err := createFromYAML(env.Client, t.PodsYAML()); err != nil {
		return nil, err
	}
	for _, content := range t.ExampleManifests() {
		if err := createFromYAML(env.Client, content); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// Env returns the sandbox's control plane: a client (usable from the host's
// namespace) and etcd's address, for kubeenv.StoreDirect.
func (sb *Sandbox) Env() (*kubeenv.Env, error) {
	if !sb.Config.APIServer {
		return nil, fmt.Errorf("sandbox %s runs without an API server (up --apiserver)", sb.Config.Name)
	}
	env, err := kubeenv.Connect(sb.Topology.kubeDir(), sb.Topology.Underlay)
	if err != nil {
		return nil, err
	}
	url, err := os.ReadFile(filepath.Join(sb.Topology.kubeDir(), "etcd-url"))
	if err != nil {
		return nil, err
	}
	env.EtcdURL = string(url)
	return env, nil
}

// Client returns a client of the sandbox's API server (usable from the
// host's namespace: it dials from inside the underlay namespace).
func (sb *Sandbox) Client() (kubernetes.Interface, error) {
	if !sb.Config.APIServer {
		return nil, fmt.Errorf("sandbox %s runs without an API server (up --apiserver)", sb.Config.Name)
	}
	env, err := kubeenv.Connect(sb.Topology.kubeDir(), sb.Topology.Underlay)
	if err != nil {
		return nil, err
	}
	return env.Client, nil
}

// createFromYAML creates the Nodes, Namespaces, Pods, Services and EndpointSlices of a
// multi-document YAML string.
// CreateFromYAML creates the objects of a multi-document YAML (Services,
// EndpointSlices, Nodes, Pods) through the API.
func CreateFromYAML(c kubernetes.Interface, content string) error { return createFromYAML(c, content) }

func createFromYAML(c kubernetes.Interface, content string) error {
	ctx := context.Background()
	for _, doc := range strings.Split(content, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			return fmt.Errorf("decode example manifest: %w", err)
		}
		switch o := obj.(type) {
		case *corev1.Service:
			_, err = c.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = c.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Node: // status is written apart, as kubelet does
			var created *corev1.Node
			if created, err = c.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{}); err == nil {
				created.Status = o.Status
				_, err = c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			}
		case *corev1.Namespace: // "default" exists already
			if _, err = c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case *corev1.Pod: // in a namespace with a service account (no controller manager makes it)
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: o.Namespace}}
			if _, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, sa, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				err = nil
			}
			var created *corev1.Pod
			if err == nil {
				created, err = c.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
			if err == nil {
				created.Status = o.Status
				_, err = c.CoreV1().Pods(o.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			}
		default:
			err = fmt.Errorf("unexpected %T", obj)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// routeLBClient gives the underlay its LoadBalancer client addresses
// (lbClient4, lbClient6): the source of what it sends to the pool's
// addresses, routed back to it by every node.
func routeLBClient(t Topology) error {
	if t.Routed() {
		return routeUnderlayThroughRouter(t)
	}
	var fs []func() error
	for i, c := range []netip.Prefix{lbClient4, lbClient6} {
		family, via, pool := "-4", apiServerIP4, DefaultLBPoolCIDRs[i]
		if c.Addr().Is6() {
			family, via = "-6", apiServerIP6
		}
		fs = append(fs,
			func() error { return ip(t.Underlay, family, "addr", "add", c.String(), "dev", "lo") },
			func() error {
				return ip(t.Underlay, family, "route", "add", pool, "dev", "br0", "src", c.Addr().String())
			})
		for _, n := range t.Nodes {
			fs = append(fs, func() error {
				return ip(n.Netns, family, "route", "add", c.String(), "via", via.String())
			})
		}
	}
	return steps(fs...)
}
